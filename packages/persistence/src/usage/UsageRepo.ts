/**
 * Usage records and their rollups. `ingest` stores a batch in one statement that skips keys the workspace already
 * holds (`on conflict do nothing`, so concurrent replicas store a key once) and adds exactly the stored records'
 * per-hour sums to the pending rollups in the same statement: plain inserts, so concurrent ingests never wait for one
 * another on a shared rollup row. `rollUp` (the roll-up fiber of every replica) folds claimed pending sums into the
 * hourly and daily rollups the summary reads; quota usage reads rollups and pending sums in one statement, so it is
 * exact whether or not a record has been folded yet.
 */
import { RollupId } from "@cp/domain/ids"
import { type BucketType } from "@cp/domain/metering"
import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Context, Effect, flow, Layer, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { randomUUID } from "node:crypto"
import { atomically, type Changes } from "../Memory.ts"
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
const FoldedRow = Schema.Struct({ folded: Schema.Number })

/** The memory twin of a `usage_rollup_pending` row: one ingest's sum for one scope, metric and UTC hour. */
interface PendingSum {
  readonly orgId: UsageRecordRow["orgId"]
  readonly projectId: UsageRecordRow["projectId"]
  readonly environmentId: UsageRecordRow["environmentId"]
  readonly metric: string
  readonly hourStart: Date
  readonly quantity: number
  readonly recordCount: number
  readonly createdAt: Date
}

