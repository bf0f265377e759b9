/**
 * The idle sweep (spec: States and transitions, environment "background sweep"): archives active environments whose
 * last push (or creation, when never used) is older than the retention window. Each batch is one short transaction
 * that claims its rows with `for update skip locked` and records `environment.archived` (actor system) for each, so
 * replicas sweeping at the same time archive every environment exactly once.
 */
import { EnvironmentsRepo, Transactor } from "@cp/persistence"
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../platform/config.ts"
import { EventLog, systemActor } from "../platform/events.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { recordEnvironmentArchived } from "./service.ts"

/** Rows claimed per transaction: short transactions, short locks. */
export const SWEEP_BATCH_SIZE = 100
/** How often each replica sweeps. */
export const SWEEP_INTERVAL = Duration.hours(1)

const DAY_MS = 24 * 60 * 60 * 1000

export class EnvironmentSweep extends Context.Service<EnvironmentSweep, {
  /** One sweep: batches until nothing idle is left; how many environments this call archived. */
  readonly runOnce: Effect.Effect<number>
}>()("@cp/server/EnvironmentSweep") {
  static readonly layer = Layer.effect(
    EnvironmentSweep,
    Effect.gen(function*() {
      const environments = yield* EnvironmentsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const { environmentRetentionDays } = yield* AppConfig

      const batch = tx.withTransaction(Effect.gen(function*() {
        const now = yield* currentDate
        const cutoff = new Date(now.getTime() - environmentRetentionDays * DAY_MS)
        const archived = yield* environments.archiveIdle({ cutoff, now, limit: SWEEP_BATCH_SIZE })
        for (const row of archived) yield* recordEnvironmentArchived(events, systemActor, row, "idle")
        return archived.length
      }))

      const runOnce = Effect.gen(function*() {
        let total = 0
        while (true) {
          const count = yield* batch
          total += count
          if (count < SWEEP_BATCH_SIZE) return total
        }
      }).pipe(
        Effect.tap((total) => Effect.annotateCurrentSpan("sweep.archived", total)),
        Effect.withSpan("EnvironmentSweep.run", { root: true })
      )
      return EnvironmentSweep.of({ runOnce })
    })
  )

  /** The background fiber: a sweep now and then every `SWEEP_INTERVAL`, for as long as the server's scope lives. */
  static readonly background = Layer.effectDiscard(Effect.gen(function*() {
    const sweep = yield* EnvironmentSweep
    yield* sweep.runOnce.pipe(
      // A failed run (database away) is logged and retried at the next tick; it never stops the schedule.
      Effect.catchCause((cause) => Effect.logWarning("environment sweep failed", cause).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(SWEEP_INTERVAL)),
      Effect.forkScoped
    )
  }))
}
