/**
 * The entitlements a workspace holds: those of its plan (`workspace_plans`, else `free`), stored as data seeded by
 * migration 0008 so a plan change is a row change.
 */
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema, Struct } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { planSeeds } from "../billing/plans.ts"
import { atomically } from "../Memory.ts"

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

/** One entitlement of a plan as billing (or a test) sets it, at `at`. */
export const PlanEntitlement = Schema.Struct({
  ...Struct.omit(EntitlementRow.fields, ["createdAt", "updatedAt"]),
  at: Schema.Date
})
export type PlanEntitlement = typeof PlanEntitlement.Type

/** The plan billing assigned to a workspace, and the subscription that conferred it (null: none). */
export const PlanAssignment = Schema.Struct({
  orgId: OrgId,
  planId: Schema.String,
  subscriptionId: Schema.NullOr(Schema.String),
  updatedAt: Schema.Date
})
export type PlanAssignment = typeof PlanAssignment.Type

export class EntitlementsRepo extends Context.Service<EntitlementsRepo, {
  /** Every entitlement of the workspace's plan. */
  readonly forWorkspace: (orgId: OrgId) => Effect.Effect<ReadonlyArray<EntitlementRow>>
  /** Sets one entitlement of a plan; creates it when absent. */
  readonly setPlanEntitlement: (entry: PlanEntitlement) => Effect.Effect<void>
  /** Puts the workspace on a plan (billing): every reader of its entitlements sees the new plan's at once. */
  readonly assignPlan: (assignment: PlanAssignment) => Effect.Effect<void>
  /** The workspace's assignment; None while it is on the default plan by default. */
  readonly assignmentOf: (orgId: OrgId) => Effect.Effect<Option.Option<PlanAssignment>>
}>()("@cp/persistence/entitlements/EntitlementsRepo") {
  static readonly memory = Layer.sync(EntitlementsRepo, () => {
    const epoch = new Date(0)
    const plans = new Map<string, Map<string, EntitlementRow>>(
      planSeeds.map((plan) => [
        plan.code,
        new Map(
          plan.entitlements.map((
            entry
          ) => [entry.entitlementKey, { ...entry, planId: plan.code, createdAt: epoch, updatedAt: epoch }])
        )
      ])
    )
    const assignments = new Map<string, PlanAssignment>()
    return EntitlementsRepo.of({
      forWorkspace: (orgId) =>
        Effect.sync(() => Array.from(plans.get(assignments.get(orgId)?.planId ?? DEFAULT_PLAN_ID)?.values() ?? [])),
      assignPlan: (assignment) =>
        atomically((changes) => {
          changes.set(assignments, assignment.orgId, assignment)
          return Effect.void
        }),
      assignmentOf: (orgId) => Effect.sync(() => Option.fromUndefinedOr(assignments.get(orgId))),
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
        assignPlan: flow(
          SqlSchema.void({
            Request: PlanAssignment,
            execute: (assignment) =>
              sql`
                insert into workspace_plans ${sql.insert(assignment)}
                on conflict (org_id) do update set plan_id = excluded.plan_id,
                  subscription_id = excluded.subscription_id, updated_at = excluded.updated_at`
          }),
          Effect.orDie
        ),
        assignmentOf: flow(
          SqlSchema.findOneOption({
            Request: OrgId,
            Result: PlanAssignment,
            execute: (orgId) => sql`select * from workspace_plans where org_id = ${orgId}`
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
