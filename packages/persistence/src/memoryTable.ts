/**
 * Map-backed twins of the two SQL write shapes every memory repository needs: an insert guarded by unique
 * constraints and a conditional `update … where … returning`. Both run through `atomically`, so they are undone
 * with the surrounding memory transaction. Shared by every area.
 */
import { Effect, Option } from "effect"
import { UniqueViolation } from "./errors.ts"
import { atomically } from "./Memory.ts"

/** A unique constraint of a memory table: the name SQL reports for it and the value it keeps unique. */
export interface UniqueKey<Row> {
  readonly constraint: string
  readonly key: (row: Row) => string
}

/** The primary key of a table whose rows carry an `id`. */
export const primaryKey = <Row extends { readonly id: string }>(constraint: string): UniqueKey<Row> => ({
  constraint,
  key: (row) => row.id
})

/** Inserts `row` under `id` unless it collides with a stored row on one of `uniques`, failing as SQL would. */
export const insertUnique = <K, Row extends {}>(
  table: Map<K, Row>,
  id: K,
  row: Row,
  uniques: ReadonlyArray<UniqueKey<Row>>
): Effect.Effect<void, UniqueViolation> =>
  atomically((changes) => {
    for (const unique of uniques) {
      const key = unique.key(row)
      for (const stored of table.values()) {
        if (unique.key(stored) === key) return Effect.fail(new UniqueViolation({ constraint: unique.constraint }))
      }
    }
    changes.set(table, id, row)
    return Effect.void
  })

/**
 * Replaces the row under `id` by `change(row)` when that is Some and returns it; None when the row is missing or
 * `change` declines. The check and the write are one step, like a single SQL statement.
 */
export const updateRow = <K, Row extends {}>(
  table: Map<K, Row>,
  id: K,
  change: (row: Row) => Option.Option<Row>
): Effect.Effect<Option.Option<Row>> =>
  atomically((changes) => {
    const current = table.get(id)
    const next = current === undefined ? Option.none<Row>() : change(current)
    if (Option.isSome(next)) changes.set(table, id, next.value)
    return Effect.succeed(next)
  })

/** The memory twin of `set consumed_at = now where consumed_at is null and expires_at > now`: single-use tokens. */
export const consumeUnexpired =
  (now: Date) =>
  <Row extends { readonly consumedAt: Date | null; readonly expiresAt: Date }>(row: Row): Option.Option<Row> =>
    row.consumedAt === null && row.expiresAt > now ? Option.some({ ...row, consumedAt: now }) : Option.none()

/** The composite key of a multi-column unique constraint. */
export const compositeKey = (...parts: ReadonlyArray<string | null>): string => JSON.stringify(parts)
