/**
 * The period-end sweep (metering-billing.md §5: "`cancelAtPeriodEnd` keeps the plan until `currentPeriodEnd`, then a
 * sweep downgrades to `free`"): subscriptions whose scheduled cancellation is due end, and their workspaces return to
 * the free plan, even when the provider's own `subscription.canceled` never arrives. Each batch is one transaction that
 * claims its rows with `for update skip locked`, so replicas sweeping together end each subscription once.
 */
import { BillingRepo, Transactor } from "@cp/persistence"
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { currentDate } from "../platform/serviceKit.ts"
import { BillingState } from "./state.ts"

export const BILLING_SWEEP_BATCH_SIZE = 100
/** How often each replica looks for due cancellations. */
export const BILLING_SWEEP_INTERVAL = Duration.minutes(1)

export class BillingSweep extends Context.Service<BillingSweep, {
  /** One sweep: batches until nothing is due; how many subscriptions this call ended. */
  readonly runOnce: Effect.Effect<number>
}>()("@cp/server/billing/BillingSweep") {
  static readonly layer = Layer.effect(
    BillingSweep,
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      const state = yield* BillingState
      const tx = yield* Transactor
      const batch = tx.withTransaction(Effect.gen(function*() {
        const due = yield* billing.dueCancellations({ now: yield* currentDate, limit: BILLING_SWEEP_BATCH_SIZE })
        for (const row of due) yield* state.endAtPeriodEnd(row)
        return due.length
      }))
      const runOnce = Effect.gen(function*() {
        let total = 0
        while (true) {
          const count = yield* batch
          total += count
          if (count < BILLING_SWEEP_BATCH_SIZE) return total
        }
      }).pipe(Effect.withSpan("BillingSweep.run", { root: true }))
      return BillingSweep.of({ runOnce })
    })
  )

  /** The background fiber: a sweep now and then every `BILLING_SWEEP_INTERVAL`, for as long as the server runs. */
  static readonly background = Layer.effectDiscard(Effect.gen(function*() {
    const sweep = yield* BillingSweep
    yield* sweep.runOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning("billing sweep failed", cause).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(BILLING_SWEEP_INTERVAL)),
      Effect.forkScoped
    )
  }))
}
