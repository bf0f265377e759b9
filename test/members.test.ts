/**
 * Members and invitations end to end over real HTTP (spec: Member, invitation; "Members and invitations"
 * endpoints; invitation states; Events; contract §2 invitation mail, §4 Invitations, Invitation token in
 * responses, Lists, Cursor misuse, Routing order; §5 owner and admin): inviting with the dev-mode token and the
 * outbox message, both accept routes, the invitee reaching a workspace it cannot see yet, the accepted member
 * seeing the workspace with its role, revoking, listing, changing roles, removing members, the owner rules and
 * last-owner protection, 404 for other workspaces, the typed client and `cpctl`. Runs on PGlite, and on PostgreSQL
 * too when `DATABASE_URL` is set.
 */
import { Invitation, Member } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctl } from "./support/cli.ts"
import { failed, ok, type Res } from "./support/envelope.ts"
import { call, clientFor, TestServer, testServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const backends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
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
const MEMBER_FIELDS = ["id", "joinedAt", "roles", "status", "subjectId", "subjectType"]

/** The spec's invitation fields, each well formed. */
const assertInvitationShape = (invitation: any) => {
  assert.deepStrictEqual(Object.keys(invitation).sort(), INVITATION_FIELDS)
  assert.match(invitation.id, new RegExp(`^inv_${ULID}$`))
  assert.match(invitation.invitedBy, new RegExp(`^usr_${ULID}$`))
  assert.match(invitation.createdAt, ISO_MS)
  assert.match(invitation.expiresAt, ISO_MS)
  assert.strictEqual(Date.parse(invitation.expiresAt) - Date.parse(invitation.createdAt), 7 * DAY)
}

const assertMemberShape = (member: any) => {
  assert.deepStrictEqual(Object.keys(member).sort(), MEMBER_FIELDS)
  assert.match(member.id, new RegExp(`^mem_${ULID}$`))
  assert.match(member.joinedAt, ISO_MS)
  for (const role of member.roles) assert.deepStrictEqual(Object.keys(role).sort(), ["role", "scopeKind"])
}

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
        })
      ).organization
      return { owner, org }
    })

  /** A fresh owner and its Personal workspace: an account root, so no role reaches it by account cascade. */
  const newAccountRoot = (prefix = "owner") =>
    Effect.gen(function*() {
      const owner = yield* newUser(prefix)
      const [org] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: owner.token })).organizations
      assert.isTrue(org.isAccountRoot)
      return { owner, org }
    })

  const invite = (token: string, ref: string, body: unknown, headers: Record<string, string> = {}) =>
    call(baseUrl, "POST", `/v1/organizations/${ref}/invitations`, { token, body, headers })

  const acceptByToken = (token: string, ref: string, invitationToken: unknown) =>
    call(baseUrl, "POST", `/v1/organizations/${ref}/invitations/accept`, { token, body: { token: invitationToken } })

  const acceptById = (token: string, invitationId: string) =>
    call(baseUrl, "POST", `/v1/me/invitations/${invitationId}/accept`, { token })

  const members = (token: string, ref: string, query = "") =>
    call(baseUrl, "GET", `/v1/organizations/${ref}/members${query}`, { token })

  const setRole = (token: string, ref: string, memberId: string, role: unknown) =>
    call(baseUrl, "PATCH", `/v1/organizations/${ref}/members/${memberId}`, { token, body: { role } })

  const remove = (token: string, ref: string, memberId: string) =>
    call(baseUrl, "DELETE", `/v1/organizations/${ref}/members/${memberId}`, { token })

  /** A fresh user who joined `org` as `role` through an invitation accepted by token. */
  const join = (ownerToken: string, org: { readonly id: string }, role: string, prefix = role) =>
    Effect.gen(function*() {
      const user = yield* newUser(prefix)
      const created = ok(yield* invite(ownerToken, org.id, { email: user.email, role }))
      const accepted = ok(yield* acceptByToken(user.token, org.id, created.delivery.token))
      return { ...user, memberId: accepted.membership.id as string, invitationId: created.invitation.id as string }
    })

  /** The member id of `userId` in the workspace, from the member list. */
  const memberIdOf = (token: string, ref: string, userId: string) =>
    Effect.map(members(token, ref, "?limit=100"), (res) => {
      const found = ok(res).members.find((member: any) => member.subjectId === userId)
      assert.isDefined(found, `${userId} is a member`)
      return found.id as string
    })

  /** The invitation message in the dev outbox for `invitationId`. */
  const mailFor = (email: string, invitationId: string) =>
    Effect.map(
      call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`),
      (res) => ok(res).messages.find((m: any) => m.template === "invitation" && m.data.invitationId === invitationId)
    )

  const permissionsOf = (token: string, ref: string) =>
    Effect.map(
      call(baseUrl, "GET", `/v1/organizations/${ref}/effective-access`, { token }),
      (res) => new Map<string, any>(ok(res).permissions.map((d: any) => [d.action, d]))
    )

  return {
    newUser,
    newWorkspace,
    newAccountRoot,
    invite,
    acceptByToken,
    acceptById,
    members,
    setRole,
    remove,
    join,
    memberIdOf,
    mailFor,
    permissionsOf
  }
}

/** The types and data of the workspace's events, oldest first. */
const eventsOf = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ type: string; data: any; actorId: string }>`
      select type, data, actor_id from events where org_id = ${orgId} order by occurred_at, id`
  }).pipe(Effect.orDie)

/** The workspace's audit entries as stored (the rows the audit API reads), oldest first. */
const auditOf = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ eventType: string; category: string; subjectId: string }>`
      select event_type, category, subject_id from audit_entries where org_id = ${orgId} order by occurred_at, id`
  }).pipe(Effect.orDie)

for (const backend of backends) {
  layer(testServerOver(databaseLayer(backend)), { excludeTestServices: true })(
    `members and invitations [${backend}]`,
    (it) => {
      it.effect("invite, the dev-mode token and the mail, accept by token: the member sees the workspace with its role", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const ada = yield* s.newUser("ada")

          // Before: Ada cannot see the workspace.
          failed(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: ada.token }), 404, "not_found")

          const created = ok(
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

          // The outbox holds the invitation mail with the same token (contract §2).
          const mail = yield* s.mailFor(ada.email, invitation.id)
          assert.isDefined(mail)
          assert.strictEqual(mail.to, ada.email)
          assert.deepStrictEqual(mail.data, { token, invitationId: invitation.id, orgId: org.id })
          assert.include(mail.text, token)
          // Only a hash is stored.
          const sql = yield* SqlClient.SqlClient
          const [stored] = yield* sql<
            { tokenHash: string }
          >`select token_hash from invitations where id = ${invitation.id}`
            .pipe(Effect.orDie)
          assert.notInclude(JSON.stringify(stored), token)

          // Ada's pending invitations: without the state fields, with the workspace.
          const mineRes = yield* call(baseUrl, "GET", "/v1/me/invitations", { token: ada.token })
          const mine = ok(mineRes)
          assert.isNull((mineRes.json as any).meta.cursor)
          assert.lengthOf(mine.invitations, 1)
          const entry = mine.invitations[0]
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

          // Accept by token on the workspace path Ada cannot see yet (any of the three references).
          const accepted = ok(yield* s.acceptByToken(ada.token, org.workspaceRef, token))
          assert.deepStrictEqual(Object.keys(accepted).sort(), ["invitation", "membership"])
          assertInvitationShape(accepted.invitation)
          assert.strictEqual(accepted.invitation.status, "accepted")
          assert.match(accepted.invitation.acceptedAt, ISO_MS)
          assert.deepStrictEqual(Object.keys(accepted.membership).sort(), ["id", "joinedAt", "role", "status"])
          assert.match(accepted.membership.id, new RegExp(`^mem_${ULID}$`))
          assert.deepInclude(accepted.membership, {
            role: "builder",
            status: "active",
            joinedAt: accepted.invitation.acceptedAt
          })

          // Now Ada sees it, with the builder's permissions directly.
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${org.slug}`, { token: ada.token }))
          const access = yield* s.permissionsOf(ada.token, org.id)
          assert.deepStrictEqual(access.get("organization.member.list").via, {
            kind: "direct",
            role: "builder",
            scopeKind: "organization",
            scopeRef: null
          })
          assert.isFalse(access.get("organization.member.update_role").allow)
          assert.isTrue(access.get("project.create").allow)
          const listed = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: ada.token }))
          assert.include(listed.organizations.map((o: any) => o.id), org.id)
          assert.deepStrictEqual(
            ok(yield* call(baseUrl, "GET", "/v1/me/invitations", { token: ada.token })).invitations,
            []
          )

          // The owner's member list shows Ada with her role.
          const { members } = ok(yield* s.members(owner.token, org.id))
          members.forEach(assertMemberShape)
          assert.deepStrictEqual(members.map((m: any) => [m.id, m.subjectId, m.subjectType, m.status, m.roles]), [
            [accepted.membership.id, ada.user.id, "user", "active", [{ role: "builder", scopeKind: "organization" }]],
            [members[1].id, owner.user.id, "user", "active", [{ role: "owner", scopeKind: "organization" }]]
          ])
          assert.strictEqual(members[0].joinedAt, accepted.membership.joinedAt)

          // The event log, in order: creation, the invitation, and the accept with its membership (one transaction).
          const events = yield* eventsOf(org.id)
          assert.deepStrictEqual(events.map((e) => e.type), [
            "organization.created",
            "membership.added",
            "invite.created",
            "invite.accepted",
            "membership.added"
          ])
          assert.deepInclude(events[2]!.data, { invitationId: invitation.id, email: ada.email, role: "builder" })
          assert.deepInclude(events[4]!.data, {
            memberId: accepted.membership.id,
            subjectId: ada.user.id,
            role: "builder"
          })
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

      it.effect("accept by id from /v1/me/invitations; the typed client decodes every answer", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const bob = yield* s.newUser("bob")
          const ownerClient = yield* clientFor(baseUrl, owner.token)
          const bobClient = yield* clientFor(baseUrl, bob.token)

          const created = yield* ownerClient.invitations.create({
            params: { orgId: org.id },
            payload: { email: bob.email, role: "viewer" }
          })
          assert.strictEqual(created.invitation.status, "pending")
          assert.isDefined(created.delivery)
          const mine = yield* bobClient.invitations.mine({ query: {} })
          assert.deepStrictEqual(mine.data.invitations.map((i) => i.id), [created.invitation.id])
          assert.strictEqual(mine.cursor, null)

          const accepted = yield* bobClient.invitations.acceptMine({ params: { invitationId: created.invitation.id } })
          assert.strictEqual(accepted.invitation.status, "accepted")
          assert.strictEqual(accepted.membership.role, "viewer")
          assert.instanceOf(accepted.membership.joinedAt, Date)

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

          // Accepting again: the invitation is spent (412), whichever route.
          const again = failed(yield* s.acceptById(bob.token, created.invitation.id), 412, "precondition_failed")
          assert.strictEqual(again.details.reason, "invitation_accepted")
          const byToken = failed(
            yield* s.acceptByToken(bob.token, org.id, created.delivery!.token),
            412,
            "precondition_failed"
          )
          assert.strictEqual(byToken.details.reason, "invitation_accepted")
        }))

      it.effect("accept errors: not the recipient 403 (both routes), unknown token or workspace 404, revoked or expired 412", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const other = yield* s.newWorkspace("other")
          const cy = yield* s.newUser("cy")
          const mallory = yield* s.newUser("mallory")
          const created = ok(yield* s.invite(owner.token, org.id, { email: cy.email, role: "admin" }))
          const token: string = created.delivery.token
          const id: string = created.invitation.id

          // Someone else holding the token (or the id) is not the recipient: 403, and nothing changes.
          assert.strictEqual(
            failed(yield* s.acceptByToken(mallory.token, org.id, token), 403, "forbidden").details.reason,
            "not_recipient"
          )
          failed(yield* s.acceptById(mallory.token, id), 403, "forbidden")
          failed(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: mallory.token }), 404, "not_found")
          // A wrong token, a token of another workspace, an unknown workspace: 404.
          failed(yield* s.acceptByToken(cy.token, org.id, `${token}x`), 404, "not_found")
          failed(yield* s.acceptByToken(cy.token, other.org.id, token), 404, "not_found")
          failed(yield* s.acceptByToken(cy.token, "no-such-workspace-anywhere", token), 404, "not_found")
          failed(yield* s.acceptById(cy.token, `inv_${"0".repeat(26)}`), 404, "not_found")
          failed(yield* s.acceptById(cy.token, "inv_malformed"), 404, "not_found")
          // Credentials first, then the body.
          const anonymous = yield* call(baseUrl, "POST", `/v1/organizations/${org.id}/invitations/accept`, {
            body: { token }
          })
          failed(anonymous, 401, "unauthenticated")
          failed(yield* call(baseUrl, "POST", `/v1/me/invitations/${id}/accept`), 401, "unauthenticated")
          failed(yield* call(baseUrl, "GET", "/v1/me/invitations"), 401, "unauthenticated")
          const invalid = failed(yield* s.acceptByToken(cy.token, org.id, ""), 422, "validation_failed")
          assert.property(invalid.details.fields, "token")
          failed(
            yield* call(baseUrl, "POST", `/v1/organizations/${org.id}/invitations/accept`, {
              token: cy.token,
              body: {}
            }),
            422,
            "validation_failed"
          )

          // Revoked: 412 on both routes, and gone from Cy's list.
          const revoked = ok(
            yield* call(baseUrl, "DELETE", `/v1/organizations/${org.id}/invitations/${id}`, {
              token: owner.token
            })
          )
          assert.strictEqual(revoked.invitation.status, "revoked")
          for (const res of [yield* s.acceptByToken(cy.token, org.id, token), yield* s.acceptById(cy.token, id)]) {
            assert.strictEqual(failed(res, 412, "precondition_failed").details.reason, "invitation_revoked")
          }
          assert.deepStrictEqual(
            ok(yield* call(baseUrl, "GET", "/v1/me/invitations", { token: cy.token })).invitations,
            []
          )

          // Expired (its expiry moved into the past): 412 on both routes, not listed for Cy, listed as expired for the
          // workspace.
          const second = ok(yield* s.invite(owner.token, org.id, { email: cy.email, role: "viewer" }))
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
            assert.strictEqual(failed(res, 412, "precondition_failed").details.reason, "invitation_expired")
          }
          assert.deepStrictEqual(
            ok(yield* call(baseUrl, "GET", "/v1/me/invitations", { token: cy.token })).invitations,
            []
          )
          const listed = ok(
            yield* call(baseUrl, "GET", `/v1/organizations/${org.id}/invitations`, { token: owner.token })
          )
          assert.deepStrictEqual(listed.invitations.map((i: any) => [i.id, i.status]), [
            [second.invitation.id, "expired"],
            [id, "revoked"]
          ])
          failed(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: cy.token }), 404, "not_found")
        }))

      it.effect("create: validation, 409 for a member or a pending invitation, owner invitations only from owners", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const dee = yield* s.newUser("dee")

          const bad = { email: "not-an-email", role: "project_admin" }
          const both = failed(yield* s.invite(owner.token, org.id, bad), 422, "validation_failed")
          assert.deepStrictEqual(Object.keys(both.details.fields).sort(), ["email", "role"])
          failed(yield* s.invite(owner.token, org.id, { email: dee.email }), 422, "validation_failed")
          failed(
            yield* s.invite(owner.token, org.id, { email: dee.email, role: "superuser" }),
            422,
            "validation_failed"
          )

          // An existing member (the owner) and an address with a pending invitation: 409.
          const member = failed(
            yield* s.invite(owner.token, org.id, { email: owner.email, role: "viewer" }),
            409,
            "conflict"
          )
          assert.strictEqual(member.details.reason, "already_member")
          const first = ok(yield* s.invite(owner.token, org.id, { email: dee.email, role: "viewer" }))
          const upper = { email: dee.email.toUpperCase(), role: "admin" }
          const dup = failed(yield* s.invite(owner.token, org.id, upper), 409, "conflict")
          assert.deepStrictEqual(dup.details, { reason: "already_invited", invitationId: first.invitation.id })

          // An admin cannot invite an owner; an owner can.
          const admin = yield* s.join(owner.token, org, "admin")
          const asOwner = { email: freshEmail(), role: "owner" }
          const ownerInvite = failed(yield* s.invite(admin.token, org.id, asOwner), 403, "forbidden")
          assert.strictEqual(ownerInvite.details.reason, "owner_required")
          ok(yield* s.invite(admin.token, org.id, { email: freshEmail(), role: "admin" }))
          ok(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "owner" }))

          // A viewer may not invite, list or revoke invitations.
          const viewer = yield* s.join(owner.token, org, "viewer")
          failed(yield* s.invite(viewer.token, org.id, { email: freshEmail(), role: "viewer" }), 403, "forbidden")
          const invitationsPath = `/v1/organizations/${org.id}/invitations`
          failed(yield* call(baseUrl, "GET", invitationsPath, { token: viewer.token }), 403, "forbidden")
          failed(
            yield* call(baseUrl, "DELETE", `${invitationsPath}/${first.invitation.id}`, { token: viewer.token }),
            403,
            "forbidden"
          )

          // The same Idempotency-Key replays the first answer (token included) and creates nothing more.
          const email = freshEmail()
          const key = { "idempotency-key": `invite-${randomUUID()}` }
          const one = yield* s.invite(owner.token, org.id, { email, role: "builder" }, key)
          const two = yield* s.invite(owner.token, org.id, { email, role: "builder" }, key)
          assert.strictEqual(two.text, one.text)
          assert.strictEqual(two.headers.get("idempotent-replayed"), "true")
        }))

      it.effect("revoke: pending becomes revoked once (412 after), 404 for unknown or another workspace's invitation", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const other = yield* s.newWorkspace("other")
          const created = ok(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "builder" }))
          const elsewhere = ok(
            yield* s.invite(other.owner.token, other.org.id, { email: freshEmail(), role: "builder" })
          )
          const revoke = (token: string, ref: string, id: string) =>
            call(baseUrl, "DELETE", `/v1/organizations/${ref}/invitations/${id}`, { token })

          failed(yield* revoke(owner.token, org.id, elsewhere.invitation.id), 404, "not_found")
          failed(yield* revoke(owner.token, org.id, `inv_${"1".repeat(26)}`), 404, "not_found")
          failed(yield* revoke(owner.token, org.id, "nope"), 404, "not_found")
          failed(yield* revoke(owner.token, other.org.id, elsewhere.invitation.id), 404, "not_found")

          const { invitation } = ok(yield* revoke(owner.token, org.slug, created.invitation.id))
          assertInvitationShape(invitation)
          assert.strictEqual(invitation.status, "revoked")
          assert.match(invitation.revokedAt, ISO_MS)
          assert.isNull(invitation.acceptedAt)
          assert.deepStrictEqual({ ...invitation, status: "pending", revokedAt: null }, created.invitation)
          const again = failed(yield* revoke(owner.token, org.id, created.invitation.id), 412, "precondition_failed")
          assert.strictEqual(again.details.reason, "invitation_revoked")
          const events = yield* eventsOf(org.id)
          assert.deepStrictEqual(events.slice(-2).map((e) => e.type), ["invite.created", "invite.revoked"])
          // Revoked, the address may be invited again.
          ok(yield* s.invite(owner.token, org.id, { email: created.invitation.email, role: "viewer" }))
        }))

      it.effect("list invitations: every status newest first, the status filter, keyset pages bound to their filters", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const created: Array<any> = []
          for (let i = 0; i < 5; i++) {
            created.push(ok(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "viewer" })).invitation)
          }
          ok(
            yield* call(baseUrl, "DELETE", `/v1/organizations/${org.id}/invitations/${created[1].id}`, {
              token: owner.token
            })
          )
          const list = (query: string) =>
            call(baseUrl, "GET", `/v1/organizations/${org.id}/invitations${query}`, { token: owner.token })
          const all = ok(yield* list(""))
          all.invitations.forEach(assertInvitationShape)
          assert.deepStrictEqual(all.invitations.map((i: any) => i.id), created.map((i) => i.id).reverse())
          assert.deepStrictEqual(
            ok(yield* list("?status=revoked")).invitations.map((i: any) => i.id),
            [created[1].id]
          )
          assert.lengthOf(ok(yield* list("?status=pending")).invitations, 4)
          assert.deepStrictEqual(ok(yield* list("?status=accepted")).invitations, [])
          failed(yield* list("?status=bogus"), 422, "validation_failed")
          failed(yield* list("?limit=0"), 422, "validation_failed")
          failed(yield* list("?limit=101"), 422, "validation_failed")

          // Page by page: every invitation exactly once, newest first; a cursor is bound to its filters.
          const walked: Array<string> = []
          let cursor: string | null = null
          do {
            const res: Res = yield* list(`?status=pending&limit=3${cursor === null ? "" : `&cursor=${cursor}`}`)
            walked.push(...ok(res).invitations.map((i: any) => i.id))
            cursor = (res.json as any).meta.cursor
            if (cursor !== null) {
              const misuse = failed(yield* list(`?limit=3&cursor=${cursor}`), 422, "validation_failed")
              assert.property(misuse.details.fields, "cursor")
            }
          } while (cursor !== null)
          assert.deepStrictEqual(walked, created.filter((_, i) => i !== 1).map((i) => i.id).reverse())
        }))

      it.effect("members list: shape, roles, keyset pages; the /v1/workspaces alias", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const joined = [yield* s.join(owner.token, org, "viewer"), yield* s.join(owner.token, org, "billing_admin")]
          const { members } = ok(yield* s.members(owner.token, org.id))
          members.forEach(assertMemberShape)
          assert.deepStrictEqual(members.map((m: any) => [m.subjectId, m.roles.map((r: any) => r.role)]), [
            [joined[1]!.user.id, ["billing_admin"]],
            [joined[0]!.user.id, ["viewer"]],
            [owner.user.id, ["owner"]]
          ])
          const first = yield* s.members(owner.token, org.id, "?limit=2")
          assert.lengthOf(ok(first).members, 2)
          const cursor = (first.json as any).meta.cursor
          assert.isString(cursor)
          const second = yield* s.members(owner.token, org.id, `?limit=2&cursor=${cursor}`)
          assert.deepStrictEqual(ok(second).members.map((m: any) => m.subjectId), [owner.user.id])
          assert.isNull((second.json as any).meta.cursor)
          failed(yield* s.members(owner.token, org.id, `?cursor=${cursor}x`), 422, "validation_failed")

          // The viewer may list members (organization.member.list), but change nobody.
          ok(yield* s.members(joined[0]!.token, org.id))
          failed(yield* s.setRole(joined[0]!.token, org.id, joined[1]!.memberId, "viewer"), 403, "forbidden")
          failed(yield* s.remove(joined[0]!.token, org.id, joined[1]!.memberId), 403, "forbidden")
          // The billing admin may not even list them.
          failed(yield* s.members(joined[1]!.token, org.id), 403, "forbidden")

          const aliased = yield* call(baseUrl, "GET", `/v1/workspaces/${org.workspaceRef}/members`, {
            token: owner.token
          })
          assert.deepStrictEqual(ok(aliased).members.map((m: any) => m.id), members.map((m: any) => m.id))
        }))

      it.effect("change role: workspace roles only, membership.updated (audit member.role_changed), access follows", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const other = yield* s.newWorkspace("other")
          const eve = yield* s.join(owner.token, org, "viewer", "eve")
          assert.isFalse((yield* s.permissionsOf(eve.token, org.id)).get("project.create").allow)

          const { member } = ok(yield* s.setRole(owner.token, org.id, eve.memberId, "builder"))
          assertMemberShape(member)
          assert.deepInclude(member, {
            id: eve.memberId,
            subjectId: eve.user.id,
            subjectType: "user",
            status: "active"
          })
          assert.deepStrictEqual(member.roles, [{ role: "builder", scopeKind: "organization" }])
          assert.isTrue((yield* s.permissionsOf(eve.token, org.id)).get("project.create").allow)
          // The same role again changes nothing and records nothing.
          const before = (yield* eventsOf(org.id)).length
          assert.deepStrictEqual(ok(yield* s.setRole(owner.token, org.id, eve.memberId, "builder")).member, member)
          assert.lengthOf(yield* eventsOf(org.id), before)

          const events = yield* eventsOf(org.id)
          const updated = events.filter((e) => e.type === "membership.updated")
          assert.lengthOf(updated, 1)
          assert.deepInclude(updated[0]!.data, { memberId: eve.memberId, role: "builder", previousRoles: ["viewer"] })
          const audit = (yield* auditOf(org.id)).filter((e) => e.eventType === "member.role_changed")
          assert.deepStrictEqual(audit.map((e) => [e.eventType, e.category, e.subjectId]), [
            ["member.role_changed", "membership", eve.memberId]
          ])

          const roles = failed(
            yield* s.setRole(owner.token, org.id, eve.memberId, "project_viewer"),
            422,
            "validation_failed"
          )
          assert.property(roles.details.fields, "role")
          failed(yield* s.setRole(owner.token, org.id, eve.memberId, undefined), 422, "validation_failed")
          failed(yield* s.setRole(owner.token, org.id, `mem_${"2".repeat(26)}`, "viewer"), 404, "not_found")
          failed(yield* s.setRole(owner.token, org.id, "mem_bad", "viewer"), 404, "not_found")
          // A member of another workspace is not a member here.
          const otherOwnerMember = yield* s.memberIdOf(other.owner.token, other.org.id, other.owner.user.id)
          failed(yield* s.setRole(owner.token, org.id, otherOwnerMember, "viewer"), 404, "not_found")
          failed(yield* s.remove(owner.token, org.id, otherOwnerMember), 404, "not_found")
        }))

      it.effect("remove: { deleted: true }, bindings gone, the workspace hidden again, membership.removed; re-invitable", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const gus = yield* s.join(owner.token, org, "admin", "gus")
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: gus.token }))

          assert.deepStrictEqual(ok(yield* s.remove(owner.token, org.id, gus.memberId)), { deleted: true })
          failed(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: gus.token }), 404, "not_found")
          failed(yield* s.members(gus.token, org.id), 404, "not_found")
          failed(yield* s.remove(owner.token, org.id, gus.memberId), 404, "not_found")
          const { members } = ok(yield* s.members(owner.token, org.id))
          assert.deepStrictEqual(members.map((m: any) => m.subjectId), [owner.user.id])
          const sql = yield* SqlClient.SqlClient
          const bindings =
            yield* sql`select * from role_bindings where org_id = ${org.id} and subject_id = ${gus.user.id}`
              .pipe(Effect.orDie)
          assert.lengthOf(bindings, 0)
          const removed = (yield* eventsOf(org.id)).filter((e) => e.type === "membership.removed")
          assert.deepStrictEqual(removed.map((e) => e.data), [
            { memberId: gus.memberId, subjectType: "user", subjectId: gus.user.id, roles: ["admin"] }
          ])

          // Invited again, Gus joins again with the new role.
          const again = ok(yield* s.invite(owner.token, org.id, { email: gus.email, role: "viewer" }))
          const accepted = ok(yield* s.acceptById(gus.token, again.invitation.id))
          assert.notStrictEqual(accepted.membership.id, gus.memberId)
          assert.strictEqual((yield* s.permissionsOf(gus.token, org.id)).get("organization.read").via.role, "viewer")
        }))

      it.effect("admin vs owner: an admin changes and removes non-owners only and never grants owner; owners do", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
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
            assert.strictEqual(failed(res, 403, "forbidden").details.reason, "owner_required")
          }
          ok(yield* s.remove(admin.token, org.id, builder.memberId))

          // The owner promotes the admin; the new owner may then demote the first one.
          assert.deepStrictEqual(
            ok(yield* s.setRole(owner.token, org.id, admin.memberId, "owner")).member.roles,
            [{ role: "owner", scopeKind: "organization" }]
          )
          ok(yield* s.setRole(admin.token, org.id, ownerMember, "admin"))
          failed(yield* s.setRole(owner.token, org.id, admin.memberId, "admin"), 403, "forbidden")
          const owners = ok(yield* s.members(admin.token, org.id)).members
            .filter((m: any) => m.roles.some((r: any) => r.role === "owner"))
          assert.deepStrictEqual(owners.map((m: any) => m.subjectId), [admin.user.id])
        }))

      it.effect("last owner: neither demoted nor removed (412 last_owner); with two owners one may go", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newAccountRoot()
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
          for (
            const res of [
              yield* s.setRole(owner.token, org.id, ownerMember, "admin"),
              yield* s.remove(owner.token, org.id, ownerMember)
            ]
          ) {
            const error = failed(res, 412, "precondition_failed")
            assert.strictEqual(error.details.reason, "last_owner")
          }
          // Owner to owner is no change, so allowed.
          ok(yield* s.setRole(owner.token, org.id, ownerMember, "owner"))

          const second = yield* s.join(owner.token, org, "owner", "second")
          ok(yield* s.setRole(owner.token, org.id, ownerMember, "admin"))
          failed(yield* s.remove(second.token, org.id, second.memberId), 412, "precondition_failed")
          ok(yield* s.remove(second.token, org.id, ownerMember))
          failed(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: owner.token }), 404, "not_found")
        }))

      it.effect("last owner of a child workspace counts direct owners; the account's owner still reaches it by cascade", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          assert.isFalse(org.isAccountRoot)
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
          const last = failed(yield* s.remove(owner.token, org.id, ownerMember), 412, "precondition_failed")
          assert.strictEqual(last.details.reason, "last_owner")
          const second = yield* s.join(owner.token, org, "owner", "second")
          ok(yield* s.remove(second.token, org.id, ownerMember))
          // No longer a member, the account root's owner still holds owner here through the account.
          assert.deepStrictEqual(ok(yield* s.members(owner.token, org.id)).members.map((m: any) => m.subjectId), [
            second.user.id
          ])
          const via = (yield* s.permissionsOf(owner.token, org.id)).get("organization.member.remove").via
          assert.deepStrictEqual([via.kind, via.role], ["account_cascade", "owner"])
        }))

      it.effect("two owners demoting each other at once: one wins, an owner always remains", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
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
          const owners = ok(yield* s.members(a.status === 200 ? owner.token : second.token, org.id)).members
            .filter((m: any) => m.roles.some((r: any) => r.role === "owner"))
          assert.lengthOf(owners, 1)
        }))

      it.effect("another workspace, or none: 404 on every members and invitations route (never 403)", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const s = steps(baseUrl)
          const { owner, org } = yield* s.newWorkspace()
          const stranger = yield* s.newUser("stranger")
          const invitation =
            ok(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "viewer" })).invitation
          const ownerMember = yield* s.memberIdOf(owner.token, org.id, owner.user.id)
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
              const res = yield* call(baseUrl, method, `/v1/organizations/${ref}${path}`, {
                token: stranger.token,
                ...(body === undefined ? {} : { body })
              })
              failed(res, 404, "not_found")
            }
          }
          // Unauthenticated: 401 before anything else.
          failed(yield* s.members("", org.id), 401, "unauthenticated")
          const patch = yield* call(baseUrl, "PATCH", `/v1/organizations/${org.id}/members/${ownerMember}`, {
            body: { role: "viewer" }
          })
          failed(patch, 401, "unauthenticated")
          // Nothing changed.
          assert.lengthOf(ok(yield* s.members(owner.token, org.id)).members, 1)
          const listed = ok(
            yield* call(baseUrl, "GET", `/v1/organizations/${org.id}/invitations`, { token: owner.token })
          )
          assert.strictEqual(listed.invitations[0].status, "pending")
        }))
    }
  )
}

