/**
 * Members and invitations end to end over real HTTP (spec: Member, invitation; "Members and invitations"
 * endpoints; invitation states; Events; contract §2 invitation mail, §4 Invitations, Invitation token in
 * responses, Lists, Cursor misuse, Routing order; §5 owner and admin): inviting with the dev-mode token and the
 * outbox message, both accept routes, the invitee reaching a workspace it cannot see yet, the accepted member
 * seeing the workspace with its role, revoking, listing, changing roles, removing members, the owner rules and
 * last-owner protection, 404 for other workspaces, the typed client and `cpctl`. Runs on PGlite, and on PostgreSQL
 * too when `DATABASE_URL` is set.
 */
import {
  AcceptedInvitation,
  Invitation,
  InvitationDelivery,
  Member,
  MyInvitation,
  Organization,
  OutboxMessage
} from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { decisionByAction } from "./support/access.ts"
import { cpctl, tableRow } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, metaOf, nextCursor, ok, type Res, ULID } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServer, testServerOver } from "./support/server.ts"
import { createApiKey, freshEmail, setDisplayName, signIn } from "./support/session.ts"

const DAY = 24 * 60 * 60 * 1000
const INVITATION_FIELDS = [
  "acceptedAt",
  "createdAt",
  "email",
  "expiresAt",
  "id",
  "invitedBy",
  "revokedAt",
  "role",
  "status"
]
/** The spec's member fields plus the subject's `email` and `displayName` (docs/decisions.md). */
const MEMBER_FIELDS = ["displayName", "email", "id", "joinedAt", "roles", "status", "subjectId", "subjectType"]

/** The spec's invitation fields, each well formed. */
const assertInvitationShape = (invitation: typeof Invitation.Encoded) => {
  assert.deepStrictEqual(Object.keys(invitation).sort(), INVITATION_FIELDS)
  assert.match(invitation.id, new RegExp(`^inv_${ULID}$`))
  assert.match(invitation.invitedBy, new RegExp(`^usr_${ULID}$`))
  assert.match(invitation.createdAt, ISO_MS)
  assert.match(invitation.expiresAt, ISO_MS)
  assert.strictEqual(Date.parse(invitation.expiresAt) - Date.parse(invitation.createdAt), 7 * DAY)
}

const assertMemberShape = (member: typeof Member.Encoded) => {
  assert.deepStrictEqual(Object.keys(member).sort(), MEMBER_FIELDS)
  assert.match(member.id, new RegExp(`^mem_${ULID}$`))
  assert.match(member.joinedAt, ISO_MS)
  for (const role of member.roles) assert.deepStrictEqual(Object.keys(role).sort(), ["role", "scopeKind"])
}

/** An invitation as created in development and test mode: with its token. */
const createdOf = (res: Res) => ok(res, { invitation: Invitation, delivery: InvitationDelivery })
const invitationOf = (res: Res) => ok(res, { invitation: Invitation }).invitation
const invitationsOf = (res: Res) => ok(res, { invitations: Schema.Array(Invitation) }).invitations
const myInvitationsOf = (res: Res) => ok(res, { invitations: Schema.Array(MyInvitation) }).invitations
const acceptedOf = (res: Res) => ok(res, AcceptedInvitation)
const memberOf = (res: Res) => ok(res, { member: Member }).member
const membersOf = (res: Res) => ok(res, { members: Schema.Array(Member) }).members
const isOwner = (member: typeof Member.Encoded) => member.roles.some((r) => r.role === "owner")

