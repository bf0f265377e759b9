/**
 * Metering time rules under `TestClock` on memory repositories (metering-billing.md §1–3): the 35-day / 5-minute
 * window of `recordedAt`, UTC hour, day and month periods of a quota (billing_cycle as the calendar month), usage
 * leaving the period at its boundary, late records counting toward their own period, and a violation per
 * (quota, period start). The pure period rules are checked as functions too.
 */
import { type Actor, type QuotaDecision, ValidationFailed } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { Entitlements } from "../../src/platform/entitlements.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { mostSpecific, periodWindow } from "../../src/quotas/rules.ts"
import { QuotasService } from "../../src/quotas/service.ts"
import { UsageRollup } from "../../src/usage/rollup.ts"
import { UsageService } from "../../src/usage/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesLayer, userActor } from "../support/services.ts"

const servicesLayer = Layer.mergeAll(UsageService.layer, UsageRollup.layer).pipe(
  Layer.provideMerge(QuotasService.layer),
  Layer.provideMerge(Entitlements.layer),
  Layer.provideMerge(areaServicesLayer)
)

const HOUR = 60 * 60 * 1000
const DAY = 24 * HOUR
/** 2026-03-31T22:30:00.000Z: an hour, a day and a month end within the next 90 minutes. */
const START = Date.UTC(2026, 2, 31, 22, 30)

const newOwner = Effect.gen(function*() {
  const actor: Actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: "Metered" })
  const resolver = yield* WorkspaceResolver
  const workspace = Option.getOrThrow(yield* resolver.resolve(organization.id, actor))
  return { actor, workspace }
})

let keys = 0
const record = (actor: Actor, workspace: Parameters<UsageService["Service"]["record"]>[1], extra: {
  readonly quantity?: number
  readonly recordedAt?: Date
} = {}) =>
  Effect.flatMap(
    UsageService,
    (usage) => usage.record(actor, workspace, { metric: "calls", idempotencyKey: `k${++keys}`, ...extra })
  )

const fieldsOf = (error: ValidationFailed) => Object.keys(error.error.details["fields"] ?? {})

