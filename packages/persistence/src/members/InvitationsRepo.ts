/**
 * Invitations to join a workspace: an email address, the workspace role it will get, a hashed single-use token, and
 * how the invitation ended (accepted or revoked). Expiry is not stored: a pending invitation whose `expiresAt` has
 * passed reads as expired, so every read that cares takes `now`.
 */
import { InvitationId, WorkspaceRef } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { createdNewestFirst, idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { WorkspaceTables } from "../workspaces/MemoryTables.ts"
import {
  InvitationAcceptance,
  InvitationRevocation,
  InvitationRow,
  InvitationsPage,
  type InvitationStatusFilter,
  type InvitationWithOrg,
  PendingForEmailPage,
  PendingInvitation
} from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a token hash that is already stored. */
export const invitationsTokenHashConstraint = "invitations_token_hash_key"

const uniques: ReadonlyArray<UniqueKey<InvitationRow>> = [
  primaryKey("invitations_pkey"),
  { constraint: invitationsTokenHashConstraint, key: (invitation) => invitation.tokenHash }
]

const isActionable = (invitation: InvitationRow, now: Date) =>
  invitation.status === "pending" && invitation.expiresAt > now

/** Whether `invitation` is in `status` at `now` (`pending` means unexpired, `expired` means pending but past it). */
const hasStatus = (invitation: InvitationRow, status: InvitationStatusFilter, now: Date): boolean => {
  switch (status) {
    case "pending":
      return isActionable(invitation, now)
    case "expired":
      return invitation.status === "pending" && invitation.expiresAt <= now
    default:
      return invitation.status === status
  }
}

/** An invitation row joined with the columns of its workspace that its recipient sees. */
const WithOrgRow = Schema.Struct({
  ...InvitationRow.fields,
  orgName: Schema.String,
  orgSlug: Schema.String,
  orgPublicId: WorkspaceRef
})

/** Invitations; accepting and revoking are single conditional statements, so an invitation ends at most once. */
export class InvitationsRepo extends Context.Service<InvitationsRepo, {
  /** `UniqueViolation` on a duplicate id or token hash. */
  readonly insert: (invitation: InvitationRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: InvitationId) => Effect.Effect<Option.Option<InvitationRow>>
  readonly findByTokenHash: (tokenHash: string) => Effect.Effect<Option.Option<InvitationRow>>
  /** The pending, unexpired invitation of `email` to `orgId`, if there is one. */
  readonly findPending: (query: PendingInvitation) => Effect.Effect<Option.Option<InvitationRow>>
  /** Up to `limit` of the workspace's invitations strictly after `after`, newest first (createdAt desc, id desc). */
  readonly listPage: (page: InvitationsPage) => Effect.Effect<ReadonlyArray<InvitationRow>>
  /** Up to `limit` of the pending, unexpired invitations to `email` in any workspace, newest first, with it. */
  readonly listPendingForEmail: (page: PendingForEmailPage) => Effect.Effect<ReadonlyArray<InvitationWithOrg>>
  /** Marks the invitation accepted by `userId` at `now` if it is still pending and unexpired; None otherwise. */
  readonly accept: (acceptance: InvitationAcceptance) => Effect.Effect<Option.Option<InvitationRow>>
  /** Marks the invitation revoked at `now` if it is still pending and unexpired; None otherwise. */
  readonly revoke: (revocation: InvitationRevocation) => Effect.Effect<Option.Option<InvitationRow>>
}>()("@cp/persistence/members/InvitationsRepo") {
  /** Invitations in a Map, joined to the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    InvitationsRepo,
    Effect.gen(function*() {
      const { organizations } = yield* WorkspaceTables
      const invitations = new Map<InvitationId, InvitationRow>()
      const where = (predicate: (invitation: InvitationRow) => boolean) =>
        Array.from(invitations.values()).filter(predicate).sort(createdNewestFirst)
      return InvitationsRepo.of({
        insert: (invitation) => insertUnique(invitations, invitation.id, invitation, uniques),
        findById: (id) => Effect.sync(() => Option.fromUndefinedOr(invitations.get(id))),
        findByTokenHash: (tokenHash) =>
          Effect.sync(() => Option.fromUndefinedOr(where((invitation) => invitation.tokenHash === tokenHash)[0])),
        findPending: ({ orgId, email, now }) =>
          Effect.sync(() =>
            Option.fromUndefinedOr(
              where((invitation) =>
                invitation.orgId === orgId && invitation.email === email && isActionable(invitation, now)
              )[0]
            )
          ),
        listPage: (page) =>
          Effect.sync(() => {
            const { orgId, status, now } = page
            const rows = where((invitation) =>
              invitation.orgId === orgId && (status === undefined || hasStatus(invitation, status, now))
            )
            return windowOf(rows, idPosition, page)
          }),
        listPendingForEmail: (page) =>
          Effect.sync(() => {
            const rows = where((invitation) => invitation.email === page.email && isActionable(invitation, page.now))
              .flatMap((invitation) => {
                const org = organizations.get(invitation.orgId)
                return org === undefined
                  ? []
                  : [{ invitation, org: { id: org.id, name: org.name, slug: org.slug, publicId: org.publicId } }]
              })
            return windowOf(rows, ({ invitation }) => idPosition(invitation), page)
          }),
        accept: ({ id, now, userId }) =>
          updateRow(invitations, id, (invitation) =>
            isActionable(invitation, now)
              ? Option.some({ ...invitation, status: "accepted" as const, acceptedAt: now, acceptedBy: userId })
              : Option.none()),
        revoke: ({ id, now }) =>
          updateRow(invitations, id, (invitation) =>
            isActionable(invitation, now)
              ? Option.some({ ...invitation, status: "revoked" as const, revokedAt: now })
              : Option.none())
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer))

  /** Invitations in the `invitations` table. */
  static readonly sql = Layer.effect(
    InvitationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const statusIs = (status: InvitationStatusFilter | undefined, now: Date) => {
        switch (status) {
          case undefined:
            return []
          case "pending":
            return [sql`status = 'pending' and expires_at > ${now}`]
          case "expired":
            return [sql`status = 'pending' and expires_at <= ${now}`]
          default:
            return [sql`status = ${status}`]
        }
      }
      return InvitationsRepo.of({
        insert: insertRow(sql, "invitations", InvitationRow),
        findById: flow(
          SqlSchema.findOneOption({
            Request: InvitationId,
            Result: InvitationRow,
            execute: (id) => sql`select * from invitations where id = ${id}`
          }),
          Effect.orDie
        ),
        findByTokenHash: flow(
          SqlSchema.findOneOption({
            Request: Schema.String,
            Result: InvitationRow,
            execute: (tokenHash) => sql`select * from invitations where token_hash = ${tokenHash}`
          }),
          Effect.orDie
        ),
        findPending: flow(
          SqlSchema.findOneOption({
            Request: PendingInvitation,
            Result: InvitationRow,
            execute: ({ orgId, email, now }) =>
              sql`
                select * from invitations
                where email = ${email} and status = 'pending' and org_id = ${orgId} and expires_at > ${now}
                order by created_at desc, id desc
                limit 1`
          }),
          Effect.orDie
        ),
        listPage: flow(
          SqlSchema.findAll({
            Request: InvitationsPage,
            Result: InvitationRow,
            execute: ({ orgId, now, status, ...window }) =>
              keysetQuery(
                sql,
                sql`select * from invitations`,
                [sql`org_id = ${orgId}`, ...statusIs(status, now)],
                window
              )
          }),
          Effect.orDie
        ),
        listPendingForEmail: flow(
          SqlSchema.findAll({
            Request: PendingForEmailPage,
            Result: WithOrgRow,
            execute: ({ email, now, ...window }) =>
              keysetQuery(
                sql,
                sql`
                  select i.*, o.name as org_name, o.slug as org_slug, o.public_id as org_public_id
                  from invitations i join organizations o on o.id = i.org_id`,
                [sql`i.email = ${email} and i.status = 'pending' and i.expires_at > ${now}`],
                window,
                { at: "i.created_at", key: "i.id" }
              )
          }),
          Effect.map((rows) =>
            rows.map(({ orgName, orgSlug, orgPublicId, ...invitation }) => ({
              invitation,
              org: { id: invitation.orgId, name: orgName, slug: orgSlug, publicId: orgPublicId }
            }))
          ),
          Effect.orDie
        ),
        accept: flow(
          SqlSchema.findOneOption({
            Request: InvitationAcceptance,
            Result: InvitationRow,
            execute: ({ id, now, userId }) =>
              sql`
                update invitations set status = 'accepted', accepted_at = ${now}, accepted_by = ${userId}
                where id = ${id} and status = 'pending' and expires_at > ${now}
                returning *`
          }),
          Effect.orDie
        ),
        revoke: flow(
          SqlSchema.findOneOption({
            Request: InvitationRevocation,
            Result: InvitationRow,
            execute: ({ id, now }) =>
              sql`
                update invitations set status = 'revoked', revoked_at = ${now}
                where id = ${id} and status = 'pending' and expires_at > ${now}
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
