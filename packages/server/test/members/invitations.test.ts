/**
 * The invitations and members services on memory repositories under `TestClock` (time starts at 0 and moves only
 * when a test moves it): an invitation is actionable until its 7th day and not from that instant on, on both accept
 * routes, in the recipient's list and in the workspace's list; the token travels by mail (and in the answer only in
 * development and test); accepting writes the member, its role binding and both events in one transaction.
 */
import { type Actor, type ErrorDetails, Forbidden, NotFound, PreconditionFailed, type WorkspaceRole } from "@cp/domain"
import { EventLogRepo, InvitationsRepo, OutboxRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { ActorResolverLive } from "../../src/identity/actors.ts"
import { SecurityLog } from "../../src/identity/securityLog.ts"
import { IdentityService } from "../../src/identity/service.ts"
import { INVITATION_TTL_MS, InvitationsService } from "../../src/members/invitations.ts"
import { MembersService } from "../../src/members/service.ts"
import { ActorResolver } from "../../src/platform/actors.ts"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { EventLog } from "../../src/platform/events.ts"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Mailer } from "../../src/platform/mailer.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { RateLimiter } from "../../src/platform/rateLimit.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspaceResolverLive } from "../../src/workspaces/resolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"

const DAY = 24 * 60 * 60 * 1000

/** The services of `app.ts` (without OAuth and HTTP) on fresh memory repositories, in the given mode. */
const layerFor = (env: Readonly<Record<string, string>>) =>
  Layer.mergeAll(MembersService.layer, InvitationsService.layer, IdentityService.layer).pipe(
    Layer.provideMerge(WorkspacesService.layer),
    Layer.provideMerge(Layer.mergeAll(ActorResolverLive, WorkspaceResolverLive, SecurityLog.layer)),
    Layer.provideMerge(Layer.mergeAll(EventLog.layer, RateLimiter.layer, Cursors.layer, Mailer.layer)),
    Layer.provideMerge(ServerKeys.layer),
    Layer.provideMerge(Layer.effect(AppConfig, parseConfig(env))),
    Layer.provideMerge(RepositoriesMemory)
  )

const TestLayer = layerFor({ APP_ENV: "test" })
const ProductionLayer = layerFor({
  APP_ENV: "production",
  SECRETS_KEK: Buffer.alloc(32, 7).toString("base64"),
  TOKEN_SIGNING_KEY: "a-production-signing-key"
})

/** Signs `email` in as its verified owner (creating the user and its Personal workspace); returns its actor. */
const signIn = (email: string) =>
  Effect.gen(function*() {
    const result = yield* (yield* IdentityService).signInVerifiedEmail(email, "test")
    const actor: Actor = Option.getOrThrow(yield* (yield* ActorResolver).resolve(result.token))
    if (actor.kind !== "user") return assert.fail(`a session token resolved to a ${actor.kind}`)
    return actor
  })

/** The workspace as the edge resolves it for `actor` (which must see it). */
const workspaceOf = (ref: string, actor: Actor) =>
  Effect.map(Effect.flatMap(WorkspaceResolver, (resolver) => resolver.resolve(ref, actor)), Option.getOrThrow)

/** An owner, its new workspace, and an invitation to `email` as `role`, with the token as mailed. */
const invite = (email: string, role: WorkspaceRole = "builder") =>
  Effect.gen(function*() {
    const owner = yield* signIn(`owner-${email}`)
    const { organization } = yield* (yield* WorkspacesService).create(owner, { name: "Acme" })
    const workspace = yield* workspaceOf(organization.id, owner)
    const created = yield* (yield* InvitationsService).create(owner, workspace, { email, role })
    const mail = (yield* (yield* OutboxRepo).list({ to: email })).find((m) => m.template === "invitation")
    assert.isDefined(mail, "the invitation was mailed")
    return { owner, workspace, created, mail: mail!, token: String(mail!.data["token"]) }
  })

/** Asserts a refusal: an instance of `Class` (a wire error class) whose details name `reason`. */
const assertRefused = <C extends Forbidden | PreconditionFailed>(
  error: unknown,
  Class: new(props: { readonly error: { readonly message: string; readonly details?: ErrorDetails } }) => C,
  reason: string
) => {
  assert.instanceOf(error, Class)
  assert.strictEqual(error.error.details["reason"], reason)
}

/** An invitation to cy, signed in, at the instant it expires (7 days on). */
const expiredInvitation = Effect.gen(function*() {
  const invited = yield* invite("cy@example.test")
  const cy = yield* signIn("cy@example.test")
  yield* TestClock.adjust(7 * DAY)
  return { ...invited, cy }
})

