/**
 * Secrets: one row per secret at workspace, project or environment scope. The repository stores only the sealed
 * value it is handed; sealing and opening are the server's (it holds the KEK).
 */
import type { SecretId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { SecretKey, SecretRevocation, SecretRotation, SecretRow, type SecretScopeFilter, SecretsPage } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a second active secret with the same key in one scope. */
export const secretsActiveKeyConstraint = "secrets_active_key"

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

export class SecretsRepo extends Context.Service<SecretsRepo, {
  /** `UniqueViolation` on `secrets_active_key` when the scope already has an active secret with that key. */
  readonly insert: (row: SecretRow) => Effect.Effect<void, UniqueViolation>
  /** The secret with this id in this workspace (any status; another workspace's is None). */
  readonly find: (key: SecretKey) => Effect.Effect<Option.Option<SecretRow>>
  /** Up to `limit` active secrets of the filter's scope(s) strictly after `after`, newest first (createdAt, id). */
  readonly list: (page: SecretsPage) => Effect.Effect<ReadonlyArray<SecretRow>>
  /** Stores a new sealed value on an active secret: version + 1, lastRotatedAt set. None unless active here. */
  readonly rotate: (rotation: SecretRotation) => Effect.Effect<Option.Option<SecretRow>>
  /** Marks an active secret revoked; the final row, or None unless it was active here. */
  readonly revoke: (revocation: SecretRevocation) => Effect.Effect<Option.Option<SecretRow>>
}>()("@cp/persistence/secrets/SecretsRepo") {
  /** Secrets in memory, for fast deterministic tests. */
  static readonly memory = Layer.sync(SecretsRepo, () => {
    const table = new Map<SecretId, SecretRow>()
    const secretIn = ({ orgId, secretId }: SecretKey) =>
      Option.filter(Option.fromUndefinedOr(table.get(secretId)), (row) => row.orgId === orgId)
    /** The conditional `update … where status = 'active' returning *` of rotate and revoke. */
    const changeActive = (key: SecretKey, next: (row: SecretRow) => SecretRow) =>
      atomically((changes) => {
        const current = Option.filter(secretIn(key), (row) => row.status === "active")
        if (Option.isNone(current)) return Effect.succeed(Option.none<SecretRow>())
        const row = next(current.value)
        changes.set(table, row.id, row)
        return Effect.succeed(Option.some(row))
      })
    return SecretsRepo.of({
      insert: (row) => insertUnique(table, row.id, row, uniques),
      find: (key) => Effect.sync(() => secretIn(key)),
      list: (page) =>
        Effect.sync(() => {
          const rows = Array.from(table.values())
            .filter((row) => row.orgId === page.orgId && row.status === "active" && inScope(page.filter)(row))
          return windowOf(rows, idPosition, page)
        }),
      rotate: (rotation) =>
        changeActive(rotation, (row) => ({
          ...row,
          sealedValue: rotation.sealedValue,
          kekId: rotation.kekId,
          version: row.version + 1,
          lastRotatedAt: rotation.at,
          updatedAt: rotation.at
        })),
      revoke: ({ at, ...key }) =>
        changeActive(key, (row) => ({ ...row, status: "revoked", revokedAt: at, updatedAt: at }))
    })
  })

  /** Secrets in the `secrets` table. */
  static readonly sql = Layer.effect(
    SecretsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      /** The conditions of a scope filter. */
      const inScopeSql = (filter: typeof SecretScopeFilter.Encoded) => {
        switch (filter.kind) {
          case "all":
            return []
          case "organization":
            return [sql`scope_kind = 'organization'`]
          case "project":
            return [sql`scope_kind = 'project'`, sql`project_id = ${filter.projectId}`]
          case "environment":
            return [
              sql`scope_kind = 'environment'`,
              sql`project_id = ${filter.projectId}`,
              sql`environment_id = ${filter.environmentId}`
            ]
        }
      }
      return SecretsRepo.of({
        insert: insertRow(sql, "secrets", SecretRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: SecretKey,
            Result: SecretRow,
            execute: ({ orgId, secretId }) => sql`select * from secrets where id = ${secretId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: SecretsPage,
            Result: SecretRow,
            execute: ({ orgId, filter, ...window }) =>
              keysetQuery(
                sql,
                sql`select * from secrets`,
                [sql`org_id = ${orgId}`, sql`status = 'active'`, ...inScopeSql(filter)],
                window
              )
          }),
          Effect.orDie
        ),
        rotate: flow(
          SqlSchema.findOneOption({
            Request: SecretRotation,
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
          }),
          Effect.orDie
        ),
        revoke: flow(
          SqlSchema.findOneOption({
            Request: SecretRevocation,
            Result: SecretRow,
            execute: ({ orgId, secretId, at }) =>
              sql`
                update secrets set status = 'revoked', revoked_at = ${at}, updated_at = ${at}
                where id = ${secretId} and org_id = ${orgId} and status = 'active'
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
