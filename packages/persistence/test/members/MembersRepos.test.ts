/**
 * Contract suites of the members area's storage on every backend: `InvitationsRepo`, and the methods the members
 * and invitations flows added to `MembersRepo` and `RoleBindingsRepo` (keyset pages, removal, owner lookup, the
 * per-workspace lock).
 */
import { IdPrefix, InvitationId, OrgId, ProjectId, UserId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Deferred, Effect, Fiber, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { ApiKeysRepo } from "../../src/apiKeys/ApiKeysRepo.ts"
import { UniqueViolation } from "../../src/errors.ts"
import { UsersRepo } from "../../src/identity/UsersRepo.ts"
import type { PagePosition } from "../../src/keyset.ts"
import { InvitationsRepo } from "../../src/members/InvitationsRepo.ts"
import { MembersRepo } from "../../src/members/MembersRepo.ts"
import type { InvitationRow } from "../../src/members/rows.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { RoleBindingsRepo } from "../../src/workspaces/RoleBindingsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, apiKeyRow, at, bindingRow, memberRow, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const DAY_MINUTES = 24 * 60

const orgRow = (minutes = 0): OrganizationRow => accountRootRow("Acme", minutes)

const freshEmail = () => `inv-${randomUUID()}@example.test`

const invitationRow = (
  org: OrganizationRow,
  invitedBy: UserId,
  overrides: Partial<InvitationRow> = {}
): InvitationRow => ({
  id: newId(InvitationId, IdPrefix.invitation),
  orgId: org.id,
  email: freshEmail(),
  role: "builder",
  status: "pending",
  tokenHash: randomUUID(),
  invitedBy,
  expiresAt: at(7 * DAY_MINUTES),
  createdAt: at(0),
  acceptedAt: null,
  acceptedBy: null,
  revokedAt: null,
  ...overrides
})

/** The email `newUser` gives a user. */
const emailOf = (id: string) => `${id}@example.test`

/** A stored user (invitations reference their inviter and acceptor), with `emailOf(id)` as its email. */
const newUser = Effect.fnUntraced(function*(displayName: string | null = null) {
  const id = newId(UserId, IdPrefix.user)
  yield* (yield* UsersRepo).insert({
    id,
    email: emailOf(id),
    displayName,
    lastOrgSlug: null,
    emailVerified: true,
    createdAt: at(0),
    updatedAt: at(0)
  })
  return id
})

const newOrg = Effect.fnUntraced(function*(minutes = 0) {
  const org = orgRow(minutes)
  yield* (yield* OrganizationsRepo).insert(org)
  return org
})

const insertInvitations = Effect.fnUntraced(function*(rows: ReadonlyArray<InvitationRow>) {
  const repo = yield* InvitationsRepo
  yield* Effect.forEach(rows, repo.insert, { discard: true })
})

/** The area's repositories plus the workspace tables they join (one set of shared memory tables per suite). */
const repositories = {
  memory: Layer.mergeAll(
    InvitationsRepo.memory,
    OrganizationsRepo.memory,
    MembersRepo.memory,
    RoleBindingsRepo.memory,
    UsersRepo.memory,
    ApiKeysRepo.memory
  ),
  sql: Layer.mergeAll(
    InvitationsRepo.sql,
    OrganizationsRepo.sql,
    MembersRepo.sql,
    RoleBindingsRepo.sql,
    UsersRepo.sql,
    ApiKeysRepo.sql
  )
}

const ids = (rows: ReadonlyArray<{ readonly id: string }>) => rows.map((row) => row.id)

/** Rows sorted as every list is: newest first by (createdAt, id). */
const newestFirst = <A extends { readonly createdAt: Date; readonly id: string }>(rows: ReadonlyArray<A>) =>
  [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))

class Abort extends Data.TaggedError("Abort")<{}> {}

/** Three pending invitations of one workspace, and a user to accept them. */
const pendingInvitations = Effect.gen(function*() {
  const org = yield* newOrg()
  const [inviter, invitee] = [yield* newUser(), yield* newUser()]
  const invitations = [invitationRow(org, inviter), invitationRow(org, inviter), invitationRow(org, inviter)] as const
  yield* insertInvitations(invitations)
  return { invitee, invitations }
})

/** When `invitationsOfEveryStatus` is listed. */
const listedAt = at(50)

