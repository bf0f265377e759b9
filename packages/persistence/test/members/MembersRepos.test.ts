/**
 * Contract suites of the members area's storage on every backend: `InvitationsRepo`, and the methods the members
 * and invitations flows added to `MembersRepo` and `RoleBindingsRepo` (keyset pages, removal, owner lookup, the
 * per-workspace lock).
 */
import type { WorkspaceRole } from "@cp/domain/access"
import { IdPrefix, InvitationId, OrgId, ProjectId, UserId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Deferred, Effect, Fiber, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import { UsersRepo } from "../../src/identity/UsersRepo.ts"
import { type InvitationRow, InvitationsRepo } from "../../src/members/InvitationsRepo.ts"
import { Transactor } from "../../src/Transactor.ts"
import { MembersRepo } from "../../src/workspaces/MembersRepo.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { RoleBindingsRepo } from "../../src/workspaces/RoleBindingsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, bindingRow, memberRow, newId } from "../fixtures.ts"
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

/** A stored user (invitations reference their inviter and acceptor). */
const newUser = Effect.fnUntraced(function*() {
  const id = newId(UserId, IdPrefix.user)
  yield* (yield* UsersRepo).insert({
    id,
    email: freshEmail(),
    displayName: null,
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
    UsersRepo.memory
  ),
  sql: Layer.mergeAll(InvitationsRepo.sql, OrganizationsRepo.sql, MembersRepo.sql, RoleBindingsRepo.sql, UsersRepo.sql)
}

const ids = (rows: ReadonlyArray<{ readonly id: string }>) => rows.map((row) => row.id)

/** Rows sorted as every list is: newest first by (createdAt, id). */
const newestFirst = <A extends { readonly createdAt: Date; readonly id: string }>(rows: ReadonlyArray<A>) =>
  [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))

class Abort extends Data.TaggedError("Abort")<{}> {}

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
      assert.deepStrictEqual(yield* repo.findPending(org.id, email, at(99)), Option.some(pending))
      assert.isTrue(Option.isNone(yield* repo.findPending(org.id, email, at(100))), "not at its expiry")
      assert.isTrue(Option.isNone(yield* repo.findPending(other.id, email, at(0))))
      assert.isTrue(Option.isNone(yield* repo.findPending(org.id, freshEmail(), at(0))))
    }))

  it.effect("accept and revoke end a pending, unexpired invitation once; never an expired or ended one", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const org = yield* newOrg()
      const [inviter, invitee] = [yield* newUser(), yield* newUser()]
      const [a, b, c] = [invitationRow(org, inviter), invitationRow(org, inviter), invitationRow(org, inviter)]
      yield* insertInvitations([a, b, c])

      const accepted = yield* repo.accept(a.id, at(1), invitee)
      const expected = { ...a, status: "accepted" as const, acceptedAt: at(1), acceptedBy: invitee }
      assert.deepStrictEqual(accepted, Option.some(expected))
      assert.deepStrictEqual(yield* repo.findById(a.id), accepted)
      assert.isTrue(Option.isNone(yield* repo.accept(a.id, at(2), invitee)), "accepted once")
      assert.isTrue(Option.isNone(yield* repo.revoke(a.id, at(2))), "an accepted invitation is not revoked")

      const revoked = yield* repo.revoke(b.id, at(3))
      assert.deepStrictEqual(revoked, Option.some({ ...b, status: "revoked" as const, revokedAt: at(3) }))
      assert.isTrue(Option.isNone(yield* repo.revoke(b.id, at(4))), "revoked once")
      assert.isTrue(Option.isNone(yield* repo.accept(b.id, at(4), invitee)), "a revoked invitation is not accepted")

      // At its expiry, neither.
      assert.isTrue(Option.isNone(yield* repo.accept(c.id, c.expiresAt, invitee)))
      assert.isTrue(Option.isNone(yield* repo.revoke(c.id, c.expiresAt)))
      assert.deepStrictEqual(yield* repo.findById(c.id), Option.some(c))
      assert.isTrue(Option.isNone(yield* repo.accept(newId(InvitationId, IdPrefix.invitation), at(1), invitee)))
    }))

  it.effect("listPage: a workspace's invitations newest first, keyset pages, and each status as of now", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const [org, other] = [yield* newOrg(), yield* newOrg()]
      const [inviter, invitee] = [yield* newUser(), yield* newUser()]
      const now = at(50)
      const rows = [
        invitationRow(org, inviter, { createdAt: at(1), expiresAt: at(40) }), // expired by now
        invitationRow(org, inviter, { createdAt: at(2), status: "accepted", acceptedAt: at(3), acceptedBy: invitee }),
        invitationRow(org, inviter, { createdAt: at(2) }),
        invitationRow(org, inviter, { createdAt: at(4), status: "revoked", revokedAt: at(5) }),
        invitationRow(org, inviter, { createdAt: at(6), expiresAt: at(50) }), // expires exactly now
        invitationRow(org, inviter, { createdAt: at(7) })
      ]
      yield* insertInvitations([...rows, invitationRow(other, inviter)])
      const all = newestFirst(rows)
      assert.deepStrictEqual(yield* repo.listPage({ orgId: org.id, now, limit: 100 }), all)

      // Page by page with keyset positions: every row exactly once.
      const walked: Array<InvitationRow> = []
      let after: { createdAt: Date; id: string } | undefined = undefined
      for (;;) {
        const page: ReadonlyArray<InvitationRow> = yield* repo.listPage({
          orgId: org.id,
          now,
          limit: 2,
          ...(after === undefined ? {} : { after })
        })
        walked.push(...page)
        const last = page[page.length - 1]
        if (page.length < 2 || last === undefined) break
        after = { createdAt: last.createdAt, id: last.id }
      }
      assert.deepStrictEqual(ids(walked), ids(all))

      const byStatus = (status: "pending" | "accepted" | "revoked" | "expired") =>
        repo.listPage({ orgId: org.id, now, status, limit: 100 }).pipe(Effect.map(ids))
      assert.deepStrictEqual(yield* byStatus("pending"), ids(newestFirst([rows[5]!, rows[2]!])))
      assert.deepStrictEqual(yield* byStatus("expired"), ids(newestFirst([rows[4]!, rows[0]!])))
      assert.deepStrictEqual(yield* byStatus("accepted"), [rows[1]!.id])
      assert.deepStrictEqual(yield* byStatus("revoked"), [rows[3]!.id])
    }))

  it.effect("listPendingForEmail: the address's actionable invitations in every workspace, with the workspace", () =>
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const [acme, globex] = [yield* newOrg(), yield* newOrg()]
      const inviter = yield* newUser()
      const email = freshEmail()
      const now = at(10)
      const mine = [
        invitationRow(acme, inviter, { email, createdAt: at(1), role: "admin" as WorkspaceRole }),
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
      assert.deepStrictEqual(yield* repo.listPendingForEmail({ email, now, limit: 10 }), expected)
      const first = yield* repo.listPendingForEmail({ email, now, limit: 2 })
      assert.deepStrictEqual(first, expected.slice(0, 2))
      const last = first[1]!.invitation
      assert.deepStrictEqual(
        yield* repo.listPendingForEmail({ email, now, limit: 2, after: { createdAt: last.createdAt, id: last.id } }),
        expected.slice(2)
      )
      assert.deepStrictEqual(yield* repo.listPendingForEmail({ email: freshEmail(), now, limit: 10 }), [])
    }))
})

