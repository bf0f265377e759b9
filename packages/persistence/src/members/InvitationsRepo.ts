/**
 * Invitations to join a workspace: an email address, the workspace role it will get, a hashed single-use token, and
 * how the invitation ended (accepted or revoked). Expiry is not stored: a pending invitation whose `expiresAt` has
 * passed reads as expired, so every read that cares takes `now`.
 */
import { WorkspaceRole } from "@cp/domain/access"
import { InvitationId, OrgId, UserId, WorkspaceRef } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Order, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { WorkspaceTables } from "../workspaces/MemoryTables.ts"

/** The states an invitation is stored in; `expired` is derived from `expiresAt` when read. */
export const StoredInvitationStatus = Schema.Literals(["pending", "accepted", "revoked"])
export type StoredInvitationStatus = typeof StoredInvitationStatus.Type

/** What a list may filter on: the stored states, with `pending` meaning unexpired, plus `expired`. */
export type InvitationStatusFilter = StoredInvitationStatus | "expired"

/** A row of `invitations`. */
export const InvitationRow = Schema.Struct({
  id: InvitationId,
  orgId: OrgId,
  /** Normalized (trimmed, lower-cased) by the caller. */
  email: Schema.String,
  role: WorkspaceRole,
  status: StoredInvitationStatus,
  /** Only an HMAC of the token is kept, so a database dump reveals no usable token. */
  tokenHash: Schema.String,
  invitedBy: UserId,
  expiresAt: Schema.Date,
  createdAt: Schema.Date,
  acceptedAt: Schema.NullOr(Schema.Date),
  acceptedBy: Schema.NullOr(UserId),
  revokedAt: Schema.NullOr(Schema.Date)
})
export type InvitationRow = typeof InvitationRow.Type

/** The workspace of an invitation, as its recipient sees it. */
export interface InvitationOrgRow {
  readonly id: OrgId
  readonly name: string
  readonly slug: string
  readonly publicId: WorkspaceRef
}

/** An invitation with its workspace. */
export interface InvitationWithOrg {
  readonly invitation: InvitationRow
  readonly org: InvitationOrgRow
}

/** Keyset position in an invitation list: the last invitation of the previous page. */
export interface InvitationKey {
  readonly createdAt: Date
  readonly id: string
}

/** One keyset page of a workspace's invitations, newest first, optionally of one status as of `now`. */
export interface InvitationPageQuery {
  readonly orgId: OrgId
  readonly now: Date
  readonly status?: InvitationStatusFilter
  /** At most this many rows come back: ask for one more than the page size to learn whether another page follows. */
  readonly limit: number
  /** Exclusive: the page holds the invitations strictly after this key in the list's order. */
  readonly after?: InvitationKey
}

/** One keyset page of the pending, unexpired invitations addressed to an email, newest first. */
export interface PendingForEmailQuery {
  readonly email: string
  readonly now: Date
  readonly limit: number
  readonly after?: InvitationKey
}

/** The constraint behind the `UniqueViolation` of a token hash that is already stored. */
export const invitationsTokenHashConstraint = "invitations_token_hash_key"

const uniques: ReadonlyArray<UniqueKey<InvitationRow>> = [
  primaryKey("invitations_pkey"),
  { constraint: invitationsTokenHashConstraint, key: (invitation) => invitation.tokenHash }
]

/** `order by created_at desc, id desc`: lists, newest first. */
const newestFirst: Order.Order<InvitationKey> = Order.flip(Order.Struct({ createdAt: Order.Date, id: Order.String }))

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

const Key = Schema.Struct({ createdAt: Schema.Date, id: Schema.String })
const PendingFor = Schema.Struct({ orgId: OrgId, email: Schema.String, now: Schema.Date })
const ListPage = Schema.Struct({
  orgId: OrgId,
  now: Schema.Date,
  status: Schema.optionalKey(Schema.Literals(["pending", "accepted", "revoked", "expired"])),
  limit: Schema.Int,
  after: Schema.optionalKey(Key)
})
const PendingForEmail = Schema.Struct({
  email: Schema.String,
  now: Schema.Date,
  limit: Schema.Int,
  after: Schema.optionalKey(Key)
})
const WithOrgRow = Schema.Struct({
  ...InvitationRow.fields,
  orgName: Schema.String,
  orgSlug: Schema.String,
  orgPublicId: WorkspaceRef
})
const Accept = Schema.Struct({ id: InvitationId, now: Schema.Date, userId: UserId })
const Revoke = Schema.Struct({ id: InvitationId, now: Schema.Date })