/** A workspace's invitations in each status as of `listedAt`, and one of another workspace. */
const invitationsOfEveryStatus = Effect.gen(function*() {
  const [org, other] = [yield* newOrg(), yield* newOrg()]
  const [inviter, invitee] = [yield* newUser(), yield* newUser()]
  const rows = [
    invitationRow(org, inviter, { createdAt: at(1), expiresAt: at(40) }), // expired by then
    invitationRow(org, inviter, { createdAt: at(2), status: "accepted", acceptedAt: at(3), acceptedBy: invitee }),
    invitationRow(org, inviter, { createdAt: at(2) }),
    invitationRow(org, inviter, { createdAt: at(4), status: "revoked", revokedAt: at(5) }),
    invitationRow(org, inviter, { createdAt: at(6), expiresAt: at(50) }), // expires exactly then
    invitationRow(org, inviter, { createdAt: at(7) })
  ]
  yield* insertInvitations([...rows, invitationRow(other, inviter)])
  return { org, rows, all: newestFirst(rows) }
})

/** Invitations to one address in two workspaces (three actionable), and what its list shows, newest first. */
const invitationsToOneAddress = Effect.gen(function*() {
  const [acme, globex] = [yield* newOrg(), yield* newOrg()]
  const inviter = yield* newUser()
  const email = freshEmail()
  const mine = [
    invitationRow(acme, inviter, { email, createdAt: at(1), role: "admin" }),
    invitationRow(globex, inviter, { email, createdAt: at(2) }),
    invitationRow(globex, inviter, { email, createdAt: at(3) })
  ]
  yield* insertInvitations([
    ...mine,
    invitationRow(acme, inviter, { email, createdAt: at(4), expiresAt: at(10) }),
    invitationRow(acme, inviter, { email, createdAt: at(5), status: "revoked", revokedAt: at(6) }),
    invitationRow(acme, inviter, { createdAt: at(7) })
  ])
  const orgOf = (org: OrganizationRow) => ({ id: org.id, name: org.name, slug: org.slug, publicId: org.publicId })
  const expected = [
    { invitation: mine[2]!, org: orgOf(globex) },
    { invitation: mine[1]!, org: orgOf(globex) },
    { invitation: mine[0]!, org: orgOf(acme) }
  ]
  return { email, now: at(10), expected }
})