/** The HTTP steps every case uses, bound to one server. */
const steps = (baseUrl: string) => {
  /** A fresh signed-in user (with its Personal workspace). */
  const newUser = (prefix = "user") =>
    Effect.gen(function*() {
      const email = freshEmail(prefix)
      const session = yield* signIn(baseUrl, { email })
      return { ...session, email }
    })

  /** A fresh owner and a fresh workspace it created. */
  const newWorkspace = (prefix = "owner") =>
    Effect.gen(function*() {
      const owner = yield* newUser(prefix)
      const org = ok(
        yield* call(baseUrl, "POST", "/v1/organizations", {
          token: owner.token,
          body: { name: `Team ${randomUUID().slice(0, 8)}` }
        }),
        { organization: Organization }
      ).organization
      return { owner, org }
    })

  /** A fresh owner and its Personal workspace: an account root, so no role reaches it by account cascade. */
  const newAccountRoot = (prefix = "owner") =>
    Effect.gen(function*() {
      const owner = yield* newUser(prefix)
      const [org] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: owner.token }), {
        organizations: Schema.Array(Organization)
      }).organizations
      assert.isDefined(org)
      assert.isTrue(org.isAccountRoot)
      return { owner, org }
    })

  const invite = (token: string, ref: string, body: unknown, headers: Record<string, string> = {}) =>
    call(baseUrl, "POST", `/v1/organizations/${ref}/invitations`, { token, body, headers })

  const acceptByToken = (token: string, ref: string, invitationToken: unknown) =>
    call(baseUrl, "POST", `/v1/organizations/${ref}/invitations/accept`, { token, body: { token: invitationToken } })

  const acceptById = (token: string, invitationId: string) =>
    call(baseUrl, "POST", `/v1/me/invitations/${invitationId}/accept`, { token })

  const mine = (token: string) => call(baseUrl, "GET", "/v1/me/invitations", { token })

  const members = (token: string, ref: string, query = "") =>
    call(baseUrl, "GET", `/v1/organizations/${ref}/members${query}`, { token })

  const setRole = (token: string, ref: string, memberId: string, role: unknown) =>
    call(baseUrl, "PATCH", `/v1/organizations/${ref}/members/${memberId}`, { token, body: { role } })

  const remove = (token: string, ref: string, memberId: string) =>
    call(baseUrl, "DELETE", `/v1/organizations/${ref}/members/${memberId}`, { token })

  const revoke = (token: string, ref: string, id: string) =>
    call(baseUrl, "DELETE", `/v1/organizations/${ref}/invitations/${id}`, { token })

  const invitations = (token: string, ref: string, query = "") =>
    call(baseUrl, "GET", `/v1/organizations/${ref}/invitations${query}`, { token })

  /** A fresh user who joined `org` as `role` through an invitation accepted by token. */
  const join = (ownerToken: string, org: { readonly id: string }, role: string, prefix = role) =>
    Effect.gen(function*() {
      const user = yield* newUser(prefix)
      const created = createdOf(yield* invite(ownerToken, org.id, { email: user.email, role }))
      const accepted = acceptedOf(yield* acceptByToken(user.token, org.id, created.delivery.token))
      return { ...user, memberId: accepted.membership.id, invitationId: created.invitation.id }
    })

  /** The member id of `userId` in the workspace, from the member list. */
  const memberIdOf = (token: string, ref: string, userId: string) =>
    Effect.map(members(token, ref, "?limit=100"), (res) => {
      const found = membersOf(res).find((member) => member.subjectId === userId)
      assert.isDefined(found, `${userId} is a member`)
      return found.id
    })

  /** The invitation message in the dev outbox for `invitationId`. */
  const mailFor = (email: string, invitationId: string) =>
    Effect.map(
      call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`),
      (res) =>
        ok(res, { messages: Schema.Array(OutboxMessage) }).messages.find((m) =>
          m.template === "invitation" && m.data["invitationId"] === invitationId
        )
    )

  const permissionsOf = (token: string, ref: string) =>
    Effect.map(call(baseUrl, "GET", `/v1/organizations/${ref}/effective-access`, { token }), decisionByAction)

  return {
    newUser,
    newWorkspace,
    newAccountRoot,
    invite,
    acceptByToken,
    acceptById,
    mine,
    members,
    setRole,
    remove,
    revoke,
    invitations,
    join,
    memberIdOf,
    mailFor,
    permissionsOf
  }
}

/** The steps bound to the suite's server. */
const stepsHere = Effect.map(TestServer, ({ baseUrl }) => ({ baseUrl, ...steps(baseUrl) }))

/** The types and data of the workspace's events, oldest first. */
const eventsOf = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ type: string; data: Record<string, unknown>; actorId: string }>`
      select type, data, actor_id from events where org_id = ${orgId} order by occurred_at, id`
  }).pipe(Effect.orDie)

/** The workspace's audit entries as stored (the rows the audit API reads), oldest first. */
const auditOf = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ eventType: string; category: string; subjectId: string }>`
      select event_type, category, subject_id from audit_entries where org_id = ${orgId} order by occurred_at, id`
  }).pipe(Effect.orDie)

for (const backend of sqlBackends) {
  layer(testServerOver(databaseLayer(backend)), { excludeTestServices: true })(
    `members and invitations [${backend}]`,
    (it) => {
      /** A workspace, and Ada invited as builder by her address in other case and spacing: the created answer. */
      const adaInvited = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const ada = yield* s.newUser("ada")
        const created = createdOf(
          yield* s.invite(owner.token, org.slug, { email: `  ${ada.email.toUpperCase()} `, role: "builder" })
        )
        return { s, owner, org, ada, created, invitation: created.invitation, token: created.delivery.token }
      })

      /** Ada's invitation accepted by token on the workspace path she cannot see yet (by its `ws_` reference). */
      const adaJoined = Effect.gen(function*() {
        const invited = yield* adaInvited
        const { ada, org, s, token } = invited
        const accepted = acceptedOf(yield* s.acceptByToken(ada.token, org.workspaceRef, token))
        return { ...invited, accepted }
      })

      it.effect("an invitation answers its shape and, in dev mode, its token; the invitee cannot see the org yet", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newWorkspace()
          const ada = yield* s.newUser("ada")
          failed(yield* call(s.baseUrl, "GET", `/v1/organizations/${org.id}`, { token: ada.token }), 404, "not_found")

          const created = createdOf(
            yield* s.invite(owner.token, org.slug, { email: `  ${ada.email.toUpperCase()} `, role: "builder" })
          )
          assert.deepStrictEqual(Object.keys(created).sort(), ["delivery", "invitation"])
          const invitation = created.invitation
          assertInvitationShape(invitation)
          assert.deepInclude(invitation, {
            email: ada.email,
            role: "builder",
            status: "pending",
            invitedBy: owner.user.id,
            acceptedAt: null,
            revokedAt: null
          })
          assert.deepStrictEqual(Object.keys(created.delivery).sort(), ["mode", "token"])
          assert.strictEqual(created.delivery.mode, "local_debug")
          const token: string = created.delivery.token
          assert.match(token, /^cpinv_[A-Za-z0-9_-]{43}$/)
        }))

      it.effect("the outbox holds the invitation mail with the same token (contract §2); only a hash is stored", () =>
        Effect.gen(function*() {
          const { ada, invitation, org, s, token } = yield* adaInvited
          const mail = yield* s.mailFor(ada.email, invitation.id)
          assert.isDefined(mail)
          assert.strictEqual(mail.to, ada.email)
          assert.deepStrictEqual(mail.data, { token, invitationId: invitation.id, orgId: org.id })
          assert.include(mail.text, token)
          const sql = yield* SqlClient.SqlClient
          const [stored] = yield* sql<
            { tokenHash: string }
          >`select token_hash from invitations where id = ${invitation.id}`
            .pipe(Effect.orDie)
          assert.notInclude(JSON.stringify(stored), token)
        }))

      it.effect("the invitee's pending invitations: without the state fields, with the workspace", () =>
        Effect.gen(function*() {
          const { ada, invitation, org, owner, s } = yield* adaInvited
          const mineRes = yield* s.mine(ada.token)
          const mine = myInvitationsOf(mineRes)
          assert.isNull(metaOf(mineRes).cursor)
          assert.lengthOf(mine, 1)
          const entry = mine[0]
          assert.isDefined(entry)
          assert.deepStrictEqual(
            Object.keys(entry).sort(),
            ["createdAt", "email", "expiresAt", "id", "invitedBy", "org", "role"]
          )
          assert.deepStrictEqual(entry.org, {
            id: org.id,
            name: org.name,
            slug: org.slug,
            workspaceRef: org.workspaceRef,
            status: "active"
          })
          assert.deepInclude(entry, { id: invitation.id, email: ada.email, role: "builder", invitedBy: owner.user.id })
        }))

      it.effect("accept by token, on a workspace the invitee cannot see yet, answers invitation and membership", () =>
        Effect.gen(function*() {
          const { accepted } = yield* adaJoined
          assert.deepStrictEqual(Object.keys(accepted).sort(), ["invitation", "membership"])
          assertInvitationShape(accepted.invitation)
          assert.strictEqual(accepted.invitation.status, "accepted")
          assert.match(accepted.invitation.acceptedAt ?? "", ISO_MS)
          assert.deepStrictEqual(Object.keys(accepted.membership).sort(), ["id", "joinedAt", "role", "status"])
          assert.match(accepted.membership.id, new RegExp(`^mem_${ULID}$`))
          assert.deepInclude(accepted.membership, {
            role: "builder",
            status: "active",
            joinedAt: accepted.invitation.acceptedAt ?? ""
          })
        }))

      it.effect("once accepted, the member sees the workspace with the role's permissions directly; none pending", () =>
        Effect.gen(function*() {
          const { ada, org, s } = yield* adaJoined
          ok(yield* call(s.baseUrl, "GET", `/v1/organizations/${org.slug}`, { token: ada.token }))
          const access = yield* s.permissionsOf(ada.token, org.id)
          assert.deepStrictEqual(access("organization.member.list").via, {
            kind: "direct",
            role: "builder",
            scopeKind: "organization",
            scopeRef: null
          })
          assert.isFalse(access("organization.member.update_role").allow)
          assert.isTrue(access("project.create").allow)
          const listed = ok(yield* call(s.baseUrl, "GET", "/v1/organizations", { token: ada.token }), {
            organizations: Schema.Array(Organization)
          })
          assert.include(listed.organizations.map((o) => o.id), org.id)
          assert.deepStrictEqual(myInvitationsOf(yield* s.mine(ada.token)), [])
        }))

      it.effect("the owner's member list shows the new member with its role", () =>
        Effect.gen(function*() {
          const { accepted, ada, org, owner, s } = yield* adaJoined
          const members = membersOf(yield* s.members(owner.token, org.id))
          members.forEach(assertMemberShape)
          const ownerRow = members[1]
          assert.isDefined(ownerRow)
          assert.deepStrictEqual(members.map((m) => [m.id, m.subjectId, m.subjectType, m.status, m.roles]), [
            [accepted.membership.id, ada.user.id, "user", "active", [{ role: "builder", scopeKind: "organization" }]],
            [ownerRow.id, owner.user.id, "user", "active", [{ role: "owner", scopeKind: "organization" }]]
          ])
          assert.strictEqual(members[0]?.joinedAt, accepted.membership.joinedAt)
        }))

      it.effect("event log: creation, the invitation, the accept with its membership; audited; never the token", () =>
        Effect.gen(function*() {
          const { accepted, ada, invitation, org, token } = yield* adaJoined
          const events = yield* eventsOf(org.id)
          assert.deepStrictEqual(events.map((e) => e.type), [
            "organization.created",
            "membership.added",
            "invite.created",
            "invite.accepted",
            "membership.added"
          ])
          // webhooks.md §1: each resource as the API returns it.
          assert.deepInclude(events[2]!.data["invitation"], { id: invitation.id, email: ada.email, role: "builder" })
          assert.deepInclude(events[3]!.data["invitation"], { id: invitation.id, status: "accepted" })
          assert.deepInclude(events[3]!.data["previous"], { status: "pending", acceptedAt: null })
          assert.deepInclude(events[4]!.data["member"], {
            id: accepted.membership.id,
            subjectId: ada.user.id,
            roles: [{ role: "builder", scopeKind: "organization" }]
          })
          assert.strictEqual(events[4]!.data["invitationId"], invitation.id)
          assert.strictEqual(events[3]!.actorId, ada.user.id)
          assert.notInclude(JSON.stringify(events), token)
          const audit = yield* auditOf(org.id)
          assert.deepStrictEqual(audit.filter((e) => e.category === "membership").map((e) => e.eventType), [
            "membership.added",
            "invite.created",
            "invite.accepted",
            "membership.added"
          ])
        }))

      /** A workspace, Bob invited as viewer through the owner's typed client, and both typed clients. */
      const bobInvited = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const bob = yield* s.newUser("bob")
        const ownerClient = yield* clientFor(s.baseUrl, owner.token)
        const bobClient = yield* clientFor(s.baseUrl, bob.token)
        const created = yield* ownerClient.invitations.create({
          params: { orgId: org.id },
          payload: { email: bob.email, role: "viewer" }
        })
        return { s, owner, org, bob, ownerClient, bobClient, created }
      })

      it.effect("typed client: invite, the invitee's pending list, accept by id from /v1/me/invitations", () =>
        Effect.gen(function*() {
          const { bobClient, created } = yield* bobInvited
          assert.strictEqual(created.invitation.status, "pending")
          assert.isDefined(created.delivery)
          const mine = yield* bobClient.invitations.mine({ query: {} })
          assert.deepStrictEqual(mine.data.invitations.map((i) => i.id), [created.invitation.id])
          assert.strictEqual(mine.cursor, null)

          const accepted = yield* bobClient.invitations.acceptMine({ params: { invitationId: created.invitation.id } })
          assert.strictEqual(accepted.invitation.status, "accepted")
          assert.strictEqual(accepted.membership.role, "viewer")
          assert.instanceOf(accepted.membership.joinedAt, Date)
        }))

      it.effect("typed client: members and invitations lists, a role change, a removal", () =>
        Effect.gen(function*() {
          const { bob, bobClient, created, org, owner, ownerClient } = yield* bobInvited
          const accepted = yield* bobClient.invitations.acceptMine({ params: { invitationId: created.invitation.id } })
          const page = yield* ownerClient.members.list({ params: { orgId: org.slug }, query: {} })
          assert.deepStrictEqual(page.data.members.map((m) => m.subjectId), [bob.user.id, owner.user.id])
          const listed = yield* ownerClient.invitations.list({ params: { orgId: org.id }, query: {} })
          assert.deepStrictEqual(listed.data.invitations.map((i) => [i.id, i.status]), [[
            created.invitation.id,
            "accepted"
          ]])
          const changed = yield* ownerClient.members.updateRole({
            params: { orgId: org.id, memberId: accepted.membership.id },
            payload: { role: "builder" }
          })
          assert.deepStrictEqual(changed.member.roles, [{ role: "builder", scopeKind: "organization" }])
          const removed = yield* ownerClient.members.remove({
            params: { orgId: org.id, memberId: accepted.membership.id }
          })
          assert.deepStrictEqual(removed, { deleted: true })
        }))

      it.effect("an accepted invitation is spent: accepting again is 412 invitation_accepted, whichever route", () =>
        Effect.gen(function*() {
          const { bob, bobClient, created, org, ownerClient, s } = yield* bobInvited
          const accepted = yield* bobClient.invitations.acceptMine({ params: { invitationId: created.invitation.id } })
          yield* ownerClient.members.remove({ params: { orgId: org.id, memberId: accepted.membership.id } })
          const again = failed(yield* s.acceptById(bob.token, created.invitation.id), 412, "precondition_failed")
          assert.strictEqual(again.details["reason"], "invitation_accepted")
          const byToken = failed(
            yield* s.acceptByToken(bob.token, org.id, created.delivery?.token),
            412,
            "precondition_failed"
          )
          assert.strictEqual(byToken.details["reason"], "invitation_accepted")
        }))

      /** A workspace with Cy invited as admin; another workspace; Mallory, who is not the recipient. */
      const cyInvited = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const other = yield* s.newWorkspace("other")
        const cy = yield* s.newUser("cy")
        const mallory = yield* s.newUser("mallory")
        const created = createdOf(yield* s.invite(owner.token, org.id, { email: cy.email, role: "admin" }))
        return { s, owner, org, other, cy, mallory, token: created.delivery.token, id: created.invitation.id }
      })

      it.effect("accept: someone else holding the token (or the id) is not the recipient: 403, nothing changes", () =>
        Effect.gen(function*() {
          const { id, mallory, org, s, token } = yield* cyInvited
          assert.strictEqual(
            failed(yield* s.acceptByToken(mallory.token, org.id, token), 403, "forbidden").details["reason"],
            "not_recipient"
          )
          failed(yield* s.acceptById(mallory.token, id), 403, "forbidden")
          failed(
            yield* call(s.baseUrl, "GET", `/v1/organizations/${org.id}`, { token: mallory.token }),
            404,
            "not_found"
          )
        }))

      it.effect("accept: a wrong token, another workspace's, an unknown workspace or invitation id: 404", () =>
        Effect.gen(function*() {
          const { cy, org, other, s, token } = yield* cyInvited
          failed(yield* s.acceptByToken(cy.token, org.id, `${token}x`), 404, "not_found")
          failed(yield* s.acceptByToken(cy.token, other.org.id, token), 404, "not_found")
          failed(yield* s.acceptByToken(cy.token, "no-such-workspace-anywhere", token), 404, "not_found")
          failed(yield* s.acceptById(cy.token, `inv_${"0".repeat(26)}`), 404, "not_found")
          failed(yield* s.acceptById(cy.token, "inv_malformed"), 404, "not_found")
        }))

      it.effect("accept: the credentials first (401), then the body (422)", () =>
        Effect.gen(function*() {
          const { cy, id, org, s, token } = yield* cyInvited
          const anonymous = yield* call(s.baseUrl, "POST", `/v1/organizations/${org.id}/invitations/accept`, {
            body: { token }
          })
          failed(anonymous, 401, "unauthenticated")
          failed(yield* call(s.baseUrl, "POST", `/v1/me/invitations/${id}/accept`), 401, "unauthenticated")
          failed(yield* call(s.baseUrl, "GET", "/v1/me/invitations"), 401, "unauthenticated")
          assert.property(invalidFields(yield* s.acceptByToken(cy.token, org.id, "")), "token")
          failed(
            yield* call(s.baseUrl, "POST", `/v1/organizations/${org.id}/invitations/accept`, {
              token: cy.token,
              body: {}
            }),
            422,
            "validation_failed"
          )
        }))

      it.effect("a revoked invitation is 412 invitation_revoked on both routes, and gone from the invitee's list", () =>
        Effect.gen(function*() {
          const { cy, id, org, owner, s, token } = yield* cyInvited
          const revoked = invitationOf(yield* s.revoke(owner.token, org.id, id))
          assert.strictEqual(revoked.status, "revoked")
          for (const res of [yield* s.acceptByToken(cy.token, org.id, token), yield* s.acceptById(cy.token, id)]) {
            assert.strictEqual(failed(res, 412, "precondition_failed").details["reason"], "invitation_revoked")
          }
          assert.deepStrictEqual(myInvitationsOf(yield* s.mine(cy.token)), [])
        }))

      it.effect("an expired invitation is 412 invitation_expired on both routes, listed as expired to the org", () =>
        Effect.gen(function*() {
          const { cy, id, org, owner, s } = yield* cyInvited
          invitationOf(yield* s.revoke(owner.token, org.id, id))
          // Its expiry moved into the past.
          const second = createdOf(yield* s.invite(owner.token, org.id, { email: cy.email, role: "viewer" }))
          const sql = yield* SqlClient.SqlClient
          yield* sql`update invitations set expires_at = ${new Date(
            Date.now() - 1000
          )} where id = ${second.invitation.id}`
            .pipe(Effect.orDie)
          for (
            const res of [
              yield* s.acceptByToken(cy.token, org.id, second.delivery.token),
              yield* s.acceptById(cy.token, second.invitation.id)
            ]
          ) {
            assert.strictEqual(failed(res, 412, "precondition_failed").details["reason"], "invitation_expired")
          }
          assert.deepStrictEqual(myInvitationsOf(yield* s.mine(cy.token)), [])
          const listed = invitationsOf(yield* s.invitations(owner.token, org.id))
          assert.deepStrictEqual(listed.map((i) => [i.id, i.status]), [
            [second.invitation.id, "expired"],
            [id, "revoked"]
          ])
          failed(yield* call(s.baseUrl, "GET", `/v1/organizations/${org.id}`, { token: cy.token }), 404, "not_found")
        }))

      /** A workspace and Dee, a fresh user who is not invited yet. */
      const withDee = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const dee = yield* s.newUser("dee")
        return { s, owner, org, dee }
      })

      it.effect("invite: a bad address and role is 422 naming both; a missing or unknown role 422", () =>
        Effect.gen(function*() {
          const { dee, org, owner, s } = yield* withDee
          const bad = { email: "not-an-email", role: "project_admin" }
          assert.deepStrictEqual(Object.keys(invalidFields(yield* s.invite(owner.token, org.id, bad))).sort(), [
            "email",
            "role"
          ])
          failed(yield* s.invite(owner.token, org.id, { email: dee.email }), 422, "validation_failed")
          failed(
            yield* s.invite(owner.token, org.id, { email: dee.email, role: "superuser" }),
            422,
            "validation_failed"
          )
        }))

      it.effect("invite: an existing member, or an address (any case) with a pending invitation, is 409", () =>
        Effect.gen(function*() {
          const { dee, org, owner, s } = yield* withDee
          const member = failed(
            yield* s.invite(owner.token, org.id, { email: owner.email, role: "viewer" }),
            409,
            "conflict"
          )
          assert.strictEqual(member.details["reason"], "already_member")
          const first = createdOf(yield* s.invite(owner.token, org.id, { email: dee.email, role: "viewer" }))
          const upper = { email: dee.email.toUpperCase(), role: "admin" }
          const dup = failed(yield* s.invite(owner.token, org.id, upper), 409, "conflict")
          assert.deepStrictEqual(dup.details, { reason: "already_invited", invitationId: first.invitation.id })
        }))

      it.effect("an admin cannot invite an owner (403 owner_required) but may invite an admin; an owner may", () =>
        Effect.gen(function*() {
          const { org, owner, s } = yield* withDee
          const admin = yield* s.join(owner.token, org, "admin")
          const asOwner = { email: freshEmail(), role: "owner" }
          const ownerInvite = failed(yield* s.invite(admin.token, org.id, asOwner), 403, "forbidden")
          assert.strictEqual(ownerInvite.details["reason"], "owner_required")
          createdOf(yield* s.invite(admin.token, org.id, { email: freshEmail(), role: "admin" }))
          createdOf(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "owner" }))
        }))

      it.effect("a viewer may not invite, list or revoke invitations: 403", () =>
        Effect.gen(function*() {
          const { dee, org, owner, s } = yield* withDee
          const first = createdOf(yield* s.invite(owner.token, org.id, { email: dee.email, role: "viewer" }))
          const viewer = yield* s.join(owner.token, org, "viewer")
          failed(yield* s.invite(viewer.token, org.id, { email: freshEmail(), role: "viewer" }), 403, "forbidden")
          failed(yield* s.invitations(viewer.token, org.id), 403, "forbidden")
          failed(yield* s.revoke(viewer.token, org.id, first.invitation.id), 403, "forbidden")
        }))

      it.effect("invite: the same Idempotency-Key replays the first answer, token included", () =>
        Effect.gen(function*() {
          const { org, owner, s } = yield* withDee
          const email = freshEmail()
          const key = { "idempotency-key": `invite-${randomUUID()}` }
          const one = yield* s.invite(owner.token, org.id, { email, role: "builder" }, key)
          const two = yield* s.invite(owner.token, org.id, { email, role: "builder" }, key)
          assert.strictEqual(two.text, one.text)
          assert.strictEqual(two.headers.get("idempotent-replayed"), "true")
        }))

      it.effect("revoke: pending becomes revoked once (412 after); unknown or another workspace's invitation 404", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newWorkspace()
          const other = yield* s.newWorkspace("other")
          const created = createdOf(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "builder" }))
          const elsewhere = createdOf(
            yield* s.invite(other.owner.token, other.org.id, { email: freshEmail(), role: "builder" })
          )

          failed(yield* s.revoke(owner.token, org.id, elsewhere.invitation.id), 404, "not_found")
          failed(yield* s.revoke(owner.token, org.id, `inv_${"1".repeat(26)}`), 404, "not_found")
          failed(yield* s.revoke(owner.token, org.id, "nope"), 404, "not_found")
          failed(yield* s.revoke(owner.token, other.org.id, elsewhere.invitation.id), 404, "not_found")

          const invitation = invitationOf(yield* s.revoke(owner.token, org.slug, created.invitation.id))
          assertInvitationShape(invitation)
          assert.strictEqual(invitation.status, "revoked")
          assert.match(invitation.revokedAt ?? "", ISO_MS)
          assert.isNull(invitation.acceptedAt)
          assert.deepStrictEqual({ ...invitation, status: "pending", revokedAt: null }, created.invitation)
          const again = failed(yield* s.revoke(owner.token, org.id, created.invitation.id), 412, "precondition_failed")
          assert.strictEqual(again.details["reason"], "invitation_revoked")
          const events = yield* eventsOf(org.id)
          assert.deepStrictEqual(events.slice(-2).map((e) => e.type), ["invite.created", "invite.revoked"])
          // Revoked, the address may be invited again.
          createdOf(yield* s.invite(owner.token, org.id, { email: created.invitation.email, role: "viewer" }))
        }))

      /** A workspace with five invitations, oldest first, the second of them revoked. */
      const fiveInvitations = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const created: Array<typeof Invitation.Encoded> = []
        for (let i = 0; i < 5; i++) {
          created.push(
            createdOf(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "viewer" })).invitation
          )
        }
        const revoked = created[1]?.id ?? ""
        invitationOf(yield* s.revoke(owner.token, org.id, revoked))
        return { created, revoked, list: (query: string) => s.invitations(owner.token, org.id, query) }
      })

      it.effect("list invitations: every status newest first; the status filter; a bad status or limit is 422", () =>
        Effect.gen(function*() {
          const { created, list, revoked } = yield* fiveInvitations
          const all = invitationsOf(yield* list(""))
          all.forEach(assertInvitationShape)
          assert.deepStrictEqual(all.map((i) => i.id), created.map((i) => i.id).reverse())
          assert.deepStrictEqual(invitationsOf(yield* list("?status=revoked")).map((i) => i.id), [revoked])
          assert.lengthOf(invitationsOf(yield* list("?status=pending")), 4)
          assert.deepStrictEqual(invitationsOf(yield* list("?status=accepted")), [])
          failed(yield* list("?status=bogus"), 422, "validation_failed")
          failed(yield* list("?limit=0"), 422, "validation_failed")
          failed(yield* list("?limit=101"), 422, "validation_failed")
        }))

      it.effect("invitations page by page: each exactly once, newest first; a cursor is bound to its filters", () =>
        Effect.gen(function*() {
          const { created, list } = yield* fiveInvitations
          const walked: Array<string> = []
          let cursor: string | null = null
          do {
            const res: Res = yield* list(`?status=pending&limit=3${cursor === null ? "" : `&cursor=${cursor}`}`)
            walked.push(...invitationsOf(res).map((i) => i.id))
            cursor = metaOf(res).cursor
            if (cursor !== null) {
              assert.property(invalidFields(yield* list(`?limit=3&cursor=${cursor}`)), "cursor")
            }
          } while (cursor !== null)
          assert.deepStrictEqual(walked, created.filter((_, i) => i !== 1).map((i) => i.id).reverse())
        }))

      /** A workspace with a viewer and then a billing admin, both joined by invitation. */
      const withTwoMembers = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const viewer = yield* s.join(owner.token, org, "viewer")
        const billing = yield* s.join(owner.token, org, "billing_admin")
        return { s, owner, org, viewer, billing }
      })

      it.effect("members list: the member shape, roles, newest first, keyset pages; a tampered cursor is 422", () =>
        Effect.gen(function*() {
          const { billing, org, owner, s, viewer } = yield* withTwoMembers
          const members = membersOf(yield* s.members(owner.token, org.id))
          members.forEach(assertMemberShape)
          assert.deepStrictEqual(members.map((m) => [m.subjectId, m.roles.map((r) => r.role)]), [
            [billing.user.id, ["billing_admin"]],
            [viewer.user.id, ["viewer"]],
            [owner.user.id, ["owner"]]
          ])
          const first = yield* s.members(owner.token, org.id, "?limit=2")
          assert.lengthOf(membersOf(first), 2)
          const cursor = nextCursor(first)
          const second = yield* s.members(owner.token, org.id, `?limit=2&cursor=${cursor}`)
          assert.deepStrictEqual(membersOf(second).map((m) => m.subjectId), [owner.user.id])
          assert.isNull(metaOf(second).cursor)
          failed(yield* s.members(owner.token, org.id, `?cursor=${cursor}x`), 422, "validation_failed")
        }))

      it.effect("a viewer lists members (organization.member.list) but changes nobody; billing_admin cannot list", () =>
        Effect.gen(function*() {
          const { billing, org, s, viewer } = yield* withTwoMembers
          ok(yield* s.members(viewer.token, org.id))
          failed(yield* s.setRole(viewer.token, org.id, billing.memberId, "viewer"), 403, "forbidden")
          failed(yield* s.remove(viewer.token, org.id, billing.memberId), 403, "forbidden")
          failed(yield* s.members(billing.token, org.id), 403, "forbidden")
        }))

      it.effect("members carry the subject's email and display name: a user's profile, a key's principal", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newWorkspace()
          yield* setDisplayName(s.baseUrl, owner.token, "Olive Owner")
          const eve = yield* s.join(owner.token, org, "viewer", "eve")
          // No route makes a service principal a member: the row is what one would look like (test/support/seed.ts).
          const key = yield* createApiKey(s.baseUrl, owner.token, org.id, "deploy bot")
          yield* seedMember(org.id, key.servicePrincipal.id, null, "service_principal")
          const members = membersOf(yield* s.members(owner.token, org.id))
          members.forEach(assertMemberShape)
          assert.deepStrictEqual(members.map((m) => [m.subjectId, m.email, m.displayName]), [
            [key.servicePrincipal.id, null, "API Key: deploy bot"],
            [eve.user.id, eve.email, null],
            [owner.user.id, owner.email, "Olive Owner"]
          ])
          yield* setDisplayName(s.baseUrl, eve.token, "Eve")
          const changed = memberOf(yield* s.setRole(owner.token, org.id, eve.memberId, "builder"))
          assert.deepInclude(changed, { subjectId: eve.user.id, email: eve.email, displayName: "Eve" })
        }))

      it.effect("the /v1/workspaces alias lists the same members", () =>
        Effect.gen(function*() {
          const { org, owner, s } = yield* withTwoMembers
          const members = membersOf(yield* s.members(owner.token, org.id))
          const aliased = yield* call(s.baseUrl, "GET", `/v1/workspaces/${org.workspaceRef}/members`, {
            token: owner.token
          })
          assert.deepStrictEqual(membersOf(aliased).map((m) => m.id), members.map((m) => m.id))
        }))

      /** A workspace with Eve, a viewer, and another workspace. */
      const withEve = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const other = yield* s.newWorkspace("other")
        const eve = yield* s.join(owner.token, org, "viewer", "eve")
        return { s, owner, org, other, eve }
      })

      it.effect("change role answers the member with its new workspace role, and access follows", () =>
        Effect.gen(function*() {
          const { eve, org, owner, s } = yield* withEve
          assert.isFalse((yield* s.permissionsOf(eve.token, org.id))("project.create").allow)
          const member = memberOf(yield* s.setRole(owner.token, org.id, eve.memberId, "builder"))
          assertMemberShape(member)
          assert.deepInclude(member, {
            id: eve.memberId,
            subjectId: eve.user.id,
            subjectType: "user",
            status: "active"
          })
          assert.deepStrictEqual(member.roles, [{ role: "builder", scopeKind: "organization" }])
          assert.isTrue((yield* s.permissionsOf(eve.token, org.id))("project.create").allow)
        }))

      it.effect("a role change records membership.updated (audit member.role_changed); the same role, nothing", () =>
        Effect.gen(function*() {
          const { eve, org, owner, s } = yield* withEve
          const member = memberOf(yield* s.setRole(owner.token, org.id, eve.memberId, "builder"))
          // The same role again changes nothing and records nothing.
          const before = (yield* eventsOf(org.id)).length
          assert.deepStrictEqual(memberOf(yield* s.setRole(owner.token, org.id, eve.memberId, "builder")), member)
          assert.lengthOf(yield* eventsOf(org.id), before)

          const events = yield* eventsOf(org.id)
          const updated = events.filter((e) => e.type === "membership.updated")
          assert.lengthOf(updated, 1)
          assert.deepInclude(updated[0]!.data["member"], {
            id: eve.memberId,
            roles: [{ role: "builder", scopeKind: "organization" }]
          })
          assert.deepStrictEqual(updated[0]!.data["previous"], {
            roles: [{ role: "viewer", scopeKind: "organization" }]
          })
          const audit = (yield* auditOf(org.id)).filter((e) => e.eventType === "member.role_changed")
          assert.deepStrictEqual(audit.map((e) => [e.eventType, e.category, e.subjectId]), [
            ["member.role_changed", "membership", eve.memberId]
          ])
        }))

      it.effect("change role: a project or missing role is 422; an unknown or other workspace's member 404", () =>
        Effect.gen(function*() {
          const { eve, org, other, owner, s } = yield* withEve
          assert.property(invalidFields(yield* s.setRole(owner.token, org.id, eve.memberId, "project_viewer")), "role")
          failed(yield* s.setRole(owner.token, org.id, eve.memberId, undefined), 422, "validation_failed")
          failed(yield* s.setRole(owner.token, org.id, `mem_${"2".repeat(26)}`, "viewer"), 404, "not_found")
          failed(yield* s.setRole(owner.token, org.id, "mem_bad", "viewer"), 404, "not_found")
          // A member of another workspace is not a member here.
          const otherOwnerMember = yield* s.memberIdOf(other.owner.token, other.org.id, other.owner.user.id)
          failed(yield* s.setRole(owner.token, org.id, otherOwnerMember, "viewer"), 404, "not_found")
          failed(yield* s.remove(owner.token, org.id, otherOwnerMember), 404, "not_found")
        }))

      it.effect("remove: { deleted: true }, bindings gone, workspace hidden, membership.removed; re-invitable", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newWorkspace()
          const gus = yield* s.join(owner.token, org, "admin", "gus")
          ok(yield* call(s.baseUrl, "GET", `/v1/organizations/${org.id}`, { token: gus.token }))

          assert.deepStrictEqual(ok(yield* s.remove(owner.token, org.id, gus.memberId)), { deleted: true })
          failed(yield* call(s.baseUrl, "GET", `/v1/organizations/${org.id}`, { token: gus.token }), 404, "not_found")
          failed(yield* s.members(gus.token, org.id), 404, "not_found")
          failed(yield* s.remove(owner.token, org.id, gus.memberId), 404, "not_found")
          const members = membersOf(yield* s.members(owner.token, org.id))
          assert.deepStrictEqual(members.map((m) => m.subjectId), [owner.user.id])
          const sql = yield* SqlClient.SqlClient
          const bindings =
            yield* sql`select * from role_bindings where org_id = ${org.id} and subject_id = ${gus.user.id}`
              .pipe(Effect.orDie)
          assert.lengthOf(bindings, 0)
          const removed = (yield* eventsOf(org.id)).filter((e) => e.type === "membership.removed")
          // Its final state: the roles it held until the removal.
          assert.lengthOf(removed, 1)
          assert.deepInclude(removed[0]!.data["member"], {
            id: gus.memberId,
            subjectType: "user",
            subjectId: gus.user.id,
            status: "active",
            roles: [{ role: "admin", scopeKind: "organization" }]
          })

          // Invited again, Gus joins again with the new role.
          const again = createdOf(yield* s.invite(owner.token, org.id, { email: gus.email, role: "viewer" }))
          const accepted = acceptedOf(yield* s.acceptById(gus.token, again.invitation.id))
          assert.notStrictEqual(accepted.membership.id, gus.memberId)
          assert.strictEqual((yield* s.permissionsOf(gus.token, org.id))("organization.read").via?.role, "viewer")
        }))

      it.effect("admin vs owner: an admin changes and removes non-owners only and never grants owner; owners do", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newAccountRoot()
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
          const admin = yield* s.join(owner.token, org, "admin")
          const builder = yield* s.join(owner.token, org, "builder")

          // An admin manages non-owners.
          ok(yield* s.setRole(admin.token, org.id, builder.memberId, "viewer"))
          ok(yield* s.setRole(admin.token, org.id, builder.memberId, "admin"))
          // But may not touch an owner, nor make anyone (itself included) owner.
          for (
            const res of [
              yield* s.setRole(admin.token, org.id, ownerMember, "admin"),
              yield* s.setRole(admin.token, org.id, ownerMember, "owner"),
              yield* s.remove(admin.token, org.id, ownerMember),
              yield* s.setRole(admin.token, org.id, builder.memberId, "owner"),
              yield* s.setRole(admin.token, org.id, admin.memberId, "owner")
            ]
          ) {
            assert.strictEqual(failed(res, 403, "forbidden").details["reason"], "owner_required")
          }
          ok(yield* s.remove(admin.token, org.id, builder.memberId))

          // The owner promotes the admin; the new owner may then demote the first one.
          assert.deepStrictEqual(
            memberOf(yield* s.setRole(owner.token, org.id, admin.memberId, "owner")).roles,
            [{ role: "owner", scopeKind: "organization" }]
          )
          ok(yield* s.setRole(admin.token, org.id, ownerMember, "admin"))
          failed(yield* s.setRole(owner.token, org.id, admin.memberId, "admin"), 403, "forbidden")
          const owners = membersOf(yield* s.members(admin.token, org.id)).filter(isOwner)
          assert.deepStrictEqual(owners.map((m) => m.subjectId), [admin.user.id])
        }))

      it.effect("last owner: neither demoted nor removed (412 last_owner); with two owners one may go", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newAccountRoot()
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
          for (
            const res of [
              yield* s.setRole(owner.token, org.id, ownerMember, "admin"),
              yield* s.remove(owner.token, org.id, ownerMember)
            ]
          ) {
            const error = failed(res, 412, "precondition_failed")
            assert.strictEqual(error.details["reason"], "last_owner")
          }
          // Owner to owner is no change, so allowed.
          ok(yield* s.setRole(owner.token, org.id, ownerMember, "owner"))

          const second = yield* s.join(owner.token, org, "owner", "second")
          ok(yield* s.setRole(owner.token, org.id, ownerMember, "admin"))
          failed(yield* s.remove(second.token, org.id, second.memberId), 412, "precondition_failed")
          ok(yield* s.remove(second.token, org.id, ownerMember))
          failed(
            yield* call(s.baseUrl, "GET", `/v1/organizations/${org.id}`, { token: owner.token }),
            404,
            "not_found"
          )
        }))

      it.effect("a child workspace's last owner counts direct owners; the account's owner still reaches it", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newWorkspace()
          assert.isFalse(org.isAccountRoot)
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
          const last = failed(yield* s.remove(owner.token, org.id, ownerMember), 412, "precondition_failed")
          assert.strictEqual(last.details["reason"], "last_owner")
          const second = yield* s.join(owner.token, org, "owner", "second")
          ok(yield* s.remove(second.token, org.id, ownerMember))
          // No longer a member, the account root's owner still holds owner here through the account.
          assert.deepStrictEqual(membersOf(yield* s.members(owner.token, org.id)).map((m) => m.subjectId), [
            second.user.id
          ])
          const via = (yield* s.permissionsOf(owner.token, org.id))("organization.member.remove").via
          assert.deepStrictEqual([via?.kind, via?.role], ["account_cascade", "owner"])
        }))

      it.effect("two owners demoting each other at once: one wins, an owner always remains", () =>
        Effect.gen(function*() {
          const s = yield* stepsHere
          const { owner, org } = yield* s.newWorkspace()
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
          const second = yield* s.join(owner.token, org, "owner", "second")
          const [a, b] = yield* Effect.all([
            s.setRole(owner.token, org.id, second.memberId, "viewer"),
            s.setRole(second.token, org.id, ownerMember, "viewer")
          ], { concurrency: 2 })
          const statuses = [a.status, b.status].sort()
          assert.strictEqual(statuses[0], 200, `${a.text} ${b.text}`)
          assert.oneOf(statuses[1], [403, 412], `${a.text} ${b.text}`)
          const owners = membersOf(yield* s.members(a.status === 200 ? owner.token : second.token, org.id))
            .filter(isOwner)
          assert.lengthOf(owners, 1)
        }))

      /** A workspace with a pending invitation; the owner's member id. */
      const withPendingInvitation = Effect.gen(function*() {
        const s = yield* stepsHere
        const { owner, org } = yield* s.newWorkspace()
        const invitation = invitationOf(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "viewer" }))
        const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
        return { s, owner, org, invitation, ownerMember }
      })

      /** Nothing changed: still the owner alone, and the invitation pending. */
      const assertUnchanged = ({ org, owner, s }: Effect.Success<typeof withPendingInvitation>) =>
        Effect.gen(function*() {
          assert.lengthOf(membersOf(yield* s.members(owner.token, org.id)), 1)
          assert.strictEqual(invitationsOf(yield* s.invitations(owner.token, org.id))[0]?.status, "pending")
        })

      it.effect("another workspace, or none: 404 on every members and invitations route (never 403)", () =>
        Effect.gen(function*() {
          const setup = yield* withPendingInvitation
          const { invitation, org, ownerMember, s } = setup
          const stranger = yield* s.newUser("stranger")
          for (const ref of [org.id, org.workspaceRef, org.slug, `org_${"3".repeat(26)}`]) {
            for (
              const [method, path, body] of [
                ["GET", "/members", undefined],
                ["PATCH", `/members/${ownerMember}`, { role: "viewer" }],
                ["DELETE", `/members/${ownerMember}`, undefined],
                ["GET", "/invitations", undefined],
                ["POST", "/invitations", { email: stranger.email, role: "owner" }],
                ["DELETE", `/invitations/${invitation.id}`, undefined]
              ] as const
            ) {
              const res = yield* call(s.baseUrl, method, `/v1/organizations/${ref}${path}`, {
                token: stranger.token,
                ...(body === undefined ? {} : { body })
              })
              failed(res, 404, "not_found")
            }
          }
          yield* assertUnchanged(setup)
        }))

      it.effect("members routes without credentials: 401 before anything else", () =>
        Effect.gen(function*() {
          const setup = yield* withPendingInvitation
          const { org, ownerMember, s } = setup
          failed(yield* s.members("", org.id), 401, "unauthenticated")
          const patch = yield* call(s.baseUrl, "PATCH", `/v1/organizations/${org.id}/members/${ownerMember}`, {
            body: { role: "viewer" }
          })
          failed(patch, 401, "unauthenticated")
          yield* assertUnchanged(setup)
        }))
    }
  )
}

const CliServer = Layer.merge(testServer("memory"), NodeServices.layer)

layer(CliServer, { excludeTestServices: true })("cpctl members and invitations", (it) => {
  /** A workspace, Ivy (not invited yet), and `cpctl` as a given caller against the suite's server. */
  const withCpctl = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const s = yield* stepsHere
    const { owner, org } = yield* s.newWorkspace()
    const ivy = yield* s.newUser("ivy")
    const dir = yield* fs.makeTempDirectoryScoped()
    const as = (token: string) => (...args: ReadonlyArray<string>) =>
      cpctl({ CP_CONFIG_DIR: dir, CP_BASE_URL: s.baseUrl, CP_TOKEN: token }, ...args)
    return { s, owner, org, ivy, asOwner: as(owner.token), asIvy: as(ivy.token) }
  })

  const succeeded = (res: { readonly exitCode: number; readonly stderr: string }) =>
    assert.strictEqual(res.exitCode, 0, res.stderr)

  it.effect("cpctl invitations create, list, mine, accept (bad flags exit 2, a spent invitation 1)", () =>
    Effect.gen(function*() {
      const { asIvy, asOwner, ivy, org } = yield* withCpctl
      const created = yield* asOwner(
        "invitations",
        "create",
        ivy.email,
        "--role",
        "builder",
        "--workspace",
        org.slug,
        "--json"
      )
      succeeded(created)
      // --json prints the invitation itself, with the development-mode delivery beside its fields.
      const { delivery, ...invitation } = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({
        ...Invitation.fields,
        delivery: Schema.Struct({ mode: Schema.Literal("local_debug"), token: Schema.String })
      })))(created.stdout)
      assert.strictEqual(invitation.status, "pending")

      const listed = yield* asOwner("invitations", "list", "-w", org.id, "--status", "pending")
      succeeded(listed)
      assert.match(listed.stdout, /^ID\s+EMAIL\s+ROLE\s+STATUS\s+EXPIRES\s+CREATED\n/)
      assert.include(listed.stdout, `${invitation.id}  ${ivy.email}  builder  pending`)

      const mine = yield* asIvy("invitations", "mine")
      succeeded(mine)
      assert.include(mine.stdout, `${invitation.id}  ${org.slug}`)

      const bad = yield* asIvy("invitations", "accept")
      assert.strictEqual(bad.exitCode, 2)
      assert.match(bad.stderr, /^error invalid_flags: /)
      const accepted = yield* asIvy("invitations", "accept", "--workspace", org.id, "--token", delivery.token)
      succeeded(accepted)
      assert.match(accepted.stdout, /^Joined as builder \(member mem_\w+\) by invitation inv_\w+\.\n$/)
      const twice = yield* asIvy("invitations", "accept", invitation.id)
      assert.strictEqual(twice.exitCode, 1)
      assert.match(twice.stderr, /^error precondition_failed: /)
    }))

  it.effect("cpctl members list (JSON and a table), set-role, remove (the last owner exits 1)", () =>
    Effect.gen(function*() {
      const { asOwner, ivy, org, owner, s } = yield* withCpctl
      const created = createdOf(yield* s.invite(owner.token, org.id, { email: ivy.email, role: "builder" }))
      acceptedOf(yield* s.acceptByToken(ivy.token, org.id, created.delivery.token))
      yield* setDisplayName(s.baseUrl, ivy.token, "Ivy Green")

      const members = yield* asOwner("members", "list", "--workspace", org.id, "--json")
      succeeded(members)
      const listed = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(Member)))(members.stdout)
      const ivyMember = listed.find((m) => m.subjectId === ivy.user.id)
      assert.isDefined(ivyMember)
      const ownerMember = listed.find((m) => m.subjectId === owner.user.id)
      assert.isDefined(ownerMember)
      const table = yield* asOwner("members", "list", "-w", org.id)
      // Who each member is: the email and name beside the ids (the owner has set no name: `-`).
      assert.match(table.stdout, /^ID\s+SUBJECT\s+EMAIL\s+NAME\s+TYPE\s+ROLES\s+STATUS\s+JOINED\n/)
      assert.deepStrictEqual(
        tableRow(table.stdout, ivyMember.id).slice(0, 6),
        [ivyMember.id, ivy.user.id, ivy.email, "Ivy Green", "user", "builder"]
      )
      assert.deepStrictEqual(tableRow(table.stdout, ownerMember.id).slice(2, 4), [owner.email, "-"])

      const promoted = yield* asOwner("members", "set-role", ivyMember.id, "admin", "-w", org.id)
      succeeded(promoted)
      assert.deepStrictEqual(
        tableRow(promoted.stdout, ivyMember.id).slice(0, 6),
        [ivyMember.id, ivy.user.id, ivy.email, "Ivy Green", "user", "admin"]
      )
      const lastOwner = yield* asOwner("members", "remove", ownerMember.id, "-w", org.id, "--yes")
      assert.strictEqual(lastOwner.exitCode, 1)
      assert.include(lastOwner.stderr, "error precondition_failed: ")
      assert.include(lastOwner.stderr, `details: {"reason":"last_owner"}`)
      const removed = yield* asOwner("members", "remove", ivyMember.id, "-w", org.id, "-y")
      succeeded(removed)
      assert.strictEqual(removed.stdout, `Removed ${ivyMember.id} from ${org.id}.\n`)
    }))

  it.effect("cpctl invitations revoke", () =>
    Effect.gen(function*() {
      const { asOwner, org, owner, s } = yield* withCpctl
      const revokeTarget = invitationOf(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "viewer" }))
      const revoked = yield* asOwner("invitations", "revoke", revokeTarget.id, "-w", org.id, "--yes")
      succeeded(revoked)
      assert.include(revoked.stdout, `${revokeTarget.id}`)
      assert.include(revoked.stdout, "revoked")
    }))
})