describeContract("MembersRepo (members and invitations)", repositories, (it) => {
  it.effect("findById finds a member only in its own workspace; remove deletes it once", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const [org, other] = [yield* newOrg(), yield* newOrg()]
      const member = memberRow(org, yield* newUser(), 1)
      yield* repo.insert(member)
      assert.deepStrictEqual(yield* repo.findById(org.id, member.id), Option.some(member))
      assert.isTrue(Option.isNone(yield* repo.findById(other.id, member.id)))
      assert.isFalse(yield* repo.remove(other.id, member.id), "not from another workspace")
      assert.isTrue(yield* repo.remove(org.id, member.id))
      assert.isFalse(yield* repo.remove(org.id, member.id))
      assert.isTrue(Option.isNone(yield* repo.findById(org.id, member.id)))
      // The subject may join again.
      yield* repo.insert(memberRow(org, member.subjectId, 2))
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
        .map(({ createdAt: _, ...row }) => row)
      assert.deepStrictEqual(yield* repo.listPage({ orgId: org.id, limit: 10 }), expected)
      const first = yield* repo.listPage({ orgId: org.id, limit: 3 })
      assert.deepStrictEqual(first, expected.slice(0, 3))
      const last = first[2]!
      assert.deepStrictEqual(
        yield* repo.listPage({ orgId: org.id, limit: 3, after: { joinedAt: last.joinedAt, id: last.id } }),
        expected.slice(3)
      )
    }))

  it.effect("lockWorkspace: true for a known workspace, and membership changes under it run one at a time", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
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

describeContract("RoleBindingsRepo (members and invitations)", repositories, (it) => {
  it.effect("lists the bindings of several subjects on one workspace, and a role's holders there", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
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
      yield* Effect.forEach(rows, repo.insert, { discard: true })
      assert.deepStrictEqual(yield* repo.listForSubjectsInOrg(org.id, [ada, bob]), [rows[0], rows[1], rows[2]])
      assert.deepStrictEqual(yield* repo.listForSubjectsInOrg(org.id, []), [])
      assert.deepStrictEqual(yield* repo.listByRoleInOrg(org.id, "owner"), [rows[0], rows[3], rows[4]])
      assert.deepStrictEqual(yield* repo.listByRoleInOrg(other.id, "owner"), [rows[6]])
      assert.deepStrictEqual(yield* repo.listByRoleInOrg(org.id, "admin"), [])
    }))

  it.effect("removeForSubject deletes the subject's bindings on one workspace only, inside the transaction", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const { withTransaction } = yield* Transactor
      const [org, other] = [yield* newOrg(), yield* newOrg()]
      const [ada, bob] = [yield* newUser(), yield* newUser()]
      const rows = [
        bindingRow(org, ada, "admin", { createdAt: at(2) }),
        bindingRow(org, ada, "billing_admin", { createdAt: at(1) }),
        bindingRow(org, bob, "viewer"),
        bindingRow(other, ada, "owner")
      ] as const
      yield* Effect.forEach(rows, repo.insert, { discard: true })

      // Undone with a failed transaction.
      yield* Effect.flip(withTransaction(Effect.andThen(repo.removeForSubject(org.id, "user", ada), new Abort())))
      assert.deepStrictEqual(yield* repo.listForSubject(org.id, "user", ada), [rows[1], rows[0]])

      assert.deepStrictEqual(yield* repo.removeForSubject(org.id, "user", ada), [rows[1], rows[0]])
      assert.deepStrictEqual(yield* repo.listForSubject(org.id, "user", ada), [])
      assert.deepStrictEqual(yield* repo.listForSubject(org.id, "user", bob), [rows[2]])
      assert.deepStrictEqual(yield* repo.listForSubject(other.id, "user", ada), [rows[3]])
      assert.deepStrictEqual(yield* repo.removeForSubject(org.id, "user", ada), [])
    }))
})
