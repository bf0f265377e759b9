/**
 * The one reader of entitlements (spec: Limits, "Entitlements that limit operations"). Values come from the database
 * (the workspace's plan, `free` by default, seeded by migration 0008), so billing changes data, not code.
 */
import type { OrgId } from "@cp/domain"
import { type EntitlementRow, EntitlementsRepo } from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"

export class Entitlements extends Context.Service<Entitlements, {
  /** Every entitlement of the workspace's plan. */
  readonly list: (orgId: OrgId) => Effect.Effect<ReadonlyArray<EntitlementRow>>
  /**
   * The ceiling of a quantity entitlement: Some(n) when the plan bounds it, Some(0) when the plan disables it or
   * does not list it (deny by default), None when it is enabled without a ceiling.
   */
  readonly limitOf: (orgId: OrgId, key: string) => Effect.Effect<Option.Option<number>>
  /** Whether a feature entitlement is enabled (absent: disabled). */
  readonly isEnabled: (orgId: OrgId, key: string) => Effect.Effect<boolean>
}>()("@cp/server/Entitlements") {
  static readonly layer = Layer.effect(
    Entitlements,
    Effect.gen(function*() {
      const repo = yield* EntitlementsRepo
      const find = (orgId: OrgId, key: string) =>
        Effect.map(repo.forWorkspace(orgId), (rows) => rows.find((row) => row.entitlementKey === key))
      return Entitlements.of({
        list: Effect.fn("Entitlements.list")((orgId: OrgId) => repo.forWorkspace(orgId)),
        limitOf: Effect.fn("Entitlements.limitOf")(function*(orgId: OrgId, key: string) {
          const row = yield* find(orgId, key)
          if (row === undefined || !row.enabled) return Option.some(0)
          return row.limitValue === null ? Option.none() : Option.some(Number(row.limitValue))
        }),
        isEnabled: Effect.fn("Entitlements.isEnabled")(function*(orgId: OrgId, key: string) {
          const row = yield* find(orgId, key)
          return row !== undefined && row.enabled
        })
      })
    })
  )
}
