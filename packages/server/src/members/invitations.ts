/**
 * Invitations (spec: invitation; "Members and invitations" endpoints; invitation states; contract §2 and §4): an
 * owner or admin invites an email address to a workspace role; the token travels by mail (and, in development and
 * test, in the create answer); the recipient, signed in with that verified address, accepts by token or by id and
 * becomes a member with that role. Invitations are valid 7 days; expiry is read from `expiresAt`, never stored.
 */
import {
  type AcceptedInvitation,
  type Actor,
  Conflict,
  Forbidden,
  Invitation,
  type InvitationId,
  type InvitationStatus,
  Member,
  type MyInvitation,
  NotFound,
  type Paged,
  PreconditionFailed,
  type ResolvedWorkspace,
  type ValidationFailed,
  wireError,
  type WorkspaceRole
} from "@cp/domain"
import {
  idPosition,
  type InvitationRow,
  InvitationsRepo,
  type MemberRow,
  MembersRepo,
  OrganizationsRepo,
  type PageWindow,
  type RoleBindingRow,
  RoleBindingsRepo,
  Transactor,
  type UserRow,
  UsersRepo
} from "@cp/persistence"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { normalizeEmail } from "../identity/service.ts"
import { authenticatedUser } from "../identity/users.ts"
import { lockedAuthority } from "../platform/authority.ts"
import { AppConfig } from "../platform/config.ts"
import { hmacSha256Hex, randomBase64Url } from "../platform/crypto.ts"
import { apiJson, type EventActor, eventActorOf, EventLog, previousJson } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { ServerKeys } from "../platform/keys.ts"
import { Mailer } from "../platform/mailer.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { holdsRole } from "../platform/rbac.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { insertedMember, ownerRequired } from "./service.ts"

export const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000

/** Workspaces have no lifecycle yet: every workspace an invitation can name is active. */
const ACTIVE_WORKSPACE = "active"

/** The status an invitation reads as at `now`: a pending one past its `expiresAt` is expired. */
export const statusAt = (row: InvitationRow, now: number): InvitationStatus =>
  row.status === "pending" && row.expiresAt.getTime() <= now ? "expired" : row.status

export const toInvitation = (row: InvitationRow, now: number): Invitation => ({
  id: row.id,
  email: row.email,
  role: row.role,
  status: statusAt(row, now),
  invitedBy: row.invitedBy,
  expiresAt: row.expiresAt,
  createdAt: row.createdAt,
  acceptedAt: row.acceptedAt,
  revokedAt: row.revokedAt
})

/** 412 for an invitation that can no longer be accepted or revoked, with the state in `details.reason`. */
const notActionable = (row: InvitationRow, now: number) => {
  const status = statusAt(row, now)
  return wireError(PreconditionFailed, `This invitation is ${status === "pending" ? "no longer pending" : status}`, {
    reason: `invitation_${status}`,
    status
  })
}

const notRecipient = () =>
  wireError(Forbidden, "This invitation is addressed to another email address", { reason: "not_recipient" })

export interface CreatedInvitation {
  readonly invitation: Invitation
  readonly delivery?: { readonly mode: "local_debug"; readonly token: string }
}

