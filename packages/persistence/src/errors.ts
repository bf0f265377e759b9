/** Typed persistence failures: only the ones a service can turn into a wire error; every other failure is a defect. */
import { Data, Effect } from "effect"
import type { SchemaError } from "effect/Schema"
import { isSqlError, type SqlError } from "effect/sql/SqlError"

/** A write collided with a unique constraint (named as in the schema), so the service can answer "already exists". */
export class UniqueViolation extends Data.TaggedError("UniqueViolation")<{
  readonly constraint: string
}> {}

/**
 * Keeps a PostgreSQL unique violation (23505) as a typed `UniqueViolation` and turns every other SQL or decoding
 * failure into a defect: they are infrastructure faults. On SQL a violation aborts the surrounding transaction, so
 * callers fail that transaction rather than carry on inside it.
 */
export const uniqueViolationOrDie = <A, R>(
  self: Effect.Effect<A, SqlError | SchemaError, R>
): Effect.Effect<A, UniqueViolation, R> =>
  Effect.catch(self, (error) =>
    isSqlError(error) && error.reason._tag === "UniqueViolation"
      ? Effect.fail(new UniqueViolation({ constraint: error.reason.constraint }))
      : Effect.die(error))
