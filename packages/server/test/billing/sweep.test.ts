/**
 * The period-end downgrade under `TestClock` on memory repositories (metering-billing.md §5: "`cancelAtPeriodEnd`
 * keeps the plan until `currentPeriodEnd`, then a sweep (scoped fiber) downgrades to `free`"): the background fiber
 * leaves the plan alone until the period ends, then ends the subscription and puts the workspace back on free, with
 * its events; a renewed (not cancelled) subscription is never touched.
 */
import { type Actor, type OrgId } from "@cp/domain"
import { BillingRepo, EntitlementsRepo, EventLogRepo, Transactor } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import type { ProviderSubscription } from "../../src/billing/providerApi.ts"
import { BillingState } from "../../src/billing/state.ts"
import { BILLING_SWEEP_INTERVAL, BillingSweep } from "../../src/billing/sweep.ts"
import { Entitlements } from "../../src/platform/entitlements.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { periodWindow } from "../../src/quotas/rules.ts"
import { QuotasService } from "../../src/quotas/service.ts"
import { UsageService } from "../../src/usage/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { billedCustomer } from "../support/billing.ts"
import { areaServicesLayer, userActor } from "../support/services.ts"

const START = Date.UTC(2026, 2, 10, 12, 0)
const DAY = 24 * 60 * 60 * 1000

const stateLayer = BillingState.layer.pipe(Layer.provideMerge(areaServicesLayer))
const withSweep = BillingSweep.background.pipe(Layer.provideMerge(BillingSweep.layer), Layer.provideMerge(stateLayer))

/** A workspace with a customer and an active `team` subscription ending a day from now, cancelled or not. */
const subscribed = (cancelAtPeriodEnd: boolean, actor: Actor = userActor()) =>
  Effect.gen(function*() {
    const { organization } = yield* (yield* WorkspacesService).create(actor, { name: "Billed" })
    const orgId: OrgId = organization.id
    const billing = yield* BillingRepo
    const now = new Date(START)
    const customerId = `cus_${orgId}`
    yield* billing.insertCustomer(billedCustomer(orgId, now))
    const subscription: ProviderSubscription = {
      id: `sub_${orgId}`,
      customerId,
      productId: "prod_team",
      status: "active",
      currentPeriodStart: new Date(START - 29 * DAY).toISOString(),
      currentPeriodEnd: new Date(START + DAY).toISOString(),
      trialEnd: null,
      cancelAtPeriodEnd,
      canceledAt: null,
      modifiedAt: now.toISOString(),
      metadata: { orgId }
    }
    const applied = yield* (yield* Transactor).withTransaction(
      (yield* BillingState).applySubscription(subscription, false)
    )
    assert.strictEqual(applied._tag, "applied")
    return orgId
  })

const planOf = (orgId: OrgId) =>
  Effect.map(
    Effect.flatMap(EntitlementsRepo, (repo) => repo.assignmentOf(orgId)),
    (a) => Option.match(a, { onNone: () => "free", onSome: (x) => x.planId })
  )

describe("billing_cycle quotas", () => {
  it("the cycle is the subscription's period when it holds the time, the calendar month otherwise", () => {
    const cycle = { start: new Date(Date.UTC(2026, 1, 9)), end: new Date(Date.UTC(2026, 2, 9)) }
    assert.deepStrictEqual(periodWindow("billing_cycle", new Date(Date.UTC(2026, 2, 1)), cycle), cycle)
    assert.deepStrictEqual(
      periodWindow("billing_cycle", new Date(Date.UTC(2026, 2, 10)), cycle),
      periodWindow("month", new Date(Date.UTC(2026, 2, 10)))
    )
  })

  it.effect("a check counts usage in the active subscription's period, across a calendar month boundary", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      const actor: Actor = userActor()
      const orgId = yield* subscribed(false, actor)
      const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(orgId, actor))
      yield* (yield* QuotasService).create(actor, workspace, {
        metric: "calls",
        limit: 10,
        period: "billing_cycle",
        enforcement: "hard"
      })
      // 20 days ago: February, but within the subscription's period (29 days back to tomorrow).
      yield* (yield* UsageService).record(actor, workspace, {
        metric: "calls",
        idempotencyKey: "cycle-1",
        quantity: 4,
        recordedAt: new Date(START - 20 * DAY)
      })
      const decision = yield* (yield* QuotasService).check(workspace, { metric: "calls" })
      assert.strictEqual(decision.used, 4)
      assert.strictEqual(decision.period, "billing_cycle")
    }).pipe(Effect.provide(UsageService.layer.pipe(
      Layer.provideMerge(QuotasService.layer),
      Layer.provideMerge(Entitlements.layer),
      Layer.provideMerge(stateLayer)
    ))))
})

describe("billing period-end sweep", () => {
  it.effect("keeps the plan until the period ends, then downgrades to free with its events", () =>
    Effect.gen(function*() {
      const cancelled = yield* subscribed(true)
      const renewing = yield* subscribed(false)
      assert.strictEqual(yield* planOf(cancelled), "team")
      yield* TestClock.adjust(DAY - 60_000)
      assert.strictEqual(yield* planOf(cancelled), "team")

      yield* TestClock.adjust(BILLING_SWEEP_INTERVAL)
      yield* TestClock.adjust(BILLING_SWEEP_INTERVAL)
      assert.strictEqual(yield* planOf(cancelled), "free")
      assert.strictEqual(yield* planOf(renewing), "team")
      const active = yield* (yield* BillingRepo).activeSubscription(cancelled)
      assert.isTrue(Option.isNone(active))

      const events = yield* (yield* EventLogRepo).listEvents({ orgId: cancelled })
      const types = events.map((event) => event.type)
      assert.include(types, "subscription.canceled")
      assert.strictEqual(types.filter((type) => type === "entitlements.updated").length, 2)
    }).pipe(
      Effect.provide(withSweep),
      // The clock is set before the sweep's fiber starts, so it does not sweep every minute since 1970.
      (run) => Effect.andThen(TestClock.setTime(START), run)
    ))
})
