/** Shared by the upsert-then-read-back statements of the platform repositories. */
import { Effect } from "effect"

const MAX_ATTEMPTS = 5

/**
 * Repeats a single-statement "upsert, else read the existing row" until it returns a row. The read-back half runs on
 * the statement's snapshot, so when a competing replica commits the row between snapshot and upsert the statement
 * sees neither; nothing was written in that case, so running it again is safe and sees the committed row.
 */
export const retryUntilAnswered = <A, E, R>(
  statement: Effect.Effect<ReadonlyArray<A>, E, R>,
  what: string
): Effect.Effect<A, E, R> => {
  const attempt = (remaining: number): Effect.Effect<A, E, R> =>
    Effect.flatMap(statement, (rows) => {
      const [row] = rows
      if (row !== undefined) return Effect.succeed(row)
      return remaining > 1
        ? attempt(remaining - 1)
        : Effect.die(new Error(`${what}: no row after ${MAX_ATTEMPTS} attempts under contention`))
    })
  return attempt(MAX_ATTEMPTS)
}