export class InvitationsService extends Context.Service<InvitationsService, {
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: { readonly email: string; readonly role: WorkspaceRole }
  ) => Effect.Effect<CreatedInvitation, Forbidden | Conflict>
  /** Every invitation of the workspace (any status, or the one asked for), newest first. */
  readonly list: (
    workspace: ResolvedWorkspace,
    query: PageRequest & { readonly status?: InvitationStatus }
  ) => Effect.Effect<Paged<{ readonly invitations: ReadonlyArray<Invitation> }>, ValidationFailed>
  readonly revoke: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    invitationId: InvitationId
  ) => Effect.Effect<{ readonly invitation: Invitation }, Forbidden | NotFound | PreconditionFailed>
  /** The recipient accepts with the mailed token, on the workspace the invitation is for. */
  readonly acceptByToken: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    token: string
  ) => Effect.Effect<AcceptedInvitation, Forbidden | NotFound | PreconditionFailed | Conflict>
  /** The caller's pending, unexpired invitations (by its verified email), newest first. */
  readonly mine: (
    actor: Actor,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly invitations: ReadonlyArray<MyInvitation> }>, ValidationFailed>
  /** The signed-in recipient accepts one of its invitations by id. */
  readonly acceptById: (
    actor: Actor,
    invitationId: InvitationId
  ) => Effect.Effect<AcceptedInvitation, Forbidden | NotFound | PreconditionFailed | Conflict>
}>()("@cp/server/InvitationsService") {
  static readonly layer = Layer.effect(
    InvitationsService,
    Effect.gen(function*() {
      const invitations = yield* InvitationsRepo
      const members = yield* MembersRepo
      const organizations = yield* OrganizationsRepo
      const bindings = yield* RoleBindingsRepo
      const users = yield* UsersRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors
      const mailer = yield* Mailer
      const keys = yield* ServerKeys
      const config = yield* AppConfig
      const authority = lockedAuthority(organizations, yield* WorkspaceResolver)

      /** Only an HMAC under the server's signing key is stored (contract §3), so a dump yields no usable token. */
      const tokenHash = (token: string) => hmacSha256Hex(keys.signingKey, `invitation:${token}`)

      /** The signed-in user the invitation is addressed to, by verified email; 403 for anyone (or anything) else. */
      const recipient = Effect.fnUntraced(function*(actor: Actor, invitation: InvitationRow) {
        if (actor.kind !== "user") return yield* notRecipient()
        const user = yield* authenticatedUser(users, actor.userId)
        if (!user.emailVerified || normalizeEmail(user.email) !== invitation.email) return yield* notRecipient()
        return user
      })

      const accept = Effect.fnUntraced(function*(actor: Actor, found: InvitationRow) {
        const user = yield* recipient(actor, found)
        const now = yield* Clock.currentTimeMillis
        if (statusAt(found, now) !== "pending") return yield* notActionable(found, now)
        return yield* tx.withTransaction(Effect.gen(function*() {
          yield* organizations.lockWorkspace(found.orgId)
          if (Option.isSome(yield* members.find({ orgId: found.orgId, subjectType: "user", subjectId: user.id }))) {
            return yield* wireError(Conflict, "You are already a member of this workspace", {
              reason: "already_member"
            })
          }
          const at = new Date(now)
          const accepted = yield* invitations.accept({ id: found.id, now: at, userId: user.id })
          if (Option.isNone(accepted)) {
            // Accepted, revoked (or expired) by someone else since it was read.
            const current = yield* invitations.findById(found.id)
            return yield* notActionable(Option.getOrElse(current, () => found), now)
          }
          const member: MemberRow = {
            id: mint.member(now),
            orgId: found.orgId,
            subjectType: "user",
            subjectId: user.id,
            status: "active",
            joinedAt: at
          }
          const binding: RoleBindingRow = {
            id: mint.roleBinding(now),
            orgId: found.orgId,
            subjectType: "user",
            subjectId: user.id,
            role: found.role,
            scopeKind: "organization",
            scopeRef: null,
            createdAt: at
          }
          // The membership was checked above under the workspace lock: a collision is a defect.
          yield* members.insert(member).pipe(Effect.orDie)
          yield* bindings.insert(binding).pipe(Effect.orDie)
          const actorOfEvent: EventActor = { actorType: "user", actorId: user.id }
          yield* events.record({
            orgId: found.orgId,
            type: "invite.accepted",
            actor: actorOfEvent,
            subject: { kind: "invitation", id: found.id, name: found.email },
            // webhooks.md §1: the invitation as the API returns it (and what accepting it changed).
            data: {
              invitation: apiJson(Invitation, toInvitation(accepted.value, now)),
              previous: previousJson(Invitation, toInvitation(found, now), toInvitation(accepted.value, now))
            },
            description: `Invitation for ${found.email} accepted`
          })
          yield* events.record({
            orgId: found.orgId,
            type: "membership.added",
            actor: actorOfEvent,
            subject: { kind: "member", id: member.id, name: null },
            data: {
              member: apiJson(Member, yield* insertedMember(members, member, [binding])),
              invitationId: found.id
            },
            description: `Joined as ${found.role} by invitation`
          })
          return {
            invitation: toInvitation(accepted.value, now),
            membership: { id: member.id, role: found.role, joinedAt: at, status: "active" }
          }
        }))
      })

      const inviteMail = (input: {
        readonly invitation: InvitationRow
        readonly token: string
        readonly workspace: ResolvedWorkspace
        readonly inviter: UserRow
      }) => {
        const { invitation, token, workspace, inviter } = input
        const org = workspace.organization
        const acceptUrl = `${config.publicBaseUrl}/v1/organizations/${org.id}/invitations/accept`
        return mailer.send({
          to: invitation.email,
          template: "invitation",
          subject: `You are invited to join ${org.name}`,
          text: [
            `${inviter.displayName ?? inviter.email} invited you to join the workspace "${org.name}"`,
            `as ${invitation.role}.`,
            "",
            `Sign in as ${invitation.email}, then accept with this token:`,
            `  POST ${acceptUrl}  {"token":"${token}"}`,
            `  or: cpctl invitations accept --org ${org.id} --token ${token}`,
            "",
            `The invitation expires at ${invitation.expiresAt.toISOString()}.`,
            "If you did not expect it, ignore this message."
          ].join("\n"),
          data: { token, invitationId: invitation.id, orgId: org.id }
        })
      }

      return InvitationsService.of({
        create: Effect.fn("Invitations.create")(function*(actor, workspace, input) {
          // The spec's `invitedBy` is a user: API keys do not invite.
          if (actor.kind !== "user") {
            return yield* wireError(Forbidden, "Only a signed-in user can invite", { reason: "user_required" })
          }
          const orgId = workspace.organization.id
          const email = normalizeEmail(input.email)
          const now = yield* Clock.currentTimeMillis
          const token = `cpinv_${randomBase64Url(32)}`
          const row: InvitationRow = {
            id: mint.invitation(now),
            orgId,
            email,
            role: input.role,
            status: "pending",
            tokenHash: tokenHash(token),
            invitedBy: actor.userId,
            expiresAt: new Date(now + INVITATION_TTL_MS),
            createdAt: new Date(now),
            acceptedAt: null,
            acceptedBy: null,
            revokedAt: null
          }
          yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "organization.invitation.create")
            if (input.role === "owner" && !holdsRole(current.grants, "owner")) {
              return yield* ownerRequired("invite an owner")
            }
            const invitee = yield* users.findByEmail(email)
            const membership = Option.isSome(invitee)
              ? yield* members.find({ orgId, subjectType: "user", subjectId: invitee.value.id })
              : Option.none()
            if (Option.isSome(membership)) {
              return yield* wireError(Conflict, `${email} is already a member of this workspace`, {
                reason: "already_member"
              })
            }
            const pending = yield* invitations.findPending({ orgId, email, now: row.createdAt })
            if (Option.isSome(pending)) {
              const message = `${email} already has a pending invitation; revoke it to invite again`
              return yield* wireError(Conflict, message, { reason: "already_invited", invitationId: pending.value.id })
            }
            // A fresh id and 256 random bits: a collision is a defect.
            yield* invitations.insert(row).pipe(Effect.orDie)
            yield* events.record({
              orgId,
              type: "invite.created",
              actor: eventActorOf(actor),
              subject: { kind: "invitation", id: row.id, name: email },
              data: { invitation: apiJson(Invitation, toInvitation(row, now)) },
              description: `Invited ${email} as ${row.role}`
            })
          }))
          yield* inviteMail({
            invitation: row,
            token,
            workspace,
            inviter: yield* authenticatedUser(users, actor.userId)
          })
          const invitation = toInvitation(row, now)
          // The token in the answer only where it is safe to show (contract §4): development and test.
          return AppConfig.isLocal(config)
            ? { invitation, delivery: { mode: "local_debug" as const, token } }
            : { invitation }
        }),

        list: Effect.fn("Invitations.list")(function*(workspace, query) {
          const orgId = workspace.organization.id
          const status = query.status === undefined ? {} : { status: query.status }
          const now = yield* Clock.currentTimeMillis
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "invitations.list", scope: orgId, filters: status },
            query,
            (window) => invitations.listPage({ orgId, now: new Date(now), ...status, ...window }),
            idPosition
          )
          return { data: { invitations: items.map((row) => toInvitation(row, now)) }, cursor }
        }),

        revoke: Effect.fn("Invitations.revoke")(function*(actor, workspace, invitationId) {
          const orgId = workspace.organization.id
          const found = Option.filter(yield* invitations.findById(invitationId), (row) => row.orgId === orgId)
          if (Option.isNone(found)) return yield* wireError(NotFound, "Invitation not found")
          const now = yield* Clock.currentTimeMillis
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* authority(actor, workspace, "organization.invitation.revoke")
            const revoked = yield* invitations.revoke({ id: invitationId, now: new Date(now) })
            if (Option.isNone(revoked)) {
              const current = yield* invitations.findById(invitationId)
              return yield* notActionable(Option.getOrElse(current, () => found.value), now)
            }
            const row = revoked.value
            yield* events.record({
              orgId,
              type: "invite.revoked",
              actor: eventActorOf(actor),
              subject: { kind: "invitation", id: row.id, name: row.email },
              data: {
                invitation: apiJson(Invitation, toInvitation(row, now)),
                previous: previousJson(Invitation, toInvitation(found.value, now), toInvitation(row, now))
              },
              description: `Invitation for ${row.email} revoked`
            })
            return { invitation: toInvitation(row, now) }
          }))
        }),

        acceptByToken: Effect.fn("Invitations.acceptByToken")(function*(actor, workspace, token) {
          const found = Option.filter(
            yield* invitations.findByTokenHash(tokenHash(token)),
            (row) => row.orgId === workspace.organization.id
          )
          if (Option.isNone(found)) return yield* wireError(NotFound, "No invitation to this workspace has this token")
          return yield* accept(actor, found.value)
        }),

        mine: Effect.fn("Invitations.mine")(function*(actor, page) {
          // Invitations are addressed to people: an API key (or an unverified address) has none.
          const pendingFor = Effect.fnUntraced(function*(window: PageWindow) {
            if (actor.kind !== "user") return []
            const user = yield* authenticatedUser(users, actor.userId)
            if (!user.emailVerified) return []
            const now = yield* currentDate
            return yield* invitations.listPendingForEmail({ email: normalizeEmail(user.email), now, ...window })
          })
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "me.invitations", scope: actor.kind === "user" ? actor.userId : "" },
            page,
            pendingFor,
            ({ invitation }) => idPosition(invitation)
          )
          return {
            data: {
              invitations: items.map(({ invitation, org }): MyInvitation => ({
                id: invitation.id,
                email: invitation.email,
                role: invitation.role,
                invitedBy: invitation.invitedBy,
                expiresAt: invitation.expiresAt,
                createdAt: invitation.createdAt,
                org: {
                  id: org.id,
                  name: org.name,
                  slug: org.slug,
                  workspaceRef: org.publicId,
                  status: ACTIVE_WORKSPACE
                }
              }))
            },
            cursor
          }
        }),

        acceptById: Effect.fn("Invitations.acceptById")(function*(actor, invitationId) {
          const found = yield* invitations.findById(invitationId)
          if (Option.isNone(found)) return yield* wireError(NotFound, "Invitation not found")
          return yield* accept(actor, found.value)
        })
      })
    })
  )
}
