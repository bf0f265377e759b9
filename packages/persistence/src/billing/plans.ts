/**
 * The plans migration 0015 seeds (metering-billing.md §6), kept here so the memory repositories start from the same
 * rows. `free` exists since migration 0008; 0015 gives it its billing fields and adds `team` and `business`.
 * A plan's `metadata.providerProductId` maps the provider's product to it; `metadata.purchasable` says whether a
 * checkout may buy it.
 */
import type { EntitlementRow } from "../entitlements/EntitlementsRepo.ts"

export interface PlanSeed {
  readonly code: string
  /** The plan's public UUIDv7, fixed so every database names a plan alike. */
  readonly publicId: string
  readonly name: string
  readonly description: string
  readonly priceAmountCents: number
  readonly metadata: { readonly purchasable: boolean; readonly providerProductId?: string }
  readonly entitlements: ReadonlyArray<Pick<EntitlementRow, "entitlementKey" | "valueType" | "enabled" | "limitValue">>
}

const entitlementsOf = (limit: number): PlanSeed["entitlements"] => [
  { entitlementKey: "limit.projects", valueType: "quantity", enabled: true, limitValue: limit },
  { entitlementKey: "limit.repo_links", valueType: "quantity", enabled: true, limitValue: limit },
  { entitlementKey: "feature.integrations.scmhost", valueType: "boolean", enabled: true, limitValue: null }
]

export const planSeeds: ReadonlyArray<PlanSeed> = [
  {
    code: "free",
    publicId: "01930000-0000-7000-8000-000000000001",
    name: "Free",
    description: "For trying things out",
    priceAmountCents: 0,
    metadata: { purchasable: false },
    entitlements: entitlementsOf(5)
  },
  {
    code: "team",
    publicId: "01930000-0000-7000-8000-000000000002",
    name: "Team",
    description: "For teams shipping together",
    priceAmountCents: 2900,
    metadata: { purchasable: true, providerProductId: "prod_team" },
    entitlements: entitlementsOf(50)
  },
  {
    code: "business",
    publicId: "01930000-0000-7000-8000-000000000003",
    name: "Business",
    description: "For organizations at scale",
    priceAmountCents: 9900,
    metadata: { purchasable: true, providerProductId: "prod_business" },
    entitlements: entitlementsOf(500)
  }
]
