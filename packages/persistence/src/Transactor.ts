/** Runs a service's mutation and its event-log row as one unit of work, on SQL or in memory. */
import { Context, Effect, Layer, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import { isSqlError } from "effect/sql/SqlError"
import { UndoJournal, undoOnFailure } from "./Memory.ts"

/** All-or-nothing execution; nested calls are savepoints (SQL) or journal marks (memory). */
export class Transactor extends Context.Service<Transactor, {
  readonly withTransaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Inside `withTransaction`: waits until no other transaction holds `key`, then holds it until this transaction
   * ends (a transaction-scoped advisory lock), so read-then-write steps under one key run one at a time.
   */
  readonly lock: (key: string) => Effect.Effect<void>
}>()("@cp/persistence/Transactor") {
  /** `sql.withTransaction`; a failure to begin, commit or roll back is an infrastructure defect. */
  static readonly sql = Layer.effect(
    Transactor,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return Transactor.of({
        withTransaction: (self) =>
          Effect.catch(
            sql.withTransaction(self),
            (error) => isSqlError(error) ? Effect.die(error) : Effect.fail(error)
          ),
        // A 64-bit hash of the key: two keys sharing a hash only wait for each other, they never skip a lock.
        lock: (key) => Effect.orDie(sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.pipe(Effect.asVoid))
      })
    })
  )

  /** One transaction at a time over the memory repositories, undone through the journal when it fails. */
  static readonly memory = Layer.effect(
    Transactor,
    Effect.map(Semaphore.make(1), (oneAtATime) =>
      Transactor.of({
        withTransaction: (self) =>
          Effect.withFiber((fiber) => {
            const outer = fiber.getRef(UndoJournal)
            return outer === undefined ? oneAtATime.withPermit(undoOnFailure(self, [])) : undoOnFailure(self, outer)
          }),
        // Memory transactions already run one at a time.
        lock: () => Effect.void
      }))
  )
}
