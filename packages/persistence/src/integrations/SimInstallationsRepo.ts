/**
 * The development simulator's app installations (`/dev/scmhost`, integrations-agents.md §1): one per provider
 * account, created on the first "Install" and touched (`updatedAt`) on every later one, as GitHub keeps one
 * installation of an app per account. Kept in the database so every process on one database sees the same ones.
 */
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { atomically } from "../Memory.ts"
import { SimInstall, SimInstallationRow } from "./rows.ts"

export class SimInstallationsRepo extends Context.Service<SimInstallationsRepo, {
  /** Installs on the account: a new installation (with `id`), or the account's existing one with `updatedAt` = at. */
  readonly install: (install: SimInstall) => Effect.Effect<SimInstallationRow>
  readonly find: (id: string) => Effect.Effect<Option.Option<SimInstallationRow>>
}>()("@cp/persistence/integrations/SimInstallationsRepo") {
  static readonly memory = Layer.sync(SimInstallationsRepo, () => {
    const table = new Map<string, SimInstallationRow>()
    return SimInstallationsRepo.of({
      install: ({ accountId, accountLogin, at, id }) =>
        atomically((changes) => {
          const existing = Array.from(table.values()).find((row) => row.accountId === accountId)
          const row: SimInstallationRow = existing === undefined
            ? { id, accountId, accountLogin, accountType: "Organization", createdAt: at, updatedAt: at }
            : { ...existing, updatedAt: at }
          changes.set(table, row.id, row)
          return Effect.succeed(row)
        }),
      find: (id) => Effect.sync(() => Option.fromUndefinedOr(table.get(id)))
    })
  })

  static readonly sql = Layer.effect(
    SimInstallationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return SimInstallationsRepo.of({
        install: flow(
          SqlSchema.findOne({
            Request: SimInstall,
            Result: SimInstallationRow,
            execute: ({ accountId, accountLogin, at, id }) =>
              sql`
                insert into dev_scmhost_installations
                  (id, account_id, account_login, account_type, created_at, updated_at)
                values (${id}, ${accountId}, ${accountLogin}, 'Organization', ${at}, ${at})
                on conflict (account_id) do update set updated_at = excluded.updated_at
                returning *`
          }),
          Effect.orDie
        ),
        find: (id) =>
          SqlSchema.findOneOption({
            Request: SimInstallationRow.fields.id,
            Result: SimInstallationRow,
            execute: (installationId) => sql`select * from dev_scmhost_installations where id = ${installationId}`
          })(id).pipe(Effect.orDie)
      })
    })
  )
}
