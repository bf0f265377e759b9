/**
 * The entitlements a workspace holds: those of its plan (`workspace_plans`, else `free`), stored as data seeded by
 * migration 0008 so a plan change is a row change.
 */
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Schema, Struct } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"

export const EntitlementRow = Schema.Struct({
  planId: Schema.String,
  entitlementKey: Schema.String,
  valueType: Schema.Literals(["quantity", "boolean"]),
  enabled: Schema.Boolean,
  /** The ceiling of a `quantity` entitlement; null for a boolean one (or no ceiling). */
  limitValue: Schema.NullOr(Schema.Number),
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type EntitlementRow = typeof EntitlementRow.Type

/** The default plan every workspace is on until billing assigns another. */
export const DEFAULT_PLAN_ID = "free"

/** The free plan as migration 0008 seeds it; the memory repository starts from the same rows. */
export const freePlanSeed: ReadonlyArray<
  Pick<EntitlementRow, "entitlementKey" | "valueType" | "enabled" | "limitValue">
> = [
  { entitlementKey: "limit.projects", valueType: "quantity", enabled: true, limitValue: 5 },
  { entitlementKey: "limit.repo_links", valueType: "quantity", enabled: true, limitValue: 5 },
  { entitlementKey: "feature.integrations.scmhost", valueType: "boolean", enabled: true, limitValue: null }
]

/** One entitlement of a plan as billing (or a test) sets it, at `at`. */
export const PlanEntitlement = Schema.Struct({
  ...Struct.omit(EntitlementRow.fields, ["createdAt", "updatedAt"]),
  at: Schema.Date
})
export type PlanEntitlement = typeof PlanEntitlement.Type

export class EntitlementsRepo extends Context.Service<EntitlementsRepo, {
  /** Every entitlement of the workspace's plan. */
  readonly forWorkspace: (orgId: OrgId) => Effect.Effect<ReadonlyArray<EntitlementRow>>
  /** Sets one entitlement of a plan; creates it when absent. */
  readonly setPlanEntitlement: (entry: PlanEntitlement) => Effect.Effect<void>
}>()("@cp/persistence/entitlements/EntitlementsRepo") {
  static readonly memory = Layer.sync(EntitlementsRepo, () => {
    const epoch = new Date(0)
    const plans = new Map<string, Map<string, EntitlementRow>>([[
      DEFAULT_PLAN_ID,
      new Map(
        freePlanSeed.map((
          entry
        ) => [entry.entitlementKey, { ...entry, planId: DEFAULT_PLAN_ID, createdAt: epoch, updatedAt: epoch }])
      )
    ]])
    return EntitlementsRepo.of({
      forWorkspace: (_orgId) => Effect.sync(() => Array.from(plans.get(DEFAULT_PLAN_ID)?.values() ?? [])),
      setPlanEntitlement: ({ at, ...entry }) =>
        Effect.sync(() => {
          const plan = plans.get(entry.planId) ?? new Map<string, EntitlementRow>()
          plans.set(entry.planId, plan)
          const current = plan.get(entry.entitlementKey)
          plan.set(entry.entitlementKey, { ...entry, createdAt: current?.createdAt ?? at, updatedAt: at })
        })
    })
  })

  static readonly sql = Layer.effect(
    EntitlementsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return EntitlementsRepo.of({
        forWorkspace: flow(
          SqlSchema.findAll({
            Request: OrgId,
            Result: EntitlementRow,
            execute: (orgId) =>
              sql`
                select * from plan_entitlements
                where plan_id = coalesce(
                  (select plan_id from workspace_plans where org_id = ${orgId}), ${DEFAULT_PLAN_ID})
                order by entitlement_key`
          }),
          Effect.orDie
        ),
        setPlanEntitlement: flow(
          SqlSchema.void({
            Request: PlanEntitlement,
            execute: ({ at, ...entry }) =>
              sql`
                insert into plan_entitlements ${sql.insert({ ...entry, createdAt: at, updatedAt: at })}
                on conflict (plan_id, entitlement_key) do update
                  set value_type = excluded.value_type, enabled = excluded.enabled,
                      limit_value = excluded.limit_value, updated_at = excluded.updated_at`
          }),
          Effect.orDie
        )
      })
    })
  )
}
