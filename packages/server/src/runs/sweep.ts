/**
 * The lease sweep (run-state.md §2 "Lease expiry"): marks `timed_out` every running job whose lease expired or that
 * ran past its `timeoutSeconds`. Each batch is one short transaction claiming lapsed jobs with `for update skip
 * locked`, so replicas sweeping together settle every lapsed job exactly once; a request meeting a lapsed lease first
 * settles it the same way.
 */
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { RunsService } from "./service.ts"

/** Lapsed jobs claimed per transaction. */
export const LEASE_SWEEP_BATCH = 50
/** How often each replica sweeps: leases are 10 to 600 seconds long. */
export const LEASE_SWEEP_INTERVAL = Duration.seconds(5)

export class LeaseSweep extends Context.Service<LeaseSweep, {
  /** One sweep: batches until no lapsed lease is left; how many jobs it timed out. */
  readonly runOnce: Effect.Effect<number>
}>()("@cp/server/LeaseSweep") {
  static readonly layer = Layer.effect(
    LeaseSweep,
    Effect.gen(function*() {
      const runs = yield* RunsService
      const runOnce = Effect.gen(function*() {
        let total = 0
        while (true) {
          const settled = yield* runs.sweepLapsed(LEASE_SWEEP_BATCH)
          total += settled
          if (settled === 0) return total
        }
      }).pipe(
        Effect.tap((total) => Effect.annotateCurrentSpan("sweep.timedOut", total)),
        Effect.withSpan("LeaseSweep.run", { root: true })
      )
      return LeaseSweep.of({ runOnce })
    })
  )

  /** The background fiber: a sweep now and then every `LEASE_SWEEP_INTERVAL`, while the server's scope lives. */
  static readonly background = Layer.effectDiscard(Effect.gen(function*() {
    const sweep = yield* LeaseSweep
    yield* sweep.runOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning("lease sweep failed", cause).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(LEASE_SWEEP_INTERVAL)),
      Effect.forkScoped
    )
  }))
}