describeContract("InvitationsRepo", repositories, (it) => {
  it.effect("finds an invitation by id and by token hash; a reused token hash is a UniqueViolation", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const org = yield* newOrg()
      const invitation = invitationRow(org, yield* newUser())
      yield* repo.insert(invitation)
      assert.deepStrictEqual(yield* repo.findById(invitation.id), Option.some(invitation))
      assert.deepStrictEqual(yield* repo.findByTokenHash(invitation.tokenHash), Option.some(invitation))
      assert.isTrue(Option.isNone(yield* repo.findByTokenHash(randomUUID())))
      assert.isTrue(Option.isNone(yield* repo.findById(newId(InvitationId, IdPrefix.invitation))))
      const sameToken = invitationRow(org, invitation.invitedBy, { tokenHash: invitation.tokenHash })
      const error = yield* Effect.flip(repo.insert(sameToken))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "invitations_token_hash_key")
    }))

  it.effect("a failed transaction leaves no invitation behind", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const org = yield* newOrg()
      const invitation = invitationRow(org, yield* newUser())
      const error = yield* Effect.flip((yield* Transactor).withTransaction(Effect.gen(function*() {
        yield* repo.insert(invitation)
        return yield* new Abort()
      })))
      assert.instanceOf(error, Abort)
      assert.isTrue(Option.isNone(yield* repo.findById(invitation.id)))
    }))

  it.effect("findPending finds the pending invitation of an address to a workspace until its expiry", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const [org, other] = [yield* newOrg(), yield* newOrg()]
      const inviter = yield* newUser()
      const email = freshEmail()
      const older = invitationRow(org, inviter, {
        email,
        createdAt: at(0),
        expiresAt: at(10),
        status: "revoked",
        revokedAt: at(1)
      })
      const pending = invitationRow(org, inviter, { email, createdAt: at(5), expiresAt: at(100) })
      yield* insertInvitations([older, pending, invitationRow(other, inviter, { email: freshEmail() })])
      assert.deepStrictEqual(yield* repo.findPending({ orgId: org.id, email, now: at(99) }), Option.some(pending))
      assert.isTrue(Option.isNone(yield* repo.findPending({ orgId: org.id, email, now: at(100) })), "not at its expiry")
      assert.isTrue(Option.isNone(yield* repo.findPending({ orgId: other.id, email, now: at(0) })))
      assert.isTrue(Option.isNone(yield* repo.findPending({ orgId: org.id, email: freshEmail(), now: at(0) })))
    }))

  it.effect("accept ends a pending, unexpired invitation once, and then it is not revoked", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { invitee, invitations: [a] } = yield* pendingInvitations
      const accepted = yield* repo.accept({ id: a.id, now: at(1), userId: invitee })
      const expected = { ...a, status: "accepted" as const, acceptedAt: at(1), acceptedBy: invitee }
      assert.deepStrictEqual(accepted, Option.some(expected))
      assert.deepStrictEqual(yield* repo.findById(a.id), accepted)
      assert.isTrue(Option.isNone(yield* repo.accept({ id: a.id, now: at(2), userId: invitee })), "accepted once")
      const revokeAccepted = yield* repo.revoke({ id: a.id, now: at(2) })
      assert.isTrue(Option.isNone(revokeAccepted), "an accepted invitation is not revoked")
      const unknown = newId(InvitationId, IdPrefix.invitation)
      assert.isTrue(Option.isNone(yield* repo.accept({ id: unknown, now: at(1), userId: invitee })))
    }))

  it.effect("revoke ends a pending, unexpired invitation once, and then it is not accepted", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { invitee, invitations: [, b] } = yield* pendingInvitations
      const revoked = yield* repo.revoke({ id: b.id, now: at(3) })
      assert.deepStrictEqual(revoked, Option.some({ ...b, status: "revoked" as const, revokedAt: at(3) }))
      assert.isTrue(Option.isNone(yield* repo.revoke({ id: b.id, now: at(4) })), "revoked once")
      const acceptRevoked = yield* repo.accept({ id: b.id, now: at(4), userId: invitee })
      assert.isTrue(Option.isNone(acceptRevoked), "a revoked invitation is not accepted")
    }))

  it.effect("at its expiry an invitation is neither accepted nor revoked", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { invitee, invitations: [, , c] } = yield* pendingInvitations
      assert.isTrue(Option.isNone(yield* repo.accept({ id: c.id, now: c.expiresAt, userId: invitee })))
      assert.isTrue(Option.isNone(yield* repo.revoke({ id: c.id, now: c.expiresAt })))
      assert.deepStrictEqual(yield* repo.findById(c.id), Option.some(c))
    }))

  it.effect("listPage lists a workspace's invitations newest first", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { org, all } = yield* invitationsOfEveryStatus
      assert.deepStrictEqual(yield* repo.listPage({ orgId: org.id, now: listedAt, limit: 100 }), all)
    }))

  it.effect("listPage walks every invitation exactly once by keyset positions", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { org, all } = yield* invitationsOfEveryStatus
      const walked: Array<InvitationRow> = []
      let after: PagePosition | undefined = undefined
      for (;;) {
        const page: ReadonlyArray<InvitationRow> = yield* repo.listPage({
          orgId: org.id,
          now: listedAt,
          limit: 2,
          ...(after === undefined ? {} : { after })
        })
        walked.push(...page)
        const last = page[page.length - 1]
        if (page.length < 2 || last === undefined) break
        after = { at: last.createdAt, key: last.id }
      }
      assert.deepStrictEqual(ids(walked), ids(all))
    }))

  it.effect("listPage filters by each status as of now: pending is unexpired, expired is pending past it", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { org, rows } = yield* invitationsOfEveryStatus
      const byStatus = (status: "pending" | "accepted" | "revoked" | "expired") =>
        repo.listPage({ orgId: org.id, now: listedAt, status, limit: 100 }).pipe(Effect.map(ids))
      assert.deepStrictEqual(yield* byStatus("pending"), ids(newestFirst([rows[5]!, rows[2]!])))
      assert.deepStrictEqual(yield* byStatus("expired"), ids(newestFirst([rows[4]!, rows[0]!])))
      assert.deepStrictEqual(yield* byStatus("accepted"), [rows[1]!.id])
      assert.deepStrictEqual(yield* byStatus("revoked"), [rows[3]!.id])
    }))

  it.effect("listPendingForEmail lists the address's actionable invitations in every workspace, with it", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { email, now, expected } = yield* invitationsToOneAddress
      assert.deepStrictEqual(yield* repo.listPendingForEmail({ email, now, limit: 10 }), expected)
      assert.deepStrictEqual(yield* repo.listPendingForEmail({ email: freshEmail(), now, limit: 10 }), [])
    }))

  it.effect("listPendingForEmail pages by keyset", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const { email, now, expected } = yield* invitationsToOneAddress
      const first = yield* repo.listPendingForEmail({ email, now, limit: 2 })
      assert.deepStrictEqual(first, expected.slice(0, 2))
      const last = first[1]!.invitation
      assert.deepStrictEqual(
        yield* repo.listPendingForEmail({ email, now, limit: 2, after: { at: last.createdAt, key: last.id } }),
        expected.slice(2)
      )
    }))
})

