/**
 * Quotas (metering-billing.md §3): configured quotas per workspace, project or environment, plan-entitlement quotas
 * (`quota.<metric>`, workspace-level, overridden by an explicit workspace quota of the metric), the check, and the
 * violations ingest records when usage reaches a limit: one per (quota, period start), raised as usage grows, with
 * one `quota.exceeded` event when it is created.
 */
import {
  type Actor,
  Conflict,
  type EnvironmentId,
  NotFound,
  type OrgId,
  type Paged,
  type ProjectId,
  type Quota,
  type QuotaCheckInput,
  type QuotaDecision,
  type QuotaId,
  type QuotaInput,
  type QuotaPatch,
  type QuotaPeriod,
  type QuotaViolation,
  type ResolvedWorkspace,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  BillingRepo,
  EnvironmentsRepo,
  idPosition,
  type PlanQuota,
  ProjectsRepo,
  type QuotaRow,
  QuotasRepo,
  quotasScopeConstraint,
  Transactor,
  type UsageRecordRow,
  UsageRepo,
  type ViolationRow,
  ViolationsRepo
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { type EventActor, eventActorOf, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { countsToward, mostSpecific, periodWindow, type Window } from "./rules.ts"

/** A quota as evaluated: a configured one (with its id) or the plan's (workspace-level, no id). */
export interface Evaluated {
  readonly quotaId: QuotaId | null
  readonly quotaKey: string
  readonly metric: string
  readonly projectId: ProjectId | null
  readonly environmentId: EnvironmentId | null
  readonly limit: number
  readonly period: QuotaPeriod
  readonly enforcement: "soft" | "hard"
}

const configured = (row: QuotaRow): Evaluated => ({ ...row, quotaId: row.id, quotaKey: row.id })
const fromPlan = (plan: PlanQuota): Evaluated => ({
  ...plan,
  quotaId: null,
  quotaKey: `plan:${plan.metric}:${plan.period}`,
  projectId: null,
  environmentId: null
})

const quotaNotFound = (quotaId: string) => wireError(NotFound, "Quota not found", { quotaId })

/** The scope a body names: `environmentId` needs `projectId`; both must be of this workspace (archived ones too). */
export const requireScope = Effect.fnUntraced(function*(
  projects: ProjectsRepo["Service"],
  environments: EnvironmentsRepo["Service"],
  orgId: OrgId,
  scope: { readonly projectId?: ProjectId | undefined; readonly environmentId?: EnvironmentId | undefined }
) {
  if (scope.environmentId !== undefined && scope.projectId === undefined) {
    return yield* validationFailed({ environmentId: ["requires projectId"] })
  }
  if (scope.projectId !== undefined) {
    const project = yield* projects.findById({ orgId, projectId: scope.projectId })
    if (Option.isNone(project)) return yield* validationFailed({ projectId: ["names no project in this workspace"] })
    if (scope.environmentId !== undefined) {
      const environment = yield* environments.findById({
        orgId,
        projectId: scope.projectId,
        environmentId: scope.environmentId
      })
      if (Option.isNone(environment)) {
        return yield* validationFailed({ environmentId: ["names no environment of this project"] })
      }
    }
  }
})

export class QuotasService extends Context.Service<QuotasService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly quotas: ReadonlyArray<Quota> }>, ValidationFailed>
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: QuotaInput
  ) => Effect.Effect<{ readonly quota: Quota }, Conflict | ValidationFailed>
  readonly update: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    quotaId: QuotaId,
    patch: QuotaPatch
  ) => Effect.Effect<{ readonly quota: Quota }, NotFound>
  readonly delete: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    quotaId: QuotaId
  ) => Effect.Effect<{ readonly deleted: true }, NotFound>
  readonly check: (
    workspace: ResolvedWorkspace,
    input: QuotaCheckInput
  ) => Effect.Effect<QuotaDecision, ValidationFailed>
  readonly violations: (
    workspace: ResolvedWorkspace,
    query: PageRequest & {
      readonly metric?: string
      readonly projectId?: ProjectId
      readonly environmentId?: EnvironmentId
      readonly resourceId?: string
    }
  ) => Effect.Effect<Paged<{ readonly violations: ReadonlyArray<QuotaViolation> }>, ValidationFailed>
  /**
   * The quotas records of these metrics count toward, read before an ingest's transaction so that it holds its rollup
   * rows no longer than it must (and skips the violation step when there are none).
   */
  readonly quotasFor: (orgId: OrgId, metrics: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Evaluated>>
  /** After an ingest stored `records` (inside its transaction): the violations they caused, and their events. */
  readonly afterIngest: (
    actor: EventActor,
    orgId: OrgId,
    records: ReadonlyArray<UsageRecordRow>,
    quotas: ReadonlyArray<Evaluated>
  ) => Effect.Effect<void>
}>()("@cp/server/QuotasService") {
  static readonly layer = Layer.effect(
    QuotasService,
    Effect.gen(function*() {
      const quotas = yield* QuotasRepo
      const violations = yield* ViolationsRepo
      const usage = yield* UsageRepo
      const billing = yield* BillingRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors

      /** Configured quotas of the metric, plus the plan's unless an explicit workspace quota overrides it. */
      const quotasOf = Effect.fnUntraced(function*(orgId: OrgId, metric: string) {
        const rows = (yield* quotas.ofMetric({ orgId, metric })).map(configured)
        const overridden = rows.some((row) => row.projectId === null)
        const plan = overridden ? [] : (yield* quotas.planQuotas(orgId)).filter((q) => q.metric === metric)
        return [...rows, ...plan.map(fromPlan)]
      })

      /** The active subscription's current period, which `billing_cycle` quotas count in (none: the month). */
      const billingCycle = (orgId: OrgId, period: QuotaPeriod) =>
        period !== "billing_cycle" ? Effect.succeed(undefined) : Effect.map(
          billing.activeSubscription(orgId),
          (active): Window | undefined => {
            const row = Option.getOrUndefined(active)
            return row?.currentPeriodStart == null || row.currentPeriodEnd == null
              ? undefined
              : { start: row.currentPeriodStart, end: row.currentPeriodEnd }
          }
        )

      const usedIn = (orgId: OrgId, quota: Evaluated, at: Date) =>
        Effect.flatMap(billingCycle(orgId, quota.period), (cycle) =>
          usage.usedInWindow({
            orgId,
            metric: quota.metric,
            projectId: quota.projectId,
            environmentId: quota.environmentId,
            ...periodWindow(quota.period, at, cycle)
          }))

      const recordQuota = (actor: Actor, row: QuotaRow, type: string, description: string) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "quota", id: row.id, name: row.metric },
          data: {
            quotaId: row.id,
            metric: row.metric,
            limit: row.limit,
            period: row.period,
            enforcement: row.enforcement,
            projectId: row.projectId,
            environmentId: row.environmentId
          },
          projectId: row.projectId,
          environmentId: row.environmentId,
          description
        })

      const recordViolation = Effect.fnUntraced(function*(actor: EventActor, row: ViolationRow) {
        const { created, violation } = yield* violations.record(row)
        if (!created) return
        yield* events.record({
          orgId: violation.orgId,
          type: "quota.exceeded",
          actor,
          subject: { kind: "quota_violation", id: violation.id, name: violation.metric },
          data: {
            violationId: violation.id,
            quotaId: violation.quotaId,
            metric: violation.metric,
            projectId: violation.projectId,
            environmentId: violation.environmentId,
            resourceId: violation.resourceId,
            period: violation.period,
            periodStart: violation.periodStart.toISOString(),
            limit: violation.limit,
            used: violation.used,
            enforcement: violation.enforcement
          },
          projectId: violation.projectId,
          environmentId: violation.environmentId,
          description: `Quota on ${violation.metric} exceeded: ${violation.used} of ${violation.limit}`
        })
      })

      return QuotasService.of({
        list: Effect.fn("Quotas.list")(function*(workspace, page) {
          const orgId = workspace.organization.id
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "quotas.list", scope: orgId },
            page,
            (window) => quotas.list({ orgId, ...window }),
            idPosition
          )
          return { data: { quotas: items }, cursor }
        }),

        create: Effect.fn("Quotas.create")(function*(actor, workspace, input) {
          const orgId = workspace.organization.id
          yield* requireScope(projects, environments, orgId, input)
          const at = yield* currentDate
          const row: QuotaRow = {
            id: mint.quota(at.getTime()),
            orgId,
            projectId: input.projectId ?? null,
            environmentId: input.environmentId ?? null,
            metric: input.metric,
            limit: input.limit,
            period: input.period,
            enforcement: input.enforcement,
            createdAt: at,
            updatedAt: at
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* quotas.insert(row).pipe(
              Effect.catchTag("UniqueViolation", (error) =>
                error.constraint === quotasScopeConstraint
                  ? Effect.fail(wireError(
                    Conflict,
                    `A ${row.period} quota on ${row.metric} already exists at this scope`,
                    { field: "metric" }
                  ))
                  : Effect.die(error))
            )
            yield* recordQuota(actor, row, "quota.created", `Quota on ${row.metric} created`)
            return { quota: row }
          }))
        }),

        update: Effect.fn("Quotas.update")(function*(actor, workspace, quotaId, patch) {
          const orgId = workspace.organization.id
          const at = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const updated = yield* quotas.update({ orgId, quotaId, at, ...patch })
            if (Option.isNone(updated)) return yield* quotaNotFound(quotaId)
            yield* recordQuota(actor, updated.value, "quota.updated", `Quota on ${updated.value.metric} updated`)
            return { quota: updated.value }
          }))
        }),

        delete: Effect.fn("Quotas.delete")(function*(actor, workspace, quotaId) {
          const orgId = workspace.organization.id
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* quotas.findById({ orgId, quotaId })
            if (Option.isNone(current) || !(yield* quotas.delete({ orgId, quotaId }))) {
              return yield* quotaNotFound(quotaId)
            }
            yield* recordQuota(actor, current.value, "quota.deleted", `Quota on ${current.value.metric} deleted`)
            return { deleted: true as const }
          }))
        }),

        check: Effect.fn("Quotas.check")(function*(workspace, input) {
          const orgId = workspace.organization.id
          yield* requireScope(projects, environments, orgId, input)
          const now = yield* currentDate
          const asked = { projectId: input.projectId ?? null, environmentId: input.environmentId ?? null }
          const candidates = mostSpecific(yield* quotasOf(orgId, input.metric), asked)
          if (candidates.length === 0) {
            return {
              allowed: true,
              metric: input.metric,
              limit: -1,
              used: 0,
              remaining: -1,
              period: null,
              enforcement: null,
              reason: "no_quota_defined" as const
            }
          }
          // Several periods at one scope: the one with the least room decides.
          const decisions: Array<QuotaDecision> = []
          for (const quota of candidates) {
            const used = yield* usedIn(orgId, quota, now)
            const exceeded = used >= quota.limit
            decisions.push({
              allowed: quota.enforcement === "soft" || !exceeded,
              metric: input.metric,
              limit: quota.limit,
              used,
              remaining: Math.max(quota.limit - used, 0),
              period: quota.period,
              enforcement: quota.enforcement,
              reason: exceeded ? "quota_exceeded" : null
            })
          }
          return decisions.reduce((a, b) => (b.limit - b.used < a.limit - a.used ? b : a))
        }),

        violations: Effect.fn("Quotas.violations")(function*(workspace, query) {
          const orgId = workspace.organization.id
          const filters = {
            metric: query.metric ?? null,
            projectId: query.projectId ?? null,
            environmentId: query.environmentId ?? null,
            resourceId: query.resourceId ?? null
          }
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "quotas.violations", scope: orgId, filters },
            query,
            (window) => violations.list({ orgId, ...filters, ...window }),
            idPosition
          )
          return { data: { violations: items.map(({ quotaKey: _quotaKey, ...violation }) => violation) }, cursor }
        }),

        quotasFor: Effect.fn("Quotas.quotasFor")(function*(orgId, metrics) {
          const found: Array<Evaluated> = []
          for (const metric of new Set(metrics)) found.push(...(yield* quotasOf(orgId, metric)))
          return found
        }),

        afterIngest: Effect.fn("Quotas.afterIngest")(function*(actor, orgId, records, applicable) {
          if (applicable.length === 0 || records.length === 0) return
          const now = yield* currentDate
          const metrics = new Set(records.map((record) => record.metric))
          for (const metric of metrics) {
            const ofMetric = records.filter((record) => record.metric === metric)
            for (const quota of applicable.filter((q) => q.metric === metric)) {
              // Each period the quota's records fell in (late records count toward their own period).
              const byPeriod = new Map<number, UsageRecordRow>()
              const cycle = yield* billingCycle(orgId, quota.period)
              for (const record of ofMetric) {
                if (!countsToward(quota, record)) continue
                byPeriod.set(periodWindow(quota.period, record.recordedAt, cycle).start.getTime(), record)
              }
              for (const [periodStart, last] of byPeriod) {
                const used = yield* usedIn(orgId, quota, new Date(periodStart))
                if (used < quota.limit) continue
                yield* recordViolation(actor, {
                  id: mint.quotaViolation(now.getTime()),
                  orgId,
                  quotaKey: quota.quotaKey,
                  quotaId: quota.quotaId,
                  metric,
                  projectId: quota.projectId,
                  environmentId: quota.environmentId,
                  resourceId: last.resourceId,
                  period: quota.period,
                  periodStart: new Date(periodStart),
                  limit: quota.limit,
                  used,
                  enforcement: quota.enforcement,
                  createdAt: now,
                  updatedAt: now
                })
              }
            }
          }
        })
      })
    })
  )
}
