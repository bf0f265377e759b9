/**
 * Usage records and their rollups. `ingest` stores a batch in one statement that skips keys the workspace already
 * holds (`on conflict do nothing`, so concurrent replicas store a key once) and adds exactly the stored records to
 * their hourly and daily rollups in the same statement: a summary read after the answer already reflects them.
 */
import { RollupId } from "@cp/domain/ids"
import { type BucketType } from "@cp/domain/metering"
import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Context, Effect, flow, Layer, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { randomUUID } from "node:crypto"
import { atomically } from "../Memory.ts"
import { compositeKey } from "../memoryTable.ts"
import {
  RollupQuery,
  RollupRow,
  UsageIngest,
  UsageInWindow,
  UsageKeys,
  type UsageRecordRow,
  UsageRecordRow as UsageRecordRowSchema
} from "./rows.ts"

const HOUR_MS = 60 * 60 * 1000
const DAY_MS = 24 * HOUR_MS

/** The UTC start of the `bucketType` bucket holding `at`. */
export const bucketStartOf = (bucketType: BucketType, at: Date): Date => {
  const size = bucketType === "hour" ? HOUR_MS : DAY_MS
  return new Date(Math.floor(at.getTime() / size) * size)
}

const SumRow = Schema.Struct({ used: Schema.Number })
const IdRow = Schema.Struct({ id: Schema.String })

/** Whether a row of a scope belongs to the asked scope: every row of the workspace, of the project, or of the env. */
const inScope = (
  scope: { readonly projectId: string | null; readonly environmentId: string | null },
  row: { readonly projectId: string | null; readonly environmentId: string | null }
) =>
  (scope.projectId === null || row.projectId === scope.projectId) &&
  (scope.environmentId === null || row.environmentId === scope.environmentId)

const nullsFirst = (a: string | null, b: string | null) =>
  a === b ? 0 : a === null ? -1 : b === null ? 1 : a < b ? -1 : 1

