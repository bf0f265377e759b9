/** Pure quota rules: period windows (UTC calendar periods) and which configured quota a check evaluates. */
import type { QuotaPeriod } from "@cp/domain"

const HOUR_MS = 60 * 60 * 1000
const DAY_MS = 24 * HOUR_MS

/** A half-open window [start, end). */
export interface Window {
  readonly start: Date
  readonly end: Date
}

/**
 * The period holding `at`: the UTC hour, day or month. `billing_cycle` is `cycle`, the active subscription's current
 * period, when it holds `at`; the calendar month otherwise (no subscription, or `at` outside it) (metering-billing.md
 * §3).
 */
export const periodWindow = (period: QuotaPeriod, at: Date, cycle?: Window): Window => {
  const ms = at.getTime()
  if (period === "billing_cycle" && cycle !== undefined && cycle.start <= at && at < cycle.end) return cycle
  switch (period) {
    case "hour": {
      const start = Math.floor(ms / HOUR_MS) * HOUR_MS
      return { start: new Date(start), end: new Date(start + HOUR_MS) }
    }
    case "day": {
      const start = Math.floor(ms / DAY_MS) * DAY_MS
      return { start: new Date(start), end: new Date(start + DAY_MS) }
    }
    case "month":
    case "billing_cycle":
      return {
        start: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)),
        end: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1))
      }
  }
}

/** A quota's scope: the workspace (both null), a project, or one environment of it. */
export interface Scoped {
  readonly projectId: string | null
  readonly environmentId: string | null
}

/** Whether a record of `record`'s scope counts toward a quota of `quota`'s scope (scopes nest). */
export const countsToward = (quota: Scoped, record: Scoped): boolean =>
  (quota.projectId === null || quota.projectId === record.projectId) &&
  (quota.environmentId === null || quota.environmentId === record.environmentId)

/** How specific a scope is: environment 2, project 1, workspace 0. */
export const specificity = (scope: Scoped): number =>
  scope.environmentId !== null ? 2 : scope.projectId !== null ? 1 : 0

/**
 * The quotas a check evaluates: those of the most specific scope that has any among the ones applying to the asked
 * scope (environment, then project, then workspace). Empty when none applies.
 */
export const mostSpecific = <Q extends Scoped>(quotas: ReadonlyArray<Q>, asked: Scoped): ReadonlyArray<Q> => {
  const applying = quotas.filter((quota) => countsToward(quota, asked))
  const top = Math.max(-1, ...applying.map(specificity))
  return applying.filter((quota) => specificity(quota) === top)
}
