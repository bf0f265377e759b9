/**
 * The roll-up fiber (metering-billing.md §2): folds the pending per-hour sums ingest writes into the hourly and daily
 * rollups the summary reads. Each claim is one statement taking the oldest unclaimed sums `for update skip locked`,
 * so replicas rolling up at the same time fold every sum exactly once; a record reaches the summary within
 * `ROLLUP_INTERVAL` plus one pass after its ingest answered (the spec allows 10 s).
 */
import { UsageRepo } from "@cp/persistence"
import { Context, Duration, Effect, Layer, Schedule } from "effect"

/** Pending sums claimed per statement (each is one ingest's sum for one scope, metric and hour). */
export const ROLLUP_BATCH = 500
/** How often each replica rolls up. */
export const ROLLUP_INTERVAL = Duration.seconds(1)

export class UsageRollup extends Context.Service<UsageRollup, {
  /** One pass: claims until nothing unclaimed is left; how many pending sums this call folded. */
  readonly runOnce: Effect.Effect<number>
}>()("@cp/server/UsageRollup") {
  static readonly layer = Layer.effect(
    UsageRollup,
    Effect.gen(function*() {
      const usage = yield* UsageRepo
      const runOnce = Effect.gen(function*() {
        let total = 0
        while (true) {
          const folded = yield* usage.rollUp(ROLLUP_BATCH)
          total += folded
          if (folded < ROLLUP_BATCH) return total
        }
      }).pipe(
        Effect.tap((total) => Effect.annotateCurrentSpan("rollup.folded", total)),
        Effect.withSpan("UsageRollup.run", { root: true })
      )
      return UsageRollup.of({ runOnce })
    })
  )

  /** The background fiber: a pass now and then every `ROLLUP_INTERVAL`, while the server's scope lives. */
  static readonly background = Layer.effectDiscard(Effect.gen(function*() {
    const rollup = yield* UsageRollup
    yield* rollup.runOnce.pipe(
      // A failed pass (database away) is logged and retried at the next tick; it never stops the schedule.
      Effect.catchCause((cause) => Effect.logWarning("usage roll-up failed", cause).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(ROLLUP_INTERVAL)),
      Effect.forkScoped
    )
  }))
}