describe("metering time rules", () => {
  it("periods are UTC calendar hours, days and months; billing_cycle is the month", () => {
    const at = new Date(Date.UTC(2026, 1, 28, 23, 59, 59, 999))
    assert.deepStrictEqual(periodWindow("hour", at), {
      start: new Date(Date.UTC(2026, 1, 28, 23)),
      end: new Date(Date.UTC(2026, 2, 1, 0))
    })
    assert.deepStrictEqual(periodWindow("day", at), {
      start: new Date(Date.UTC(2026, 1, 28)),
      end: new Date(Date.UTC(2026, 2, 1))
    })
    assert.deepStrictEqual(periodWindow("month", at), {
      start: new Date(Date.UTC(2026, 1, 1)),
      end: new Date(Date.UTC(2026, 2, 1))
    })
    assert.deepStrictEqual(periodWindow("billing_cycle", at), periodWindow("month", at))
    assert.deepStrictEqual(
      periodWindow("month", new Date(Date.UTC(2026, 11, 31, 23))).end,
      new Date(Date.UTC(2027, 0, 1))
    )
  })

  it("the most specific applying scope wins: environment, then project, then workspace", () => {
    const ws = { projectId: null, environmentId: null, id: "ws" }
    const p = { projectId: "p", environmentId: null, id: "p" }
    const e = { projectId: "p", environmentId: "e", id: "e" }
    const other = { projectId: "q", environmentId: null, id: "q" }
    const all = [ws, p, e, other]
    assert.deepStrictEqual(mostSpecific(all, { projectId: "p", environmentId: "e" }).map((q) => q.id), ["e"])
    assert.deepStrictEqual(mostSpecific(all, { projectId: "p", environmentId: "f" }).map((q) => q.id), ["p"])
    assert.deepStrictEqual(mostSpecific(all, { projectId: "r", environmentId: null }).map((q) => q.id), ["ws"])
    assert.deepStrictEqual(mostSpecific([p], { projectId: null, environmentId: null }), [])
  })

  it.effect("recordedAt: 35 days back and 5 minutes ahead are accepted, a millisecond beyond is 422", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      const { actor, workspace } = yield* newOwner
      yield* record(actor, workspace, { recordedAt: new Date(START - 35 * DAY) })
      yield* record(actor, workspace, { recordedAt: new Date(START + 5 * 60 * 1000) })
      const refused = (recordedAt: Date) =>
        Effect.map(Effect.flip(record(actor, workspace, { recordedAt })), (error) => {
          assert.instanceOf(error, ValidationFailed)
          return error instanceof ValidationFailed ? fieldsOf(error) : []
        })
      assert.deepStrictEqual(yield* refused(new Date(START - 35 * DAY - 1)), ["recordedAt"])
      assert.deepStrictEqual(yield* refused(new Date(START + 5 * 60 * 1000 + 1)), ["recordedAt"])
      // The window moves with the clock: what was fine then is too old 36 days later.
      yield* TestClock.adjust(36 * DAY)
      assert.deepStrictEqual(yield* refused(new Date(START)), ["recordedAt"])
    }).pipe(Effect.provide(servicesLayer)))

  it.effect("usage leaves each period at its UTC boundary; late records count toward their own period", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      const { actor, workspace } = yield* newOwner
      const quotas = yield* QuotasService
      for (const period of ["hour", "day", "month", "billing_cycle"] as const) {
        yield* quotas.create(actor, workspace, { metric: `calls`, limit: 10, period, enforcement: "hard" })
      }
      const check = Effect.map(
        quotas.check(workspace, { metric: "calls" }),
        (decision: QuotaDecision) => ({ period: decision.period, used: decision.used, allowed: decision.allowed })
      )
      yield* record(actor, workspace, { quantity: 4 })
      // Four periods at one scope: the one with the least room decides (all tie at 4 of 10: the first).
      assert.strictEqual((yield* check).used, 4)
      // 23:00: a new hour; the day and month still hold 4.
      yield* TestClock.setTime(Date.UTC(2026, 2, 31, 23, 0))
      yield* record(actor, workspace, { quantity: 1 })
      // A roll-up pass first (the server's fiber runs one every second).
      const summary = (bucketType: "hour" | "day") =>
        Effect.andThen(
          Effect.flatMap(UsageRollup, (rollup) => rollup.runOnce),
          Effect.flatMap(UsageService, (usage) => usage.summary(workspace, { metric: "calls", bucketType }))
        )
      assert.strictEqual((yield* summary("hour")).rollups.length, 2)
      assert.strictEqual((yield* summary("day")).rollups.length, 1)
      // The hour quota has the most room now (1 of 10); the others hold 5.
      assert.deepStrictEqual(yield* check, { period: "day", used: 5, allowed: true })
      // 2026-04-01T00:00: a new day and a new month; only the new record counts.
      yield* TestClock.setTime(Date.UTC(2026, 3, 1, 0, 0))
      assert.deepStrictEqual(yield* check, { period: "hour", used: 0, allowed: true })
      yield* record(actor, workspace, { quantity: 2 })
      assert.strictEqual((yield* check).used, 2)
      // A late record of March counts toward March, not April.
      yield* record(actor, workspace, { quantity: 6, recordedAt: new Date(Date.UTC(2026, 2, 31, 23, 59)) })
      assert.strictEqual((yield* check).used, 2)
      assert.strictEqual((yield* summary("day")).totalQuantity, 13)
    }).pipe(Effect.provide(servicesLayer)))

  it.effect("a violation per (quota, period start): a new period opens a new one", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      const { actor, workspace } = yield* newOwner
      const quotas = yield* QuotasService
      yield* quotas.create(actor, workspace, { metric: "calls", limit: 3, period: "hour", enforcement: "soft" })
      yield* record(actor, workspace, { quantity: 3 })
      yield* record(actor, workspace, { quantity: 1 })
      const list = Effect.map(quotas.violations(workspace, {}), (page) => page.data.violations)
      assert.deepStrictEqual((yield* list).map((v) => [v.periodStart.toISOString(), v.used]), [
        ["2026-03-31T22:00:00.000Z", 4]
      ])
      yield* TestClock.adjust(HOUR)
      yield* record(actor, workspace, { quantity: 2 })
      assert.strictEqual((yield* list).length, 1)
      yield* record(actor, workspace, { quantity: 1 })
      assert.deepStrictEqual((yield* list).map((v) => [v.periodStart.toISOString(), v.used]), [
        ["2026-03-31T23:00:00.000Z", 3],
        ["2026-03-31T22:00:00.000Z", 4]
      ])
    }).pipe(Effect.provide(servicesLayer)))
})