describeContract("MembersRepo (members and invitations)", repositories, (it) => {
  it.effect("findById finds a member only in its own workspace; remove deletes it once", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const [org, other] = [yield* newOrg(), yield* newOrg()]
      const member = memberRow(org, yield* newUser(), 1)
      yield* repo.insert(member)
      assert.deepStrictEqual(
        yield* repo.findById({ orgId: org.id, id: member.id }),
        Option.some({ ...member, email: emailOf(member.subjectId), displayName: null })
      )
      assert.isTrue(Option.isNone(yield* repo.findById({ orgId: other.id, id: member.id })))
      assert.isFalse(yield* repo.remove({ orgId: other.id, id: member.id }), "not from another workspace")
      assert.isTrue(yield* repo.remove({ orgId: org.id, id: member.id }))
      assert.isFalse(yield* repo.remove({ orgId: org.id, id: member.id }))
      assert.isTrue(Option.isNone(yield* repo.findById({ orgId: org.id, id: member.id })))
      // The subject may join again.
      yield* repo.insert(memberRow(org, member.subjectId, 2))
    }))

  it.effect("findById and listPage read each subject's email and display name: a user's, a key's principal's", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const org = yield* newOrg()
      const ada = yield* newUser("Ada")
      const key = apiKeyRow(org, 0)
      yield* (yield* ApiKeysRepo).insert(key)
      const user = memberRow(org, ada, 1)
      const principal = memberRow(org, key.servicePrincipalId, 2, { subjectType: "service_principal" })
      const unknown = memberRow(org, newId(UserId, IdPrefix.user), 3)
      yield* Effect.forEach([user, principal, unknown], repo.insert, { discard: true })
      const profiles = (yield* repo.listPage({ orgId: org.id, limit: 10 })).map(({ id, email, displayName }) => ({
        id,
        email,
        displayName
      }))
      assert.deepStrictEqual(profiles, [
        { id: unknown.id, email: null, displayName: null },
        { id: principal.id, email: null, displayName: "API Key: deploy" },
        { id: user.id, email: emailOf(ada), displayName: "Ada" }
      ])
      const found = Option.getOrThrow(yield* repo.findById({ orgId: org.id, id: principal.id }))
      assert.deepStrictEqual([found.email, found.displayName], [null, "API Key: deploy"])
    }))

  it.effect("listPage walks a workspace's members newest first by keyset", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const [org, other] = [yield* newOrg(), yield* newOrg()]
      const rows = [
        memberRow(org, yield* newUser(), 1),
        memberRow(org, yield* newUser(), 3),
        memberRow(org, yield* newUser(), 3),
        memberRow(org, yield* newUser(), 2),
        memberRow(org, "sp_x", 5, { subjectType: "service_principal" })
      ]
      yield* Effect.forEach([...rows, memberRow(other, yield* newUser(), 4)], repo.insert, { discard: true })
      const expected = newestFirst(rows.map((row) => ({ ...row, createdAt: row.joinedAt })))
        .map(({ createdAt: _, ...row }) => ({
          ...row,
          email: row.subjectType === "user" ? emailOf(row.subjectId) : null,
          displayName: null
        }))
      assert.deepStrictEqual(yield* repo.listPage({ orgId: org.id, limit: 10 }), expected)
      const first = yield* repo.listPage({ orgId: org.id, limit: 3 })
      assert.deepStrictEqual(first, expected.slice(0, 3))
      const last = first[2]!
      assert.deepStrictEqual(
        yield* repo.listPage({ orgId: org.id, limit: 3, after: { at: last.joinedAt, key: last.id } }),
        expected.slice(3)
      )
    }))

  it.effect("OrganizationsRepo.lockWorkspace: true for a known workspace, and changes under it run one at a time", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const { withTransaction } = yield* Transactor
      const org = yield* newOrg()
      assert.isFalse(yield* withTransaction(repo.lockWorkspace(newId(OrgId, IdPrefix.org))))
      const order: Array<string> = []
      const locked = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(withTransaction(Effect.gen(function*() {
        assert.isTrue(yield* repo.lockWorkspace(org.id))
        yield* Deferred.succeed(locked, undefined)
        yield* Effect.sleep("150 millis")
        order.push("first committed")
      })))
      yield* Deferred.await(locked)
      yield* withTransaction(Effect.gen(function*() {
        yield* repo.lockWorkspace(org.id)
        order.push("second locked")
      }))
      yield* Fiber.join(first)
      assert.deepStrictEqual(order, ["first committed", "second locked"])
    }))
})

