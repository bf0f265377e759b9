/**
 * The small steps every area service takes, written once: the current time as a `Date`, and a lookup that fails with
 * the area's own error (its 404) when it finds nothing. Ids come from `mint` (`ids.ts`), list pages from `keysetPage`
 * (`pagination.ts`).
 */
import { Clock, Effect, Option } from "effect"

/** The current time from `Clock` (so `TestClock` drives it), as the `Date` rows and events carry. */
export const currentDate: Effect.Effect<Date> = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/**
 * The value a lookup found, or `onNone()`'s failure when it found nothing: `repo.find(key).pipe(orFail(() =>
 * teamNotFound(teamId)))`.
 */
export const orFail =
  <E>(onNone: () => E) => <A, E1, R>(lookup: Effect.Effect<Option.Option<A>, E1, R>): Effect.Effect<A, E | E1, R> =>
    Effect.flatMap(lookup, (found) => Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(onNone()))
