/** Whether the database answers: the health route's readiness check, on either persistence flavour. */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

export class DatabaseHealth extends Context.Service<DatabaseHealth, {
  /** Fails when the database does not answer a trivial query. */
  readonly ping: Effect.Effect<void, unknown>
}>()("@cp/persistence/platform/DatabaseHealth") {
  static readonly sql = Layer.effect(
    DatabaseHealth,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return DatabaseHealth.of({ ping: Effect.asVoid(sql`select 1`) })
    })
  )

  /** Memory repositories have no database that could be down. */
  static readonly memory = Layer.succeed(DatabaseHealth)({ ping: Effect.void })
}