const CliServer = Layer.merge(testServer("memory"), NodeServices.layer)

layer(CliServer, { excludeTestServices: true })("cpctl members and invitations", (it) => {
  it.effect("invitations create, list, mine, accept; members list, set-role, remove", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { baseUrl } = yield* TestServer
      const s = steps(baseUrl)
      const { owner, org } = yield* s.newWorkspace()
      const ivy = yield* s.newUser("ivy")
      const dir = yield* fs.makeTempDirectoryScoped()
      const as = (token: string) => (...args: ReadonlyArray<string>) =>
        cpctl({ CP_CONFIG_DIR: dir, CP_BASE_URL: baseUrl, CP_TOKEN: token }, ...args)
      const asOwner = as(owner.token)
      const asIvy = as(ivy.token)
      const succeeded = (res: { readonly exitCode: number; readonly stderr: string }) =>
        assert.strictEqual(res.exitCode, 0, res.stderr)

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
      const { invitation, delivery } = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({
        invitation: Invitation,
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
      assert.strictEqual(bad.exitCode, 1)
      assert.match(bad.stderr, /^error invalid_flags: /)
      const accepted = yield* asIvy("invitations", "accept", "--workspace", org.id, "--token", delivery.token)
      succeeded(accepted)
      assert.match(accepted.stdout, /^Joined as builder \(member mem_\w+\) by invitation inv_\w+\.\n$/)
      const twice = yield* asIvy("invitations", "accept", invitation.id)
      assert.strictEqual(twice.exitCode, 1)
      assert.match(twice.stderr, /^error precondition_failed: /)

      const members = yield* asOwner("members", "list", "--workspace", org.id, "--json")
      succeeded(members)
      const page = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({
        data: Schema.Struct({ members: Schema.Array(Member) }),
        cursor: Schema.NullOr(Schema.String)
      })))(members.stdout)
      const ivyMember = page.data.members.find((m) => m.subjectId === ivy.user.id)
      assert.isDefined(ivyMember)
      const table = yield* asOwner("members", "list", "-w", org.id)
      assert.match(table.stdout, /^ID\s+SUBJECT\s+TYPE\s+ROLES\s+STATUS\s+JOINED\n/)
      assert.include(table.stdout, `${ivyMember!.id}  ${ivy.user.id}  user  builder`)

      const promoted = yield* asOwner("members", "set-role", ivyMember!.id, "admin", "-w", org.id)
      succeeded(promoted)
      assert.include(promoted.stdout, `${ivyMember!.id}  ${ivy.user.id}  user  admin`)
      const ownerMember = page.data.members.find((m) => m.subjectId === owner.user.id)!
      const lastOwner = yield* asOwner("members", "remove", ownerMember.id, "-w", org.id)
      assert.strictEqual(lastOwner.exitCode, 1)
      assert.include(lastOwner.stderr, "error precondition_failed: ")
      assert.include(lastOwner.stderr, `details: {"reason":"last_owner"}`)
      const removed = yield* asOwner("members", "remove", ivyMember!.id, "-w", org.id)
      succeeded(removed)
      assert.strictEqual(removed.stdout, `Removed ${ivyMember!.id} from ${org.id}.\n`)

      const revokeTarget = ok(yield* s.invite(owner.token, org.id, { email: freshEmail(), role: "viewer" })).invitation
      const revoked = yield* asOwner("invitations", "revoke", revokeTarget.id, "-w", org.id)
      succeeded(revoked)
      assert.include(revoked.stdout, `${revokeTarget.id}`)
      assert.include(revoked.stdout, "revoked")
    }))
})
