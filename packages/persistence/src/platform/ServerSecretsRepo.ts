/** Process-wide secrets generated once per database, so its replicas agree (dev/test KEK, token signing key). */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { atomically } from "../Memory.ts"

/** Named secrets that are created on first use and never change afterwards. */
export class ServerSecretsRepo extends Context.Service<ServerSecretsRepo, {
  /** The stored value of `name`; when there is none, stores `generate()`, unless another process won the race. */
  readonly getOrCreate: (name: string, generate: () => string) => Effect.Effect<string>
}>()("@cp/persistence/platform/ServerSecretsRepo") {
  /** Secrets that live as long as the process. */
  static readonly memory = Layer.sync(ServerSecretsRepo, () => {
    const secrets = new Map<string, string>()
    return ServerSecretsRepo.of({
      getOrCreate: (name, generate) =>
        atomically((changes) => {
          const existing = secrets.get(name)
          if (existing !== undefined) return Effect.succeed(existing)
          const value = generate()
          changes.set(secrets, name, value)
          return Effect.succeed(value)
        })
    })
  })

  /** Secrets in `server_secrets`: the first insert wins and everyone reads the winner back. */
  static readonly sql = Layer.effect(
    ServerSecretsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const selectValue = (name: string) => sql`select value from server_secrets where name = ${name}`
      const find = SqlSchema.findOneOption({ Request: Schema.String, Result: SecretRow, execute: selectValue })
      // After the insert a row exists: ours, or the one a racing process committed first.
      const findCreated = SqlSchema.findOne({ Request: Schema.String, Result: SecretRow, execute: selectValue })
      const insertIfAbsent = SqlSchema.void({
        Request: NamedSecret,
        execute: (secret) => sql`insert into server_secrets ${sql.insert(secret)} on conflict (name) do nothing`
      })

      const getOrCreate = (name: string, generate: () => string) =>
        Effect.flatMap(
          find(name),
          Option.match({
            onSome: (row) => Effect.succeed(row.value),
            onNone: () =>
              insertIfAbsent({ name, value: generate() }).pipe(
                Effect.andThen(findCreated(name)),
                Effect.map((row) => row.value)
              )
          })
        )

      return ServerSecretsRepo.of({
        getOrCreate: (name, generate) =>
          getOrCreate(name, generate).pipe(Effect.orDie, Effect.withSpan("ServerSecretsRepo.getOrCreate"))
      })
    })
  )
}

const SecretRow = Schema.Struct({ value: Schema.String })
const NamedSecret = Schema.Struct({ name: Schema.String, value: Schema.String })