const scopeKeyOf = (row: Omit<PendingSum, "hourStart" | "quantity" | "recordCount" | "createdAt">) =>
  [row.orgId, row.projectId, row.environmentId, row.metric] as const
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
  /**
   * Folds up to `limit` pending sums (the oldest unclaimed ones; those another replica is folding are skipped) into
   * their hourly and daily rollups, atomically; answers how many it folded (fewer than `limit`: none is left).
   */
  readonly rollUp: (limit: number) => Effect.Effect<number>
  /** The rollups a summary shows (records ingested since the last `rollUp` are not in them yet). */
  readonly rollups: (query: RollupQuery) => Effect.Effect<ReadonlyArray<RollupRow>>
  /**
   * The summed quantity of a scope's records in a window on hour boundaries: the hourly rollups plus the sums still
   * pending, read in one statement, so every stored record counts exactly once.
   */
  readonly usedInWindow: (window: UsageInWindow) => Effect.Effect<number>
}>()("@cp/persistence/usage/UsageRepo") {
  static readonly memory = Layer.sync(UsageRepo, () => {
    const records = new Map<string, UsageRecordRow>()
    const byKey = new Map<string, string>()
    const pending = new Map<number, PendingSum>()
    const rollups = new Map<string, RollupRow>()
    let nextPending = 1
    /** Adds one pending sum to its `bucketType` rollup. */
    const fold = (changes: Changes, sum: PendingSum, bucketType: BucketType) => {
      const bucketStart = bucketStartOf(bucketType, sum.hourStart)
      const rollupKey = compositeKey(...scopeKeyOf(sum), bucketType, bucketStart.toISOString())
      const current = rollups.get(rollupKey)
      changes.set(
        rollups,
        rollupKey,
        current === undefined
          ? {
            id: RollupId.make(randomUUID()),
            orgId: sum.orgId,
            projectId: sum.projectId,
            environmentId: sum.environmentId,
            metric: sum.metric,
            bucketType,
            bucketStart,
            quantity: sum.quantity,
            recordCount: sum.recordCount,
            createdAt: sum.createdAt,
            updatedAt: sum.createdAt
          }
          : {
            ...current,
            quantity: current.quantity + sum.quantity,
            recordCount: current.recordCount + sum.recordCount,
            updatedAt: sum.createdAt > current.updatedAt ? sum.createdAt : current.updatedAt
          }
      )
    }
    return UsageRepo.of({
      ingest: ({ at, records: batch }) =>
        atomically((changes) => {
          const stored: Array<UsageRecordRow> = []
          const sums = new Map<string, PendingSum>()
          for (const row of batch) {
            const key = compositeKey(row.orgId, row.idempotencyKey)
            if (byKey.has(key)) continue
            changes.set(byKey, key, row.id)
            changes.set(records, row.id, row)
            stored.push(row)
            const hourStart = bucketStartOf("hour", row.recordedAt)
            const sumKey = compositeKey(...scopeKeyOf(row), hourStart.toISOString())
            const sum = sums.get(sumKey)
            sums.set(sumKey, {
              orgId: row.orgId,
              projectId: row.projectId,
              environmentId: row.environmentId,
              metric: row.metric,
              hourStart,
              quantity: (sum?.quantity ?? 0) + row.quantity,
              recordCount: (sum?.recordCount ?? 0) + 1,
              createdAt: at
            })
          }
          for (const sum of sums.values()) changes.set(pending, nextPending++, sum)
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
      rollUp: (limit) =>
        atomically((changes) => {
          const claimed = Array.from(pending.entries()).slice(0, limit)
          for (const [id, sum] of claimed) {
            changes.delete(pending, id)
            fold(changes, sum, "hour")
            fold(changes, sum, "day")
          }
          return Effect.succeed(claimed.length)
        }),
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
        Effect.sync(() => {
          const counts = (row: { readonly orgId: string; readonly metric: string } & Parameters<typeof inScope>[1]) =>
            row.orgId === window.orgId && row.metric === window.metric && inScope(window, row)
          const inWindow = (start: Date) => start >= window.start && start < window.end
          const folded = Array.from(rollups.values()).filter((row) =>
            row.bucketType === "hour" && inWindow(row.bucketStart) && counts(row)
          )
          const unfolded = Array.from(pending.values()).filter((sum) => inWindow(sum.hourStart) && counts(sum))
          return [...folded, ...unfolded].reduce((total, row) => total + row.quantity, 0)
        })
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
      /**
       * Adds the `claimed` CTE's pending sums to their `bucketType` rollups, one row per bucket, in one lock order
       * (replicas folding at once wait for each other on a shared rollup row, never deadlock).
       */
      const foldInto = (bucketType: BucketType) => {
        const unit = sql.literal(bucketType === "hour" ? "'hour'" : "'day'")
        return sql`
          insert into usage_rollups
            (org_id, project_id, environment_id, metric, bucket_type, bucket_start, quantity, record_count,
             created_at, updated_at)
          select org_id, project_id, environment_id, metric, ${unit}, date_trunc(${unit}, hour_start, 'UTC'),
            sum(quantity), sum(record_count), min(created_at), max(created_at)
          from claimed
          group by 1, 2, 3, 4, 6
          order by 1, 4, 6, 2, 3
          on conflict on constraint usage_rollups_bucket_key do update
            set quantity = usage_rollups.quantity + excluded.quantity,
                record_count = usage_rollups.record_count + excluded.record_count,
                updated_at = greatest(usage_rollups.updated_at, excluded.updated_at)`
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
          pending as (
            insert into usage_rollup_pending
              (org_id, project_id, environment_id, metric, hour_start, quantity, record_count, created_at)
            select org_id, project_id, environment_id, metric, date_trunc('hour', recorded_at, 'UTC'),
              sum(quantity), count(*), ${at}::timestamptz
            from stored
            group by 1, 2, 3, 4, 5
          )
          select id from stored`.pipe(
          Effect.flatMap(decodeIds),
          Effect.map((stored) => {
            const ids = new Set(stored.map((row) => row.id))
            return records.filter((row) => ids.has(row.id))
          }),
          Effect.orDie
        )
      }
      /** The conditions of a scope's rows of one metric in a window, on `usage_rollups` or `usage_rollup_pending`. */
      const scopeIn = (window: typeof UsageInWindow.Encoded, startColumn: string) =>
        sql.and([
          sql`org_id = ${window.orgId}`,
          sql`metric = ${window.metric}`,
          sql`${sql(startColumn)} >= ${window.start}`,
          sql`${sql(startColumn)} < ${window.end}`,
          ...(window.projectId === null ? [] : [sql`project_id = ${window.projectId}`]),
          ...(window.environmentId === null ? [] : [sql`environment_id = ${window.environmentId}`])
        ])
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
        rollUp: flow(
          SqlSchema.findOne({
            Request: Schema.Number,
            Result: FoldedRow,
            execute: (limit) =>
              sql`
                with claimed as (
                  delete from usage_rollup_pending
                  where id in (
                    select id from usage_rollup_pending order by id limit ${limit} for update skip locked
                  )
                  returning org_id, project_id, environment_id, metric, hour_start, quantity, record_count, created_at
                ),
                hourly as (${foldInto("hour")}),
                daily as (${foldInto("day")})
                select count(*)::int as folded from claimed`
          }),
          Effect.map((row) => row.folded),
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
            // One statement, one snapshot: a sum a replica folds meanwhile counts in one table or the other.
            execute: (window) =>
              sql`
                select (
                  coalesce((select sum(quantity) from usage_rollups
                    where bucket_type = 'hour' and ${scopeIn(window, "bucket_start")}), 0) +
                  coalesce((select sum(quantity) from usage_rollup_pending where ${scopeIn(window, "hour_start")}), 0)
                )::float8 as used`
          }),
          Effect.map((row) => row.used),
          Effect.orDie
        )
      })
    })
  )
}