/** Invitations; accepting and revoking are single conditional statements, so an invitation ends at most once. */
export class InvitationsRepo extends Context.Service<InvitationsRepo, {
  /** `UniqueViolation` on a duplicate id or token hash. */
  readonly insert: (invitation: InvitationRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: InvitationId) => Effect.Effect<Option.Option<InvitationRow>>
  readonly findByTokenHash: (tokenHash: string) => Effect.Effect<Option.Option<InvitationRow>>
  /** The pending, unexpired invitation of `email` to `orgId`, if there is one. */
  readonly findPending: (orgId: OrgId, email: string, now: Date) => Effect.Effect<Option.Option<InvitationRow>>
  /** Up to `limit` of the workspace's invitations strictly after `after`, newest first (createdAt desc, id desc). */
  readonly listPage: (query: InvitationPageQuery) => Effect.Effect<ReadonlyArray<InvitationRow>>
  /** Up to `limit` of the pending, unexpired invitations to `email` in any workspace, newest first, with it. */
  readonly listPendingForEmail: (query: PendingForEmailQuery) => Effect.Effect<ReadonlyArray<InvitationWithOrg>>
  /** Marks the invitation accepted by `userId` at `now` if it is still pending and unexpired; None otherwise. */
  readonly accept: (id: InvitationId, now: Date, userId: UserId) => Effect.Effect<Option.Option<InvitationRow>>
  /** Marks the invitation revoked at `now` if it is still pending and unexpired; None otherwise. */
  readonly revoke: (id: InvitationId, now: Date) => Effect.Effect<Option.Option<InvitationRow>>
}>()("@cp/persistence/members/InvitationsRepo") {
  /** Invitations in a Map, joined to the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    InvitationsRepo,
    Effect.gen(function*() {
      const { organizations } = yield* WorkspaceTables
      const invitations = new Map<InvitationId, InvitationRow>()
      const where = (predicate: (invitation: InvitationRow) => boolean) =>
        Array.from(invitations.values()).filter(predicate).sort(newestFirst)
      const after = (key: InvitationKey | undefined) => (invitation: InvitationRow) =>
        key === undefined || newestFirst(invitation, key) > 0
      return InvitationsRepo.of({
        insert: Effect.fn("InvitationsRepo.insert")((invitation: InvitationRow) =>
          insertUnique(invitations, invitation.id, invitation, uniques)
        ),
        findById: Effect.fn("InvitationsRepo.findById")(function*(id: InvitationId) {
          return Option.fromUndefinedOr(invitations.get(id))
        }),
        findByTokenHash: Effect.fn("InvitationsRepo.findByTokenHash")(function*(tokenHash: string) {
          return Option.fromUndefinedOr(where((invitation) => invitation.tokenHash === tokenHash)[0])
        }),
        findPending: Effect.fn("InvitationsRepo.findPending")(function*(orgId: OrgId, email: string, now: Date) {
          return Option.fromUndefinedOr(
            where((invitation) =>
              invitation.orgId === orgId && invitation.email === email && isActionable(invitation, now)
            )[0]
          )
        }),
        listPage: Effect.fn("InvitationsRepo.listPage")(function*(query: InvitationPageQuery) {
          const { status } = query
          return where((invitation) =>
            invitation.orgId === query.orgId && after(query.after)(invitation) &&
            (status === undefined || hasStatus(invitation, status, query.now))
          ).slice(0, query.limit)
        }),
        listPendingForEmail: Effect.fn("InvitationsRepo.listPendingForEmail")(function*(query: PendingForEmailQuery) {
          return where((invitation) =>
            invitation.email === query.email && isActionable(invitation, query.now) && after(query.after)(invitation)
          )
            .flatMap((invitation) => {
              const org = organizations.get(invitation.orgId)
              return org === undefined
                ? []
                : [{ invitation, org: { id: org.id, name: org.name, slug: org.slug, publicId: org.publicId } }]
            })
            .slice(0, query.limit)
        }),
        accept: Effect.fn("InvitationsRepo.accept")((id: InvitationId, now: Date, userId: UserId) =>
          updateRow(invitations, id, (invitation) =>
            isActionable(invitation, now)
              ? Option.some({ ...invitation, status: "accepted" as const, acceptedAt: now, acceptedBy: userId })
              : Option.none())
        ),
        revoke: Effect.fn("InvitationsRepo.revoke")((id: InvitationId, now: Date) =>
          updateRow(invitations, id, (invitation) =>
            isActionable(invitation, now)
              ? Option.some({ ...invitation, status: "revoked" as const, revokedAt: now })
              : Option.none())
        )
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer))

  /** Invitations in the `invitations` table. */
  static readonly sql = Layer.effect(
    InvitationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const keyAfter = (key: InvitationKey | undefined) =>
        key === undefined ? [] : [sql`(created_at, id) < (${key.createdAt}, ${key.id})`]
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
      const insert = SqlSchema.void({
        Request: InvitationRow,
        execute: (invitation) => sql`insert into invitations ${sql.insert(invitation)}`
      })
      const findById = SqlSchema.findOneOption({
        Request: InvitationId,
        Result: InvitationRow,
        execute: (id) => sql`select * from invitations where id = ${id}`
      })
      const findByTokenHash = SqlSchema.findOneOption({
        Request: Schema.String,
        Result: InvitationRow,
        execute: (tokenHash) => sql`select * from invitations where token_hash = ${tokenHash}`
      })
      const findPending = SqlSchema.findOneOption({
        Request: PendingFor,
        Result: InvitationRow,
        execute: ({ orgId, email, now }) =>
          sql`
            select * from invitations
            where email = ${email} and status = 'pending' and org_id = ${orgId} and expires_at > ${now}
            order by created_at desc, id desc
            limit 1`
      })
      const listPage = SqlSchema.findAll({
        Request: ListPage,
        Result: InvitationRow,
        execute: ({ orgId, now, status, limit, after }) =>
          sql`
            select * from invitations
            where ${sql.and([sql`org_id = ${orgId}`, ...statusIs(status, now), ...keyAfter(after)])}
            order by created_at desc, id desc
            limit ${limit}`
      })
      const listPendingForEmail = SqlSchema.findAll({
        Request: PendingForEmail,
        Result: WithOrgRow,
        execute: ({ email, now, limit, after }) =>
          sql`
            select i.*, o.name as org_name, o.slug as org_slug, o.public_id as org_public_id
            from invitations i join organizations o on o.id = i.org_id
            where ${
            sql.and([
              sql`i.email = ${email} and i.status = 'pending' and i.expires_at > ${now}`,
              ...(after === undefined ? [] : [sql`(i.created_at, i.id) < (${after.createdAt}, ${after.id})`])
            ])
          }
            order by i.created_at desc, i.id desc
            limit ${limit}`
      })
      const accept = SqlSchema.findOneOption({
        Request: Accept,
        Result: InvitationRow,
        execute: ({ id, now, userId }) =>
          sql`
            update invitations set status = 'accepted', accepted_at = ${now}, accepted_by = ${userId}
            where id = ${id} and status = 'pending' and expires_at > ${now}
            returning *`
      })
      const revoke = SqlSchema.findOneOption({
        Request: Revoke,
        Result: InvitationRow,
        execute: ({ id, now }) =>
          sql`
            update invitations set status = 'revoked', revoked_at = ${now}
            where id = ${id} and status = 'pending' and expires_at > ${now}
            returning *`
      })
      return InvitationsRepo.of({
        insert: Effect.fn("InvitationsRepo.insert")((invitation: InvitationRow) =>
          uniqueViolationOrDie(insert(invitation))
        ),
        findById: Effect.fn("InvitationsRepo.findById")((id: InvitationId) => Effect.orDie(findById(id))),
        findByTokenHash: Effect.fn("InvitationsRepo.findByTokenHash")((tokenHash: string) =>
          Effect.orDie(findByTokenHash(tokenHash))
        ),
        findPending: Effect.fn("InvitationsRepo.findPending")((orgId: OrgId, email: string, now: Date) =>
          Effect.orDie(findPending({ orgId, email, now }))
        ),
        listPage: Effect.fn("InvitationsRepo.listPage")((query: InvitationPageQuery) => Effect.orDie(listPage(query))),
        listPendingForEmail: Effect.fn("InvitationsRepo.listPendingForEmail")((query: PendingForEmailQuery) =>
          listPendingForEmail(query).pipe(
            Effect.map((rows) =>
              rows.map(({ orgName, orgSlug, orgPublicId, ...invitation }) => ({
                invitation,
                org: { id: invitation.orgId, name: orgName, slug: orgSlug, publicId: orgPublicId }
              }))
            ),
            Effect.orDie
          )
        ),
        accept: Effect.fn("InvitationsRepo.accept")((id: InvitationId, now: Date, userId: UserId) =>
          Effect.orDie(accept({ id, now, userId }))
        ),
        revoke: Effect.fn("InvitationsRepo.revoke")((id: InvitationId, now: Date) => Effect.orDie(revoke({ id, now })))
      })
    })
  )
}
