/**
 * A request's deadline: past it the caller gets an answer at once, while the work is interrupted in the background.
 * `Effect.timeout` would wait for the interrupted work's finalizers, and on a database that stopped answering those
 * wait too (a transaction's rollback, a statement's cancel): the answer would be as late as the hang.
 */
import { type Context, Effect, Fiber } from "effect"

/** How long a request may take before it answers 503 `service_unavailable` (the contract allows 10 s). */
export const REQUEST_DEADLINE_MS = 8_000

/**
 * Runs `self` in a fiber of its own; when it has not finished after `millis`, answers with `onTimeout` and interrupts
 * it without waiting. One fiber and one timer per call: cheap enough for every request.
 */
export const withDeadline = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  millis: number,
  onTimeout: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.context<R>(), (context: Context.Context<R>) =>
    Effect.callback<A, E, R>((resume) => {
      const work = Effect.runForkWith(context)(self)
      const done = work.pollUnsafe()
      if (done !== undefined) return resume(done)
      let answered = false
      const timer = setTimeout(() => {
        answered = true
        removeObserver()
        work.interruptUnsafe()
        resume(onTimeout)
      }, millis)
      const removeObserver = work.addObserver((exit) => {
        clearTimeout(timer)
        if (!answered) resume(exit)
      })
      // The caller went away (or the server stops): stop the work too, and wait for it as usual.
      return Effect.suspend(() => {
        clearTimeout(timer)
        return answered ? Effect.void : Fiber.interrupt(work)
      })
    }))
