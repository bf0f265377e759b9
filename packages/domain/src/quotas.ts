/**
 * Quotas (spec: Limits "Quota periods"; "Usage metering" quota routes; metering-billing.md §3): configured limits on
 * a metric per workspace, project or environment, plan-entitlement quotas (`quota.<metric>`), the check that
 * evaluates the most specific one, and the violations ingest records when usage reaches a limit.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, NotFound } from "./errors.ts"
import { EnvironmentId, OrgId, ProjectId, QuotaId, QuotaViolationId } from "./ids.ts"
import { Metric, ResourceId } from "./metering.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

export const QuotaPeriod = Schema.Literals(["hour", "day", "month", "billing_cycle"])
export type QuotaPeriod = typeof QuotaPeriod.Type
export const Enforcement = Schema.Literals(["soft", "hard"])
export type Enforcement = typeof Enforcement.Type

/** A limit: an integer from 0 to 2^53 − 1. */
export const QuotaLimit = Schema.Number.check(
  Schema.isInt({ message: "must be an integer" }),
  Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }, {
    message: `must be between 0 and ${Number.MAX_SAFE_INTEGER}`
  })
)

export const Quota = Schema.Struct({
  id: QuotaId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  metric: Schema.String,
  limit: Schema.Number,
  period: QuotaPeriod,
  enforcement: Enforcement,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Quota = typeof Quota.Type

export const QuotaInput = Schema.Struct({
  metric: Metric,
  limit: QuotaLimit,
  period: QuotaPeriod,
  enforcement: Enforcement,
  projectId: Schema.optionalKey(ProjectId),
  environmentId: Schema.optionalKey(EnvironmentId)
})
export type QuotaInput = typeof QuotaInput.Type

export const QuotaPatch = Schema.Struct({
  limit: Schema.optionalKey(QuotaLimit),
  enforcement: Schema.optionalKey(Enforcement)
})
export type QuotaPatch = typeof QuotaPatch.Type

export const QuotaCheckInput = Schema.Struct({
  metric: Metric,
  projectId: Schema.optionalKey(ProjectId),
  environmentId: Schema.optionalKey(EnvironmentId)
})
export type QuotaCheckInput = typeof QuotaCheckInput.Type

export const QuotaReason = Schema.NullOr(Schema.Literals(["quota_exceeded", "no_quota_defined"]))

/** The quota decision (spec: Metering). `limit` and `remaining` are −1 and `period` null when no quota applies. */
export const QuotaDecision = Schema.Struct({
  allowed: Schema.Boolean,
  metric: Schema.String,
  limit: Schema.Number,
  used: Schema.Number,
  remaining: Schema.Number,
  period: Schema.NullOr(QuotaPeriod),
  enforcement: Schema.NullOr(Enforcement),
  reason: QuotaReason
})
export type QuotaDecision = typeof QuotaDecision.Type

/**
 * A violation: one per (quota, period start), updated as usage grows. `quotaId` is null for a plan-entitlement quota
 * (it has no quota row).
 */
export const QuotaViolation = Schema.Struct({
  id: QuotaViolationId,
  orgId: OrgId,
  quotaId: Schema.NullOr(QuotaId),
  metric: Schema.String,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  resourceId: Schema.NullOr(Schema.String),
  period: QuotaPeriod,
  periodStart: Timestamp,
  limit: Schema.Number,
  used: Schema.Number,
  enforcement: Enforcement,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type QuotaViolation = typeof QuotaViolation.Type

export const ViolationsQuery = {
  ...PageQuery,
  metric: Schema.optionalKey(Metric),
  projectId: Schema.optionalKey(ProjectId),
  environmentId: Schema.optionalKey(EnvironmentId),
  resourceId: Schema.optionalKey(ResourceId)
}

const QuotaChangeData = Schema.Struct({
  quotaId: QuotaId,
  metric: Schema.String,
  limit: Schema.Number,
  period: QuotaPeriod,
  enforcement: Enforcement,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId)
})

/** The `data` of each event this area records, by event type (for the event catalog). */
export const QuotaEventData = {
  "quota.created": QuotaChangeData,
  "quota.updated": QuotaChangeData,
  "quota.deleted": QuotaChangeData,
  "quota.exceeded": Schema.Struct({
    violationId: QuotaViolationId,
    quotaId: Schema.NullOr(QuotaId),
    metric: Schema.String,
    projectId: Schema.NullOr(ProjectId),
    environmentId: Schema.NullOr(EnvironmentId),
    resourceId: Schema.NullOr(Schema.String),
    period: QuotaPeriod,
    periodStart: Schema.String,
    limit: Schema.Number,
    used: Schema.Number,
    enforcement: Enforcement
  })
}

const orgParams = { orgId: OrgRef }
const quotaParams = { ...orgParams, quotaId: QuotaId }

export class QuotasApi extends HttpApiGroup.make("quotas")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/quotas", {
      params: orgParams,
      query: PageQuery,
      success: Page({ quotas: Schema.Array(Quota) })
    }).annotateMerge(doc("List quotas")).annotateMerge(requires.permission("organization.metering.read")),
    HttpApiEndpoint.post("create", "/v1/organizations/:orgId/quotas", {
      params: orgParams,
      payload: QuotaInput,
      success: Envelope({ quota: Quota }),
      error: Conflict
    }).annotateMerge(
      doc(
        "Create a quota",
        "A limit on a metric per period at the workspace, a project or an environment; `hard` " +
          "quotas refuse, `soft` ones only record violations."
      )
    ).annotateMerge(requires.permission("organization.quota.manage")),
    HttpApiEndpoint.patch("update", "/v1/organizations/:orgId/quotas/:quotaId", {
      params: quotaParams,
      payload: QuotaPatch,
      success: Envelope({ quota: Quota }),
      error: NotFound
    }).annotateMerge(doc("Update a quota")).annotateMerge(requires.permission("organization.quota.manage")),
    HttpApiEndpoint.delete("delete", "/v1/organizations/:orgId/quotas/:quotaId", {
      params: quotaParams,
      success: Envelope({ deleted: Schema.Literal(true) }),
      error: NotFound
    }).annotateMerge(doc("Delete a quota")).annotateMerge(requires.permission("organization.quota.manage")),
    HttpApiEndpoint.post("check", "/v1/organizations/:orgId/quotas/check", {
      params: orgParams,
      payload: QuotaCheckInput,
      success: Envelope(QuotaDecision.fields)
    }).annotateMerge(
      doc(
        "Check a quota",
        "The most specific quota for the metric and scope decides; answers whether `quantity` " +
          "more is allowed, with the usage so far in the period."
      )
    ).annotateMerge(requires.permission("organization.metering.read")),
    HttpApiEndpoint.get("violations", "/v1/organizations/:orgId/quotas/violations", {
      params: orgParams,
      query: ViolationsQuery,
      success: Page({ violations: Schema.Array(QuotaViolation) })
    }).annotateMerge(
      doc(
        "List quota violations",
        "One row per quota and period, updated as usage grows; newest first."
      )
    ).annotateMerge(requires.permission("organization.metering.read"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Quotas", description: "Quotas, quota checks and violations" }))
{}