/** Bindings of three users and a key on a workspace (one project-scoped), and two on another workspace. */
const seededBindings = Effect.gen(function*() {
  const [org, other] = [yield* newOrg(), yield* newOrg()]
  const [ada, bob, cy] = [yield* newUser(), yield* newUser(), yield* newUser()]
  const project = { scopeKind: "project" as const, scopeRef: newId(ProjectId, IdPrefix.project) }
  const rows = [
    bindingRow(org, ada, "owner", { createdAt: at(1) }),
    bindingRow(org, bob, "viewer", { createdAt: at(2) }),
    bindingRow(org, bob, "project_admin", { ...project, createdAt: at(3) }),
    bindingRow(org, cy, "owner", { createdAt: at(4) }),
    bindingRow(org, "sp_key", "owner", { subjectType: "service_principal", createdAt: at(5) }),
    bindingRow(other, ada, "viewer", { createdAt: at(6) }),
    bindingRow(other, bob, "owner", { createdAt: at(7) })
  ] as const
  yield* Effect.forEach(rows, (yield* RoleBindingsRepo).insert, { discard: true })
  return { org, other, ada, bob, rows }
})

/** Two bindings of `ada` on a workspace (granted out of insertion order), one of `bob`, one of `ada` elsewhere. */
const bindingsToRemove = Effect.gen(function*() {
  const [org, other] = [yield* newOrg(), yield* newOrg()]
  const [ada, bob] = [yield* newUser(), yield* newUser()]
  const rows = [
    bindingRow(org, ada, "admin", { createdAt: at(2) }),
    bindingRow(org, ada, "billing_admin", { createdAt: at(1) }),
    bindingRow(org, bob, "viewer"),
    bindingRow(other, ada, "owner")
  ] as const
  yield* Effect.forEach(rows, (yield* RoleBindingsRepo).insert, { discard: true })
  const subject = (orgId: OrgId, subjectId: string) => ({ orgId, subjectType: "user" as const, subjectId })
  return { rows, ada: subject(org.id, ada), bob: subject(org.id, bob), adaElsewhere: subject(other.id, ada) }
})

describeContract("RoleBindingsRepo (members and invitations)", repositories, (it) => {
  it.effect("listForSubjectsInOrg lists the bindings of several subjects on one workspace, in grant order", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const { org, ada, bob, rows } = yield* seededBindings
      const subjectIds = [ada, bob]
      assert.deepStrictEqual(yield* repo.listForSubjectsInOrg({ orgId: org.id, subjectIds }), [
        rows[0],
        rows[1],
        rows[2]
      ])
      assert.deepStrictEqual(yield* repo.listForSubjectsInOrg({ orgId: org.id, subjectIds: [] }), [])
    }))

  it.effect("listByRoleInOrg lists a role's holders on one workspace, in grant order", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const { org, other, rows } = yield* seededBindings
      assert.deepStrictEqual(yield* repo.listByRoleInOrg({ orgId: org.id, role: "owner" }), [rows[0], rows[3], rows[4]])
      assert.deepStrictEqual(yield* repo.listByRoleInOrg({ orgId: other.id, role: "owner" }), [rows[6]])
      assert.deepStrictEqual(yield* repo.listByRoleInOrg({ orgId: org.id, role: "admin" }), [])
    }))

  it.effect("removeForSubject is undone with a failed transaction", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const { withTransaction } = yield* Transactor
      const { rows, ada } = yield* bindingsToRemove
      yield* Effect.flip(withTransaction(Effect.andThen(repo.removeForSubject(ada), new Abort())))
      assert.deepStrictEqual(yield* repo.listForSubject(ada), [rows[1], rows[0]])
    }))

  it.effect("removeForSubject deletes the subject's bindings on one workspace only, in grant order", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const { rows, ada, bob, adaElsewhere } = yield* bindingsToRemove
      assert.deepStrictEqual(yield* repo.removeForSubject(ada), [rows[1], rows[0]])
      assert.deepStrictEqual(yield* repo.listForSubject(ada), [])
      assert.deepStrictEqual(yield* repo.listForSubject(bob), [rows[2]])
      assert.deepStrictEqual(yield* repo.listForSubject(adaElsewhere), [rows[3]])
      assert.deepStrictEqual(yield* repo.removeForSubject(ada), [])
    }))
})
