/**
 * The quotas repositories' contract on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: one quota per (metric,
 * period, scope), updates and deletes within the workspace, plan quotas, and violations created once per
 * (quota, period start) then raised, never lowered, with `created` true exactly once.
 */
import { IdPrefix, QuotaId, QuotaViolationId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import { QuotasRepo } from "../../src/quotas/QuotasRepo.ts"
import type { QuotaRow, ViolationRow } from "../../src/quotas/rows.ts"
import { ViolationsRepo } from "../../src/quotas/ViolationsRepo.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const implementations = {
  memory: Layer.mergeAll(QuotasRepo.memory, ViolationsRepo.memory, OrganizationsRepo.memory),
  sql: Layer.mergeAll(QuotasRepo.sql, ViolationsRepo.sql, OrganizationsRepo.sql)
}

const setup = Effect.gen(function*() {
  const org = accountRootRow("Quotas")
  yield* (yield* OrganizationsRepo).insert(org).pipe(Effect.orDie)
  return org
})

const quotaRow = (org: OrganizationRow, minutes: number, overrides: Partial<QuotaRow> = {}): QuotaRow => ({
  id: newId(QuotaId, IdPrefix.quota),
  orgId: org.id,
  projectId: null,
  environmentId: null,
  metric: "calls",
  limit: 10,
  period: "day",
  enforcement: "soft",
  createdAt: at(minutes),
  updatedAt: at(minutes),
  ...overrides
})

describeContract("QuotasRepo", implementations, (it) => {
  it.effect("one quota per metric, period and scope; update and delete stay in the workspace", () =>
    Effect.gen(function*() {
      const quotas = yield* QuotasRepo
      const [org, other] = [yield* setup, yield* setup]
      const a = quotaRow(org, 1)
      yield* quotas.insert(a)
      const dup = yield* Effect.flip(quotas.insert(quotaRow(org, 2)))
      assert.instanceOf(dup, UniqueViolation)
      assert.strictEqual(dup.constraint, "quotas_scope_key")
      const b = quotaRow(org, 3, { period: "hour" })
      yield* quotas.insert(b)
      yield* quotas.insert(quotaRow(other, 3))
      assert.deepStrictEqual((yield* quotas.list({ orgId: org.id, limit: 10 })).map((q) => q.id), [b.id, a.id])
      assert.strictEqual((yield* quotas.ofMetric({ orgId: org.id, metric: "calls" })).length, 2)
      assert.isTrue(Option.isNone(yield* quotas.update({ orgId: other.id, quotaId: a.id, limit: 1, at: at(4) })))
      const updated = Option.getOrThrow(yield* quotas.update({ orgId: org.id, quotaId: a.id, limit: 1, at: at(4) }))
      assert.deepInclude(updated, { limit: 1, enforcement: "soft", updatedAt: at(4) })
      assert.isFalse(yield* quotas.delete({ orgId: other.id, quotaId: a.id }))
      assert.isTrue(yield* quotas.delete({ orgId: org.id, quotaId: a.id }))
      assert.isTrue(Option.isNone(yield* quotas.findById({ orgId: org.id, quotaId: a.id })))
    }))

  it.effect("a plan's quota.<metric> entries are the workspace's plan quotas", () =>
    Effect.gen(function*() {
      const quotas = yield* QuotasRepo
      const org = yield* setup
      const metric = `plan.${randomUUID().slice(0, 8)}`
      yield* quotas.setPlanQuota({ planId: "free", metric, limit: 7, period: "month", enforcement: "soft", at: at(0) })
      assert.deepInclude((yield* quotas.planQuotas(org.id)).find((q) => q.metric === metric), {
        limit: 7,
        period: "month",
        enforcement: "soft"
      })
    }))

  it.effect("a violation is created once per (quota, period start), then raised and never lowered", () =>
    Effect.gen(function*() {
      const violations = yield* ViolationsRepo
      const quotas = yield* QuotasRepo
      const org = yield* setup
      const quota = quotaRow(org, 1)
      yield* quotas.insert(quota)
      const row = (used: number, periodMinutes: number, minutes: number): ViolationRow => ({
        id: QuotaViolationId.make(randomUUID()),
        orgId: org.id,
        quotaKey: quota.id,
        quotaId: quota.id,
        metric: "calls",
        projectId: null,
        environmentId: null,
        resourceId: `r${minutes}`,
        period: "day",
        periodStart: at(periodMinutes),
        limit: 10,
        used,
        enforcement: "soft",
        createdAt: at(minutes),
        updatedAt: at(minutes)
      })
      const first = yield* violations.record(row(10, 0, 1))
      assert.isTrue(first.created)
      const raised = yield* violations.record(row(12, 0, 2))
      assert.isFalse(raised.created)
      assert.deepInclude(raised.violation, { id: first.violation.id, used: 12, resourceId: "r2" })
      const lower = yield* violations.record(row(11, 0, 3))
      assert.strictEqual(lower.violation.used, 12)
      const next = yield* violations.record(row(10, 24 * 60, 4))
      assert.isTrue(next.created)
      const page = { orgId: org.id, metric: null, projectId: null, environmentId: null, resourceId: null, limit: 10 }
      assert.deepStrictEqual((yield* violations.list(page)).map((v) => v.id), [next.violation.id, first.violation.id])
      assert.strictEqual((yield* violations.list({ ...page, resourceId: "r3" })).length, 1)
      assert.strictEqual((yield* violations.list({ ...page, metric: "other" })).length, 0)
    }))
})