describe("InvitationsService timing", () => {
  it.effect("an invitation is valid 7 days: accepting by token 1 ms before expiry succeeds", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created, workspace, token, owner } = yield* invite("ada@example.test", "admin")
      assert.strictEqual(INVITATION_TTL_MS, 7 * DAY)
      assert.strictEqual(created.invitation.expiresAt.getTime(), 7 * DAY)
      assert.strictEqual(created.invitation.status, "pending")
      const ada = yield* signIn("ada@example.test")
      yield* TestClock.adjust(7 * DAY - 1)
      assert.lengthOf((yield* invitations.mine(ada, {})).data.invitations, 1, "still listed 1 ms before")
      const accepted = yield* invitations.acceptByToken(ada, workspace, token)
      assert.strictEqual(accepted.invitation.status, "accepted")
      assert.deepStrictEqual(accepted.invitation.acceptedAt, new Date(7 * DAY - 1))
      assert.deepStrictEqual(accepted.membership.joinedAt, new Date(7 * DAY - 1))
      assert.strictEqual(accepted.membership.role, "admin")
      assert.strictEqual(accepted.membership.status, "active")

      // The new member sees the workspace with the role; the owner's member list shows it.
      const seen = yield* workspaceOf(workspace.organization.id, ada)
      assert.deepStrictEqual(seen.grants.map((grant) => [grant.kind, grant.role]), [["direct", "admin"]])
      const members = (yield* (yield* MembersService).list(workspace, {})).data.members
      assert.deepStrictEqual(
        members.map((member) => [member.subjectId, member.roles]),
        [
          [ada.userId, [{ role: "admin", scopeKind: "organization" }]],
          [owner.userId, [{ role: "owner", scopeKind: "organization" }]]
        ]
      )
      assert.strictEqual(members[0]?.id, accepted.membership.id)
      assert.lengthOf((yield* invitations.mine(ada, {})).data.invitations, 0, "an accepted invitation is not listed")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("accepting by id 1 ms before expiry succeeds", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created } = yield* invite("bob@example.test")
      const bob = yield* signIn("bob@example.test")
      yield* TestClock.adjust(7 * DAY - 1)
      const accepted = yield* invitations.acceptById(bob, created.invitation.id)
      assert.strictEqual(accepted.invitation.status, "accepted")
      assert.strictEqual(accepted.membership.role, "builder")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("at exactly 7 days the invitation is expired: both accept routes and revoke are refused", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created, workspace, token, owner, cy } = yield* expiredInvitation
      const expired = [PreconditionFailed, "invitation_expired"] as const
      assertRefused(yield* Effect.flip(invitations.acceptByToken(cy, workspace, token)), ...expired)
      assertRefused(yield* Effect.flip(invitations.acceptById(cy, created.invitation.id)), ...expired)
      assertRefused(yield* Effect.flip(invitations.revoke(owner, workspace, created.invitation.id)), ...expired)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an expired invitation leaves its recipient's list, and stays in the workspace's as expired", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created, workspace, cy } = yield* expiredInvitation
      assert.deepStrictEqual((yield* invitations.mine(cy, {})).data.invitations, [])
      const listed = (yield* invitations.list(workspace, {})).data.invitations
      assert.deepStrictEqual(listed.map((i) => [i.id, i.status]), [[created.invitation.id, "expired"]])
      assert.lengthOf((yield* invitations.list(workspace, { status: "pending" })).data.invitations, 0)
      assert.lengthOf((yield* invitations.list(workspace, { status: "expired" })).data.invitations, 1)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an expired invitation joined nothing, and the address may be invited again", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { workspace, owner, cy } = yield* expiredInvitation
      assert.isTrue(Option.isNone(yield* (yield* WorkspaceResolver).resolve(workspace.organization.id, cy)))
      const again = yield* invitations.create(owner, workspace, { email: "cy@example.test", role: "viewer" })
      assert.strictEqual(again.invitation.expiresAt.getTime(), 14 * DAY)
    }).pipe(Effect.provide(TestLayer)))
})

