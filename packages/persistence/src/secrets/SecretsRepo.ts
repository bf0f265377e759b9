/**
 * Secrets: one row per secret at workspace, project or environment scope. The repository stores only the sealed
 * value it is handed; sealing and opening are the server's (it holds the KEK).
 */
import { OrgId } from "@cp/domain/ids"
import { SecretId } from "@cp/domain/secrets"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { idPosition, keyAfter, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { type SecretPageWindow, SecretRow, type SecretScopeFilter } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a second active secret with the same key in one scope. */
export const secretsActiveKeyConstraint = "secrets_active_key"

/** A new sealed value for a rotation. */
export interface SecretRotationChange {
  readonly sealedValue: string
  readonly kekId: string
  readonly at: Date
}

const activeKey = (row: SecretRow) =>
  row.status === "active"
    ? compositeKey(row.orgId, row.projectId, row.environmentId, row.secretKey)
    : `revoked ${row.id}`

const uniques: ReadonlyArray<UniqueKey<SecretRow>> = [
  primaryKey("secrets_pkey"),
  { constraint: secretsActiveKeyConstraint, key: activeKey }
]

const inScope = (filter: SecretScopeFilter) => (row: SecretRow): boolean => {
  switch (filter.kind) {
    case "all":
      return true
    case "organization":
      return row.scopeKind === "organization"
    case "project":
      return row.scopeKind === "project" && row.projectId === filter.projectId
    case "environment":
      return row.scopeKind === "environment" && row.projectId === filter.projectId &&
        row.environmentId === filter.environmentId
  }
}

const SecretKeyRequest = Schema.Struct({ orgId: OrgId, secretId: SecretId })
const ListRequest = Schema.Struct({
  orgId: OrgId,
  kind: Schema.String,
  projectId: Schema.NullOr(Schema.String),
  environmentId: Schema.NullOr(Schema.String),
  limit: Schema.Int,
  after: Schema.optionalKey(Schema.UndefinedOr(Schema.Struct({ at: Schema.Date, key: Schema.String })))
})
const RotateRequest = Schema.Struct({
  orgId: OrgId,
  secretId: SecretId,
  sealedValue: Schema.String,
  kekId: Schema.String,
  at: Schema.Date
})
const RevokeRequest = Schema.Struct({ orgId: OrgId, secretId: SecretId, at: Schema.Date })

export class SecretsRepo extends Context.Service<SecretsRepo, {
  /** `UniqueViolation` on `secrets_active_key` when the scope already has an active secret with that key. */
  readonly insert: (row: SecretRow) => Effect.Effect<void, UniqueViolation>
  /** The secret with this id in this workspace (any status; another workspace's is None). */
  readonly find: (orgId: OrgId, secretId: SecretId) => Effect.Effect<Option.Option<SecretRow>>
  /** Up to `limit` active secrets of the filter's scope(s) strictly after `after`, newest first (createdAt, id). */
  readonly list: (
    orgId: OrgId,
    filter: SecretScopeFilter,
    window: SecretPageWindow
  ) => Effect.Effect<ReadonlyArray<SecretRow>>
  /** Stores a new sealed value on an active secret: version + 1, lastRotatedAt set. None unless active here. */
  readonly rotate: (
    orgId: OrgId,
    secretId: SecretId,
    change: SecretRotationChange
  ) => Effect.Effect<Option.Option<SecretRow>>
  /** Marks an active secret revoked; the final row, or None unless it was active here. */
  readonly revoke: (orgId: OrgId, secretId: SecretId, at: Date) => Effect.Effect<Option.Option<SecretRow>>
}>()("@cp/persistence/secrets/SecretsRepo") {
  /** Secrets in memory, for fast deterministic tests. */
  static readonly memory = Layer.sync(SecretsRepo, () => {
    const table = new Map<SecretId, SecretRow>()
    const activeIn = (orgId: OrgId, secretId: SecretId) =>
      Option.filter(
        Option.fromUndefinedOr(table.get(secretId)),
        (row) => row.orgId === orgId && row.status === "active"
      )
    const change = (orgId: OrgId, secretId: SecretId, next: (row: SecretRow) => SecretRow) =>
      atomically((changes) => {
        const current = activeIn(orgId, secretId)
        if (Option.isNone(current)) return Effect.succeed(Option.none<SecretRow>())
        const row = next(current.value)
        changes.set(table, secretId, row)
        return Effect.succeed(Option.some(row))
      })
    return SecretsRepo.of({
      insert: Effect.fn("SecretsRepo.insert")((row: SecretRow) => insertUnique(table, row.id, row, uniques)),
      find: Effect.fn("SecretsRepo.find")(function*(orgId: OrgId, secretId: SecretId) {
        return Option.filter(Option.fromUndefinedOr(table.get(secretId)), (row) => row.orgId === orgId)
      }),
      list: Effect.fn("SecretsRepo.list")(function*(orgId: OrgId, filter: SecretScopeFilter, window: SecretPageWindow) {
        const rows = Array.from(table.values())
          .filter((row) => row.orgId === orgId && row.status === "active" && inScope(filter)(row))
        return windowOf(rows, idPosition, window)
      }),
      rotate: Effect.fn("SecretsRepo.rotate")((orgId: OrgId, secretId: SecretId, rotation: SecretRotationChange) =>
        change(orgId, secretId, (row) => ({
          ...row,
          sealedValue: rotation.sealedValue,
          kekId: rotation.kekId,
          version: row.version + 1,
          lastRotatedAt: rotation.at,
          updatedAt: rotation.at
        }))
      ),
      revoke: Effect.fn("SecretsRepo.revoke")((orgId: OrgId, secretId: SecretId, at: Date) =>
        change(orgId, secretId, (row) => ({ ...row, status: "revoked", revokedAt: at, updatedAt: at }))
      )
    })
  })

  /** Secrets in the `secrets` table. */
  static readonly sql = Layer.effect(
    SecretsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: SecretRow,
        execute: (row) => sql`insert into secrets ${sql.insert(row)}`
      })
      const find = SqlSchema.findOneOption({
        Request: SecretKeyRequest,
        Result: SecretRow,
        execute: ({ orgId, secretId }) => sql`select * from secrets where id = ${secretId} and org_id = ${orgId}`
      })
      const list = SqlSchema.findAll({
        Request: ListRequest,
        Result: SecretRow,
        execute: ({ orgId, kind, projectId, environmentId, limit, after }) =>
          sql`
            select * from secrets
            where ${
            sql.and([
              sql`org_id = ${orgId}`,
              sql`status = 'active'`,
              ...(kind === "all" ? [] : [sql`scope_kind = ${kind}`]),
              ...(projectId === null ? [] : [sql`project_id = ${projectId}`]),
              ...(environmentId === null ? [] : [sql`environment_id = ${environmentId}`]),
              ...keyAfter(sql, after)
            ])
          }
            order by created_at desc, id desc
            limit ${limit}`
      })
      const rotate = SqlSchema.findOneOption({
        Request: RotateRequest,
        Result: SecretRow,
        execute: ({ orgId, secretId, sealedValue, kekId, at }) =>
          sql`
            update secrets set
              sealed_value = ${sealedValue},
              kek_id = ${kekId},
              version = version + 1,
              last_rotated_at = ${at},
              updated_at = ${at}
            where id = ${secretId} and org_id = ${orgId} and status = 'active'
            returning *`
      })
      const revoke = SqlSchema.findOneOption({
        Request: RevokeRequest,
        Result: SecretRow,
        execute: ({ orgId, secretId, at }) =>
          sql`
            update secrets set status = 'revoked', revoked_at = ${at}, updated_at = ${at}
            where id = ${secretId} and org_id = ${orgId} and status = 'active'
            returning *`
      })
      return SecretsRepo.of({
        insert: Effect.fn("SecretsRepo.insert")((row: SecretRow) => uniqueViolationOrDie(insert(row))),
        find: Effect.fn("SecretsRepo.find")((orgId: OrgId, secretId: SecretId) =>
          Effect.orDie(find({ orgId, secretId }))
        ),
        list: Effect.fn("SecretsRepo.list")((orgId: OrgId, filter: SecretScopeFilter, window: SecretPageWindow) =>
          Effect.orDie(list({
            orgId,
            kind: filter.kind,
            projectId: filter.kind === "project" || filter.kind === "environment" ? filter.projectId : null,
            environmentId: filter.kind === "environment" ? filter.environmentId : null,
            limit: window.limit,
            after: window.after
          }))
        ),
        rotate: Effect.fn("SecretsRepo.rotate")((orgId: OrgId, secretId: SecretId, change: SecretRotationChange) =>
          Effect.orDie(rotate({ orgId, secretId, ...change }))
        ),
        revoke: Effect.fn("SecretsRepo.revoke")((orgId: OrgId, secretId: SecretId, at: Date) =>
          Effect.orDie(revoke({ orgId, secretId, at }))
        )
      })
    })
  )
}
