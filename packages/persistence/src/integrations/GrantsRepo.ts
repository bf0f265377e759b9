/** Admission grants: which child workspaces may use a `granted` connection of their account. */
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { GrantKey, GrantRow } from "./rows.ts"

const uniques: ReadonlyArray<UniqueKey<GrantRow>> = [
  { constraint: "integration_grants_pkey", key: (row) => compositeKey(row.connectionId, row.workspaceOrgId) }
]

export class IntegrationGrantsRepo extends Context.Service<IntegrationGrantsRepo, {
  /** `UniqueViolation` when the workspace already holds a grant on the connection. */
  readonly insert: (row: GrantRow) => Effect.Effect<void, UniqueViolation>
  /** The connection's grants, newest first. */
  readonly list: (connectionId: GrantRow["connectionId"]) => Effect.Effect<ReadonlyArray<GrantRow>>
  /** The ids of the connections this workspace holds grants on. */
  readonly grantedTo: (orgId: GrantRow["workspaceOrgId"]) => Effect.Effect<ReadonlyArray<string>>
  /** Deletes the grant: the row it was, or None. */
  readonly remove: (key: GrantKey) => Effect.Effect<Option.Option<GrantRow>>
}>()("@cp/persistence/integrations/IntegrationGrantsRepo") {
  static readonly memory = Layer.sync(IntegrationGrantsRepo, () => {
    const table = new Map<string, GrantRow>()
    const all = () => Array.from(table.values())
    return IntegrationGrantsRepo.of({
      insert: (row) => insertUnique(table, compositeKey(row.connectionId, row.workspaceOrgId), row, uniques),
      list: (connectionId) =>
        Effect.sync(() =>
          all().filter((row) => row.connectionId === connectionId).sort((a, b) =>
            b.createdAt.getTime() - a.createdAt.getTime()
          )
        ),
      grantedTo: (orgId) =>
        Effect.sync(() => all().filter((row) => row.workspaceOrgId === orgId).map((row) => row.connectionId)),
      remove: ({ connectionId, workspaceOrgId }) =>
        atomically((changes) => {
          const key = compositeKey(connectionId, workspaceOrgId)
          const row = table.get(key)
          if (row !== undefined) changes.delete(table, key)
          return Effect.succeed(Option.fromUndefinedOr(row))
        })
    })
  })

  static readonly sql = Layer.effect(
    IntegrationGrantsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return IntegrationGrantsRepo.of({
        insert: insertRow(sql, "integration_grants", GrantRow),
        list: (connectionId) =>
          SqlSchema.findAll({
            Request: GrantKey.fields.connectionId,
            Result: GrantRow,
            execute: (id) => sql`select * from integration_grants where connection_id = ${id} order by created_at desc`
          })(connectionId).pipe(Effect.orDie),
        grantedTo: (orgId) =>
          SqlSchema.findAll({
            Request: GrantKey.fields.workspaceOrgId,
            Result: Schema.Struct({ connectionId: Schema.String }),
            execute: (id) => sql`select connection_id from integration_grants where workspace_org_id = ${id}`
          })(orgId).pipe(Effect.map((rows) => rows.map((row) => row.connectionId)), Effect.orDie),
        remove: flow(
          SqlSchema.findOneOption({
            Request: GrantKey,
            Result: GrantRow,
            execute: ({ connectionId, workspaceOrgId }) =>
              sql`
                delete from integration_grants
                where connection_id = ${connectionId} and workspace_org_id = ${workspaceOrgId}
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