describe("InvitationsService", () => {
  it.effect("the token is mailed (template invitation), returned only in test mode, and stored only as a hash", () =>
    Effect.gen(function*() {
      const { created, mail, token, workspace } = yield* invite("dee@example.test")
      assert.strictEqual(mail.template, "invitation")
      assert.deepStrictEqual(mail.data, {
        token,
        invitationId: created.invitation.id,
        orgId: workspace.organization.id
      })
      assert.include(mail.text, token)
      assert.include(mail.text, `/v1/organizations/${workspace.organization.id}/invitations/accept`)
      assert.deepStrictEqual(created.delivery, { mode: "local_debug", token })
      const stored = Option.getOrThrow(yield* (yield* InvitationsRepo).findById(created.invitation.id))
      assert.notInclude(JSON.stringify(stored), token)
      assert.match(stored.tokenHash, /^[0-9a-f]{64}$/)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("in production the answer carries no token", () =>
    Effect.gen(function*() {
      const owner = yield* signIn("prod-owner@example.test")
      const { organization } = yield* (yield* WorkspacesService).create(owner, { name: "Prod" })
      const workspace = yield* workspaceOf(organization.id, owner)
      const created = yield* (yield* InvitationsService).create(owner, workspace, {
        email: "x@example.test",
        role: "viewer"
      })
      assert.deepStrictEqual(Object.keys(created), ["invitation"])
    }).pipe(Effect.provide(ProductionLayer)))

  it.effect("accepting writes the member and its binding, and records invite.accepted then membership.added", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { workspace, token, owner } = yield* invite("eve@example.test", "viewer")
      const eve = yield* signIn("eve@example.test")
      const accepted = yield* invitations.acceptByToken(eve, workspace, token)
      const events = yield* (yield* EventLogRepo).listEvents({ orgId: workspace.organization.id })
      const ours = events.filter((event) => event.type.startsWith("invite.") || event.type === "membership.added")
      assert.deepStrictEqual(ours.map((event) => [event.type, event.actorId]).reverse(), [
        ["membership.added", owner.userId],
        ["invite.created", owner.userId],
        ["invite.accepted", eve.userId],
        ["membership.added", eve.userId]
      ])
      const added = ours.find((event) => event.type === "membership.added" && event.actorId === eve.userId)
      assert.deepInclude(added?.data["member"], {
        id: accepted.membership.id,
        subjectId: eve.userId,
        roles: [{ role: "viewer", scopeKind: "organization" }]
      })
      assert.notInclude(JSON.stringify(events), token, "events are redacted")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a second accept of the same invitation is refused as accepted, before the membership check", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created, workspace, token } = yield* invite("eve2@example.test", "viewer")
      const eve = yield* signIn("eve2@example.test")
      yield* invitations.acceptByToken(eve, workspace, token)
      const again = yield* Effect.flip(invitations.acceptById(eve, created.invitation.id))
      assertRefused(again, PreconditionFailed, "invitation_accepted")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("only the recipient accepts: another user gets 403 on both routes, and nothing changes", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created, workspace, token } = yield* invite("fay@example.test")
      const mallory = yield* signIn("mallory@example.test")
      assertRefused(
        yield* Effect.flip(invitations.acceptByToken(mallory, workspace, token)),
        Forbidden,
        "not_recipient"
      )
      assertRefused(
        yield* Effect.flip(invitations.acceptById(mallory, created.invitation.id)),
        Forbidden,
        "not_recipient"
      )
      assert.deepStrictEqual((yield* invitations.mine(mallory, {})).data.invitations, [])
      // The recipient's address is compared trimmed and lower-cased.
      const fay = yield* signIn("  FAY@example.test ")
      assert.lengthOf((yield* invitations.mine(fay, {})).data.invitations, 1)
      yield* invitations.acceptByToken(fay, workspace, token)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a revoked invitation is stamped, refused to its recipient and not revoked twice", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { created, workspace, token, owner } = yield* invite("gus@example.test")
      yield* TestClock.adjust(1000)
      const { invitation } = yield* invitations.revoke(owner, workspace, created.invitation.id)
      assert.strictEqual(invitation.status, "revoked")
      assert.deepStrictEqual(invitation.revokedAt, new Date(1000))
      const gus = yield* signIn("gus@example.test")
      assertRefused(
        yield* Effect.flip(invitations.acceptByToken(gus, workspace, token)),
        PreconditionFailed,
        "invitation_revoked"
      )
      assertRefused(
        yield* Effect.flip(invitations.revoke(owner, workspace, created.invitation.id)),
        PreconditionFailed,
        "invitation_revoked"
      )
      assert.deepStrictEqual((yield* invitations.mine(gus, {})).data.invitations, [])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an unknown token or invitation id is NotFound", () =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      const { workspace, token } = yield* invite("hal@example.test")
      const hal = yield* signIn("hal@example.test")
      assert.instanceOf(yield* Effect.flip(invitations.acceptByToken(hal, workspace, `${token}x`)), NotFound)
      assert.instanceOf(yield* Effect.flip(invitations.acceptById(hal, mint.invitation(0))), NotFound)
    }).pipe(Effect.provide(TestLayer)))
})