export class UsageRepo extends Context.Service<UsageRepo, {
  /**
   * Stores the records whose key the workspace does not hold yet, in one statement, and adds them to their rollups;
   * answers the stored ones (a record missing from the answer lost its key to an earlier or concurrent one).
   */
  readonly ingest: (batch: UsageIngest) => Effect.Effect<ReadonlyArray<UsageRecordRow>>
  /** The workspace's stored records holding any of these keys. */
  readonly findByKeys: (keys: UsageKeys) => Effect.Effect<ReadonlyArray<UsageRecordRow>>
  /** The rollups a summary shows. */
  readonly rollups: (query: RollupQuery) => Effect.Effect<ReadonlyArray<RollupRow>>
  /** The summed quantity of a scope's records in a window on hour boundaries (from the hourly rollups). */
  readonly usedInWindow: (window: UsageInWindow) => Effect.Effect<number>
}>()("@cp/persistence/usage/UsageRepo") {
  static readonly memory = Layer.sync(UsageRepo, () => {
    const records = new Map<string, UsageRecordRow>()
    const byKey = new Map<string, string>()
    const rollups = new Map<string, RollupRow>()
    return UsageRepo.of({
      ingest: ({ at, records: batch }) =>
        atomically((changes) => {
          const stored: Array<UsageRecordRow> = []
          for (const row of batch) {
            const key = compositeKey(row.orgId, row.idempotencyKey)
            if (byKey.has(key)) continue
            changes.set(byKey, key, row.id)
            changes.set(records, row.id, row)
            stored.push(row)
            for (const bucketType of ["hour", "day"] as const) {
              const bucketStart = bucketStartOf(bucketType, row.recordedAt)
              const rollupKey = compositeKey(
                row.orgId,
                row.projectId,
                row.environmentId,
                row.metric,
                bucketType,
                bucketStart.toISOString()
              )
              const current = rollups.get(rollupKey)
              changes.set(
                rollups,
                rollupKey,
                current === undefined
                  ? {
                    id: RollupId.make(randomUUID()),
                    orgId: row.orgId,
                    projectId: row.projectId,
                    environmentId: row.environmentId,
                    metric: row.metric,
                    bucketType,
                    bucketStart,
                    quantity: row.quantity,
                    recordCount: 1,
                    createdAt: at,
                    updatedAt: at
                  }
                  : {
                    ...current,
                    quantity: current.quantity + row.quantity,
                    recordCount: current.recordCount + 1,
                    updatedAt: at
                  }
              )
            }
          }
          return Effect.succeed(stored)
        }),
      findByKeys: ({ orgId, keys }) =>
        Effect.sync(() =>
          keys.flatMap((key) => {
            const id = byKey.get(compositeKey(orgId, key))
            const row = id === undefined ? undefined : records.get(id)
            return row === undefined ? [] : [row]
          })
        ),
      rollups: (query) =>
        Effect.sync(() =>
          Array.from(rollups.values()).filter((row) =>
            row.orgId === query.orgId && row.metric === query.metric && row.bucketType === query.bucketType &&
            row.bucketStart >= query.start && row.bucketStart < query.end &&
            (query.projectId === null || row.projectId === query.projectId) &&
            (query.environmentId === null || row.environmentId === query.environmentId)
          ).sort((a, b) =>
            a.bucketStart.getTime() - b.bucketStart.getTime() || nullsFirst(a.projectId, b.projectId) ||
            nullsFirst(a.environmentId, b.environmentId)
          )
        ),
      usedInWindow: (window) =>
        Effect.sync(() =>
          Array.from(rollups.values()).filter((row) =>
            row.orgId === window.orgId && row.metric === window.metric && row.bucketType === "hour" &&
            row.bucketStart >= window.start && row.bucketStart < window.end && inScope(window, row)
          ).reduce((sum, row) => sum + row.quantity, 0)
        )
    })
  })

  static readonly sql = Layer.effect(
    UsageRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      // bigint and numeric columns read as float8: JSON numbers, exact up to 2^53 − 1.
      const recordColumns = sql.literal(
        "id, org_id, project_id, environment_id, resource_id, metric, quantity::float8 as quantity, " +
          "idempotency_key, recorded_at, metadata, created_at"
      )
      const rollupColumns = sql.literal(
        "id, org_id, project_id, environment_id, metric, bucket_type, bucket_start, quantity::float8 as quantity, " +
          "record_count::float8 as record_count, created_at, updated_at"
      )
      /** Adds the `stored` CTE's records to their `bucketType` rollups, one row per bucket, in a stable lock order. */
      const rollUp = (bucketType: BucketType, at: Date) => {
        const unit = sql.literal(bucketType === "hour" ? "'hour'" : "'day'")
        return sql`
          insert into usage_rollups
            (org_id, project_id, environment_id, metric, bucket_type, bucket_start, quantity, record_count,
             created_at, updated_at)
          select org_id, project_id, environment_id, metric, ${unit},
            date_trunc(${unit}, recorded_at, 'UTC'), sum(quantity), count(*), ${at}::timestamptz, ${at}::timestamptz
          from stored
          group by 1, 2, 3, 4, 6
          order by 1, 4, 6, 2, 3
          on conflict on constraint usage_rollups_bucket_key do update
            set quantity = usage_rollups.quantity + excluded.quantity,
                record_count = usage_rollups.record_count + excluded.record_count,
                updated_at = excluded.updated_at`
      }
      const decodeIds = Schema.decodeUnknownEffect(Schema.Array(IdRow))
      /** The statement answers only the stored ids: the rows themselves are the caller's, not decoded again. */
      const ingest = ({ at, records }: UsageIngest): Effect.Effect<ReadonlyArray<UsageRecordRow>> => {
        const rows: ReadonlyArray<Record<string, unknown>> = records.map((row) => ({
          ...row,
          metadata: row.metadata === null ? null : sql.json(row.metadata)
        }))
        if (!Arr.isReadonlyArrayNonEmpty(rows)) return Effect.succeed([])
        return sql`
          with stored as (
            insert into usage_records ${sql.insert(rows)}
            on conflict (org_id, idempotency_key) do nothing
            returning id, org_id, project_id, environment_id, metric, quantity, recorded_at
          ),
          hourly as (${rollUp("hour", at)}),
          daily as (${rollUp("day", at)})
          select id from stored`.pipe(
          Effect.flatMap(decodeIds),
          Effect.map((stored) => {
            const ids = new Set(stored.map((row) => row.id))
            return records.filter((row) => ids.has(row.id))
          }),
          Effect.orDie
        )
      }
      return UsageRepo.of({
        ingest,
        findByKeys: flow(
          SqlSchema.findAll({
            Request: UsageKeys,
            Result: UsageRecordRowSchema,
            execute: ({ orgId, keys }) =>
              keys.length === 0
                ? sql`select ${recordColumns} from usage_records where false`
                : sql`select ${recordColumns} from usage_records where org_id = ${orgId} and idempotency_key in ${
                  sql.in(keys)
                }`
          }),
          Effect.orDie
        ),
        rollups: flow(
          SqlSchema.findAll({
            Request: RollupQuery,
            Result: RollupRow,
            execute: (query) =>
              sql`
                select ${rollupColumns} from usage_rollups
                where ${
                sql.and([
                  sql`org_id = ${query.orgId}`,
                  sql`metric = ${query.metric}`,
                  sql`bucket_type = ${query.bucketType}`,
                  sql`bucket_start >= ${query.start}`,
                  sql`bucket_start < ${query.end}`,
                  ...(query.projectId === null ? [] : [sql`project_id = ${query.projectId}`]),
                  ...(query.environmentId === null ? [] : [sql`environment_id = ${query.environmentId}`])
                ])
              }
                order by bucket_start, project_id nulls first, environment_id nulls first`
          }),
          Effect.orDie
        ),
        usedInWindow: flow(
          SqlSchema.findOne({
            Request: UsageInWindow,
            Result: SumRow,
            execute: (window) =>
              sql`
                select coalesce(sum(quantity), 0)::float8 as used from usage_rollups
                where ${
                sql.and([
                  sql`org_id = ${window.orgId}`,
                  sql`metric = ${window.metric}`,
                  sql`bucket_type = 'hour'`,
                  sql`bucket_start >= ${window.start}`,
                  sql`bucket_start < ${window.end}`,
                  ...(window.projectId === null ? [] : [sql`project_id = ${window.projectId}`]),
                  ...(window.environmentId === null ? [] : [sql`environment_id = ${window.environmentId}`])
                ])
              }`
          }),
          Effect.map((row) => row.used),
          Effect.orDie
        )
      })
    })
  )
}
