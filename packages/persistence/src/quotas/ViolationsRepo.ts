/**
 * Quota violations: one per (workspace, quota, period start), created when usage first reaches the limit and updated
 * (never duplicated) as it grows; `created` tells the one caller that made it, so its event is emitted once.
 */
import { Context, Effect, flow, Layer, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey } from "../memoryTable.ts"
import { type RecordedViolation, ViolationRow, ViolationsPage } from "./rows.ts"

const UpsertedRow = Schema.Struct({ ...ViolationRow.fields, created: Schema.Boolean })

export class ViolationsRepo extends Context.Service<ViolationsRepo, {
  /**
   * Creates the violation of `row`'s (quota, period start), or raises the stored one's `used` (never lowers it) and
   * takes `row`'s resource, limit and time; answers the stored row and whether this call created it.
   */
  readonly record: (row: ViolationRow) => Effect.Effect<RecordedViolation>
  /** Up to `limit` violations strictly after `after`, newest first, matching every non-null filter. */
  readonly list: (page: ViolationsPage) => Effect.Effect<ReadonlyArray<ViolationRow>>
}>()("@cp/persistence/quotas/ViolationsRepo") {
  static readonly memory = Layer.sync(ViolationsRepo, () => {
    const violations = new Map<string, ViolationRow>()
    return ViolationsRepo.of({
      record: (row) =>
        atomically((changes) => {
          const key = compositeKey(row.orgId, row.quotaKey, row.periodStart.toISOString())
          const current = violations.get(key)
          const violation = current === undefined ? row : {
            ...current,
            used: Math.max(current.used, row.used),
            limit: row.limit,
            resourceId: row.resourceId,
            updatedAt: row.updatedAt
          }
          changes.set(violations, key, violation)
          return Effect.succeed({ violation, created: current === undefined })
        }),
      list: (page) =>
        Effect.sync(() =>
          windowOf(
            Array.from(violations.values()).filter((row) =>
              row.orgId === page.orgId && (page.metric === null || row.metric === page.metric) &&
              (page.projectId === null || row.projectId === page.projectId) &&
              (page.environmentId === null || row.environmentId === page.environmentId) &&
              (page.resourceId === null || row.resourceId === page.resourceId)
            ),
            idPosition,
            page
          )
        )
    })
  })

  static readonly sql = Layer.effect(
    ViolationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return ViolationsRepo.of({
        record: flow(
          SqlSchema.findOne({
            Request: ViolationRow,
            Result: UpsertedRow,
            execute: (row) =>
              sql`
                insert into quota_violations ${sql.insert(row)}
                on conflict (org_id, quota_key, period_start) do update
                  set used = greatest(quota_violations.used, excluded.used), "limit" = excluded."limit",
                      resource_id = excluded.resource_id, updated_at = excluded.updated_at
                returning *, (xmax = 0) as created`
          }),
          Effect.map(({ created, ...violation }) => ({ violation, created })),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: ViolationsPage,
            Result: ViolationRow,
            execute: ({ after, environmentId, limit, metric, orgId, projectId, resourceId }) =>
              keysetQuery(sql, sql`select * from quota_violations`, [
                sql`org_id = ${orgId}`,
                ...(metric === null ? [] : [sql`metric = ${metric}`]),
                ...(projectId === null ? [] : [sql`project_id = ${projectId}`]),
                ...(environmentId === null ? [] : [sql`environment_id = ${environmentId}`]),
                ...(resourceId === null ? [] : [sql`resource_id = ${resourceId}`])
              ], { after, limit })
          }),
          Effect.orDie
        )
      })
    })
  )
}
