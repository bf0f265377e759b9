/** Billing rows the sweep tests seed: a workspace's customer at the provider, as checkout would have stored it. */
import type { OrgId } from "@cp/domain"
import type { CustomerRow } from "@cp/persistence"
import { mint } from "../../src/platform/ids.ts"

/** The provider customer `cus_<orgId>` of `orgId`, created at `now`. */
export const billedCustomer = (orgId: OrgId, now: Date): CustomerRow => ({
  id: mint.billingCustomer(now.getTime()),
  orgId,
  displayName: "Billed",
  email: "billed@example.com",
  status: "active",
  provider: "billprov",
  providerCustomerId: `cus_${orgId}`,
  metadata: {},
  createdAt: now,
  updatedAt: now
})
