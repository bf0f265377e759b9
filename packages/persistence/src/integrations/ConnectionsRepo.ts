/**
 * Integration connections. An installation id binds one live connection across all workspaces
 * (`integration_connections_installation_key`), and a provider account backs one live connection per workspace
 * (`integration_connections_account_key`); revoked rows stay readable and free both.
 */
import type { IntegrationConnectionId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { createdNewestFirst } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { ConnectionKey, ConnectionRow, InstallationKey, SetupStateConsumption } from "./rows.ts"

export const connectionInstallationConstraint = "integration_connections_installation_key"
export const connectionAccountConstraint = "integration_connections_account_key"

const bound = (row: ConnectionRow) => row.status !== "revoked"
const uniques: ReadonlyArray<UniqueKey<ConnectionRow>> = [
  primaryKey("integration_connections_pkey"),
  {
    constraint: connectionInstallationConstraint,
    key: (row) =>
      bound(row) && row.installationId !== null ? compositeKey(row.provider, row.installationId) : `free ${row.id}`
  },
  {
    constraint: connectionAccountConstraint,
    key: (row) =>
      bound(row) && row.externalAccountId !== null
        ? compositeKey(row.orgId, row.provider, row.externalAccountId)
        : `free ${row.id}`
  }
]

export class IntegrationConnectionsRepo extends Context.Service<IntegrationConnectionsRepo, {
  readonly insert: (row: ConnectionRow) => Effect.Effect<void, UniqueViolation>
  /** The connection with this id owned by this workspace (any status). */
  readonly find: (key: ConnectionKey) => Effect.Effect<Option.Option<ConnectionRow>>
  /** The connection with this id, whichever workspace owns it. */
  readonly findById: (connectionId: IntegrationConnectionId) => Effect.Effect<Option.Option<ConnectionRow>>
  /** The workspace's own connections, newest first. */
  readonly list: (orgId: ConnectionRow["orgId"]) => Effect.Effect<ReadonlyArray<ConnectionRow>>
  /** The connections of these (account-root) workspaces, newest first: what they may share with a child. */
  readonly listOwnedBy: (orgIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ConnectionRow>>
  /** The live (not revoked) connection bound to this installation, in any workspace. */
  readonly findByInstallation: (key: InstallationKey) => Effect.Effect<Option.Option<ConnectionRow>>
  /**
   * Marks the pending connection's setup state consumed, once and before it expires; the row, or None when the state
   * is not its current one, was used already, has expired, or the connection is no longer pending.
   */
  readonly consumeState: (consumption: SetupStateConsumption) => Effect.Effect<Option.Option<ConnectionRow>>
  /** Replaces the connection's mutable fields with `row`'s; None when it is gone; `UniqueViolation` on a binding. */
  readonly update: (row: ConnectionRow) => Effect.Effect<Option.Option<ConnectionRow>, UniqueViolation>
}>()("@cp/persistence/integrations/IntegrationConnectionsRepo") {
  static readonly memory = Layer.sync(IntegrationConnectionsRepo, () => {
    const table = new Map<IntegrationConnectionId, ConnectionRow>()
    const all = () => Array.from(table.values())
    return IntegrationConnectionsRepo.of({
      insert: (row) => insertUnique(table, row.id, row, uniques),
      find: ({ connectionId, orgId }) =>
        Effect.sync(() => Option.filter(Option.fromUndefinedOr(table.get(connectionId)), (row) => row.orgId === orgId)),
      findById: (connectionId) => Effect.sync(() => Option.fromUndefinedOr(table.get(connectionId))),
      list: (orgId) => Effect.sync(() => all().filter((row) => row.orgId === orgId).sort(createdNewestFirst)),
      listOwnedBy: (orgIds) =>
        Effect.sync(() => all().filter((row) => orgIds.includes(row.orgId)).sort(createdNewestFirst)),
      findByInstallation: ({ installationId, provider }) =>
        Effect.sync(() =>
          Option.fromUndefinedOr(
            all().find((row) => bound(row) && row.provider === provider && row.installationId === installationId)
          )
        ),
      consumeState: ({ at, connectionId, stateId }) =>
        updateRow(
          table,
          connectionId,
          (row) =>
            row.status === "pending" && row.stateId === stateId && row.stateConsumedAt === null &&
              row.stateExpiresAt !== null && row.stateExpiresAt > at
              ? Option.some({ ...row, stateConsumedAt: at })
              : Option.none()
        ),
      update: (row) =>
        atomically((changes) => {
          const current = table.get(row.id)
          if (current === undefined) return Effect.succeed(Option.none())
          const next: ConnectionRow = { ...row, createdAt: current.createdAt, orgId: current.orgId }
          for (const stored of table.values()) {
            if (stored.id === row.id) continue
            for (const unique of uniques) {
              if (unique.key(stored) === unique.key(next)) {
                return Effect.fail(new UniqueViolation({ constraint: unique.constraint }))
              }
            }
          }
          changes.set(table, row.id, next)
          return Effect.succeed(Option.some(next))
        })
    })
  })

  static readonly sql = Layer.effect(
    IntegrationConnectionsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return IntegrationConnectionsRepo.of({
        insert: insertRow(sql, "integration_connections", ConnectionRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: ConnectionKey,
            Result: ConnectionRow,
            execute: ({ connectionId, orgId }) =>
              sql`select * from integration_connections where id = ${connectionId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        findById: (connectionId) =>
          SqlSchema.findOneOption({
            Request: ConnectionKey.fields.connectionId,
            Result: ConnectionRow,
            execute: (id) => sql`select * from integration_connections where id = ${id}`
          })(connectionId).pipe(Effect.orDie),
        list: (orgId) =>
          SqlSchema.findAll({
            Request: ConnectionKey.fields.orgId,
            Result: ConnectionRow,
            execute: (id) =>
              sql`select * from integration_connections where org_id = ${id} order by created_at desc, id desc`
          })(orgId).pipe(Effect.orDie),
        listOwnedBy: (orgIds) =>
          orgIds.length === 0
            ? Effect.succeed([])
            : SqlSchema.findAll({
              Request: Schema.Array(Schema.String),
              Result: ConnectionRow,
              execute: (ids) =>
                sql`
                  select * from integration_connections where org_id in ${sql.in(ids)}
                  order by created_at desc, id desc`
            })(orgIds).pipe(Effect.orDie),
        findByInstallation: flow(
          SqlSchema.findOneOption({
            Request: InstallationKey,
            Result: ConnectionRow,
            execute: ({ installationId, provider }) =>
              sql`
                select * from integration_connections
                where provider = ${provider} and installation_id = ${installationId} and status <> 'revoked'`
          }),
          Effect.orDie
        ),
        consumeState: flow(
          SqlSchema.findOneOption({
            Request: SetupStateConsumption,
            Result: ConnectionRow,
            execute: ({ at, connectionId, stateId }) =>
              sql`
                update integration_connections set state_consumed_at = ${at}
                where id = ${connectionId} and state_id = ${stateId} and status = 'pending'
                  and state_consumed_at is null and state_expires_at > ${at}
                returning *`
          }),
          Effect.orDie
        ),
        update: flow(
          SqlSchema.findOneOption({
            Request: ConnectionRow,
            Result: ConnectionRow,
            execute: (row) =>
              sql`
                update integration_connections set
                  status = ${row.status},
                  share_mode = ${row.shareMode},
                  display_name = ${row.displayName},
                  external_account_login = ${row.externalAccountLogin},
                  external_account_type = ${row.externalAccountType},
                  external_account_id = ${row.externalAccountId},
                  installation_id = ${row.installationId},
                  repository_selection = ${row.repositorySelection},
                  permissions_json = ${row.permissionsJson},
                  connected_at = ${row.connectedAt},
                  revoked_at = ${row.revokedAt},
                  suspended_at = ${row.suspendedAt},
                  sealed_token = ${row.sealedToken},
                  wrapped_data_key = ${row.wrappedDataKey},
                  kek_id = ${row.kekId},
                  updated_at = ${row.updatedAt}
                where id = ${row.id}
                returning *`
          }),
          uniqueViolationOrDie
        )
      })
    })
  )
}
