/**
 * The upload sweep (run-state.md §4 "Unfinished uploads are swept after `expiresAt`"): deletes expired uploads with
 * their parts' chunks, and orphan blobs (chunks of a transfer that died before it became an object or a part). Each
 * batch claims uploads with `for update skip locked`, so replicas sweeping together delete each upload once.
 */
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { ObjectsService } from "./service.ts"

/** Uploads (and orphan blobs) deleted per batch. */
export const UPLOAD_SWEEP_BATCH = 100
/** How often each replica sweeps: uploads live 24 hours. */
export const UPLOAD_SWEEP_INTERVAL = Duration.minutes(5)

export class UploadSweep extends Context.Service<UploadSweep, {
  /** One sweep: batches until nothing expired is left; how many uploads and blobs it deleted. */
  readonly runOnce: Effect.Effect<number>
}>()("@cp/server/UploadSweep") {
  static readonly layer = Layer.effect(
    UploadSweep,
    Effect.gen(function*() {
      const objects = yield* ObjectsService
      const runOnce = Effect.gen(function*() {
        let total = 0
        while (true) {
          const deleted = yield* objects.sweepExpired(UPLOAD_SWEEP_BATCH)
          total += deleted
          if (deleted === 0) return total
        }
      }).pipe(
        Effect.tap((total) => Effect.annotateCurrentSpan("sweep.deleted", total)),
        Effect.withSpan("UploadSweep.run", { root: true })
      )
      return UploadSweep.of({ runOnce })
    })
  )

  /** The background fiber: a sweep now and then every `UPLOAD_SWEEP_INTERVAL`, while the server's scope lives. */
  static readonly background = Layer.effectDiscard(Effect.gen(function*() {
    const sweep = yield* UploadSweep
    yield* sweep.runOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning("upload sweep failed", cause).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(UPLOAD_SWEEP_INTERVAL)),
      Effect.forkScoped
    )
  }))
}
