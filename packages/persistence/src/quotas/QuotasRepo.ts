/** Quotas: one per (workspace, metric, period, scope); a second is a `UniqueViolation` on `quotas_scope_key`. */
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { PlanQuota, PlanQuotaEntry, QuotaChange, QuotaKey, QuotaRow, QuotasOfMetric, QuotasPage } from "./rows.ts"

export const quotasScopeConstraint = "quotas_scope_key"

const uniques: ReadonlyArray<UniqueKey<QuotaRow>> = [
  primaryKey("quotas_pkey"),
  {
    constraint: quotasScopeConstraint,
    key: (row) => compositeKey(row.orgId, row.metric, row.period, row.projectId, row.environmentId)
  }
]

const DeletedRow = Schema.Struct({ id: Schema.String })

export class QuotasRepo extends Context.Service<QuotasRepo, {
  /** `UniqueViolation` on `quotas_scope_key` when the scope already has a quota of that metric and period. */
  readonly insert: (row: QuotaRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (key: QuotaKey) => Effect.Effect<Option.Option<QuotaRow>>
  /** Up to `limit` of the workspace's quotas strictly after `after`, newest first. */
  readonly list: (page: QuotasPage) => Effect.Effect<ReadonlyArray<QuotaRow>>
  /** Every quota of the workspace on the metric, at any scope. */
  readonly ofMetric: (query: QuotasOfMetric) => Effect.Effect<ReadonlyArray<QuotaRow>>
  /** The changed quota, or None when the workspace has no such quota. */
  readonly update: (change: QuotaChange) => Effect.Effect<Option.Option<QuotaRow>>
  /** Whether a quota was deleted. */
  readonly delete: (key: QuotaKey) => Effect.Effect<boolean>
  /**
   * The `quota.<metric>` entitlements of the workspace's plan (`metadata.period` default `billing_cycle`,
   * `metadata.enforcement` default `hard`). Memory holds every workspace on one plan, as `EntitlementsRepo.memory`.
   */
  readonly planQuotas: (orgId: OrgId) => Effect.Effect<ReadonlyArray<PlanQuota>>
  /** Sets a plan's `quota.<metric>` entitlement (billing, tests). */
  readonly setPlanQuota: (entry: PlanQuotaEntry) => Effect.Effect<void>
}>()("@cp/persistence/quotas/QuotasRepo") {
  static readonly memory = Layer.sync(QuotasRepo, () => {
    const quotas = new Map<string, QuotaRow>()
    const plan = new Map<string, PlanQuota>()
    const quotaIn = ({ orgId, quotaId }: QuotaKey) =>
      Option.filter(Option.fromUndefinedOr(quotas.get(quotaId)), (row) => row.orgId === orgId)
    return QuotasRepo.of({
      insert: (row) => insertUnique(quotas, row.id, row, uniques),
      findById: (key) => Effect.sync(() => quotaIn(key)),
      list: (page) =>
        Effect.sync(() =>
          windowOf(Array.from(quotas.values()).filter((row) => row.orgId === page.orgId), idPosition, page)
        ),
      ofMetric: ({ metric, orgId }) =>
        Effect.sync(() => Array.from(quotas.values()).filter((row) => row.orgId === orgId && row.metric === metric)),
      update: (change) =>
        updateRow(quotas, change.quotaId, (row) =>
          row.orgId !== change.orgId ? Option.none() : Option.some({
            ...row,
            limit: change.limit ?? row.limit,
            enforcement: change.enforcement ?? row.enforcement,
            updatedAt: change.at
          })),
      delete: (key) =>
        atomically((changes) => {
          if (Option.isNone(quotaIn(key))) return Effect.succeed(false)
          changes.delete(quotas, key.quotaId)
          return Effect.succeed(true)
        }),
      planQuotas: () => Effect.sync(() => Array.from(plan.values())),
      setPlanQuota: ({ at: _at, planId: _planId, ...quota }) => Effect.sync(() => void plan.set(quota.metric, quota))
    })
  })

  static readonly sql = Layer.effect(
    QuotasRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return QuotasRepo.of({
        insert: insertRow(sql, "quotas", QuotaRow),
        findById: flow(
          SqlSchema.findOneOption({
            Request: QuotaKey,
            Result: QuotaRow,
            execute: ({ orgId, quotaId }) => sql`select * from quotas where id = ${quotaId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: QuotasPage,
            Result: QuotaRow,
            execute: ({ orgId, ...window }) =>
              keysetQuery(sql, sql`select * from quotas`, [sql`org_id = ${orgId}`], window)
          }),
          Effect.orDie
        ),
        ofMetric: flow(
          SqlSchema.findAll({
            Request: QuotasOfMetric,
            Result: QuotaRow,
            execute: ({ metric, orgId }) => sql`select * from quotas where org_id = ${orgId} and metric = ${metric}`
          }),
          Effect.orDie
        ),
        update: flow(
          SqlSchema.findOneOption({
            Request: QuotaChange,
            Result: QuotaRow,
            execute: ({ at, enforcement, limit, orgId, quotaId }) =>
              sql`
                update quotas set
                  "limit" = coalesce(${limit ?? null}::double precision, "limit"),
                  enforcement = coalesce(${enforcement ?? null}::text, enforcement),
                  updated_at = ${at}
                where id = ${quotaId} and org_id = ${orgId}
                returning *`
          }),
          Effect.orDie
        ),
        delete: flow(
          SqlSchema.findAll({
            Request: QuotaKey,
            Result: DeletedRow,
            execute: ({ orgId, quotaId }) =>
              sql`delete from quotas where id = ${quotaId} and org_id = ${orgId} returning id`
          }),
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        ),
        planQuotas: flow(
          SqlSchema.findAll({
            Request: OrgId,
            Result: PlanQuota,
            execute: (orgId) =>
              sql`
                select substr(entitlement_key, 7) as metric, limit_value::float8 as limit,
                  case when metadata->>'period' in ('hour', 'day', 'month', 'billing_cycle')
                    then metadata->>'period' else 'billing_cycle' end as period,
                  case when metadata->>'enforcement' in ('soft', 'hard')
                    then metadata->>'enforcement' else 'hard' end as enforcement
                from plan_entitlements
                where plan_id = coalesce((select plan_id from workspace_plans where org_id = ${orgId}), 'free')
                  and entitlement_key like 'quota.%' and enabled and limit_value is not null`
          }),
          Effect.orDie
        ),
        setPlanQuota: flow(
          SqlSchema.void({
            Request: PlanQuotaEntry,
            execute: ({ at, enforcement, limit, metric, period, planId }) =>
              sql`
                insert into plan_entitlements
                  (plan_id, entitlement_key, value_type, enabled, limit_value, metadata, created_at, updated_at)
                values (${planId}, ${`quota.${metric}`}, 'quantity', true, ${limit},
                  ${JSON.stringify({ period, enforcement })}::jsonb, ${at}, ${at})
                on conflict (plan_id, entitlement_key) do update
                  set limit_value = excluded.limit_value, metadata = excluded.metadata, enabled = true,
                      updated_at = excluded.updated_at`
          }),
          Effect.orDie
        )
      })
    })
  )
}
