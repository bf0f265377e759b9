/** The stored shapes of the quotas area (quotas and their violations) and its requests. */
import { EnvironmentId, OrgId, ProjectId, QuotaId } from "@cp/domain/ids"
import { Enforcement, Quota, QuotaPeriod, QuotaViolation } from "@cp/domain/quotas"
import { Schema } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/** A row of `quotas`: one per (workspace, metric, period, project, environment). */
export const QuotaRow = Schema.Struct(storedFields(Quota.fields))
export type QuotaRow = typeof QuotaRow.Type

/** One quota of one workspace. */
export const QuotaKey = Schema.Struct({ orgId: OrgId, quotaId: QuotaId })
export type QuotaKey = typeof QuotaKey.Type

/** A page of the workspace's quotas, newest first. */
export const QuotasPage = Schema.Struct({ orgId: OrgId, ...pageFields })
export type QuotasPage = typeof QuotasPage.Type

/** Every quota of the workspace on one metric, at any scope. */
export const QuotasOfMetric = Schema.Struct({ orgId: OrgId, metric: Schema.String })
export type QuotasOfMetric = typeof QuotasOfMetric.Type

/** A change of a quota's limit and enforcement (an omitted one is kept) at `at`. */
export const QuotaChange = Schema.Struct({
  ...QuotaKey.fields,
  limit: Schema.optionalKey(Schema.Number),
  enforcement: Schema.optionalKey(Enforcement),
  at: Schema.Date
})
export type QuotaChange = typeof QuotaChange.Type

/**
 * A row of `quota_violations`: one per (workspace, `quotaKey`, periodStart). `quotaKey` is the quota's id, or
 * `plan:<metric>:<period>` for a plan-entitlement quota (which has no row).
 */
export const ViolationRow = Schema.Struct({ ...storedFields(QuotaViolation.fields), quotaKey: Schema.String })
export type ViolationRow = typeof ViolationRow.Type

/** What a violation upsert answers: the row as stored, and whether this call created it. */
export interface RecordedViolation {
  readonly violation: ViolationRow
  readonly created: boolean
}

/** A page of the workspace's violations, newest first, narrowed by the filters that are not null. */
export const ViolationsPage = Schema.Struct({
  orgId: OrgId,
  metric: Schema.NullOr(Schema.String),
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  resourceId: Schema.NullOr(Schema.String),
  ...pageFields
})
export type ViolationsPage = typeof ViolationsPage.Type

/** A plan-entitlement quota `quota.<metric>` of the workspace's plan (a workspace-level quota without a row). */
export const PlanQuota = Schema.Struct({
  metric: Schema.String,
  limit: Schema.Number,
  period: QuotaPeriod,
  enforcement: Enforcement
})
export type PlanQuota = typeof PlanQuota.Type

/** Sets `quota.<metric>` on a plan, at `at`. */
export const PlanQuotaEntry = Schema.Struct({ planId: Schema.String, ...PlanQuota.fields, at: Schema.Date })
export type PlanQuotaEntry = typeof PlanQuotaEntry.Type
