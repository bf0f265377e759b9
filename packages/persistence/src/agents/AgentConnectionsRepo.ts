/**
 * Agent provider connections of workspaces. The repository stores only what it is handed: the key sealed under a data
 * key and that data key wrapped under the KEK; sealing, wrapping and opening are the server's (it holds the KEK).
 */
import type { AgentConnectionId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { createdNewestFirst } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import {
  AgentConnectionKey,
  AgentConnectionRow,
  AgentConnectionShred,
  AgentConnectionsQuery,
  AgentDataKeyRewrap,
  AgentWrappedKey,
  AgentWrappedKeysQuery
} from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a second live connection with one (provider, name). */
export const agentConnectionsNameConstraint = "agent_connections_name_key"

const liveName = (row: AgentConnectionRow) =>
  row.deletedAt === null ? compositeKey(row.orgId, row.provider, row.name) : `deleted ${row.id}`

const uniques: ReadonlyArray<UniqueKey<AgentConnectionRow>> = [
  primaryKey("agent_connections_pkey"),
  { constraint: agentConnectionsNameConstraint, key: liveName }
]

export class AgentConnectionsRepo extends Context.Service<AgentConnectionsRepo, {
  /** `UniqueViolation` on `agent_connections_name_key` when a live connection has this (provider, name). */
  readonly insert: (row: AgentConnectionRow) => Effect.Effect<void, UniqueViolation>
  /** The live connection with this id in this workspace. */
  readonly find: (key: AgentConnectionKey) => Effect.Effect<Option.Option<AgentConnectionRow>>
  /** The workspace's live connections (of one provider when given), newest first. */
  readonly list: (query: AgentConnectionsQuery) => Effect.Effect<ReadonlyArray<AgentConnectionRow>>
  /**
   * Replaces a live connection's mutable fields (name, config, hint, status, custody) with `row`'s; None unless it is
   * live in that workspace; `UniqueViolation` when the new name is taken.
   */
  readonly update: (row: AgentConnectionRow) => Effect.Effect<Option.Option<AgentConnectionRow>, UniqueViolation>
  /**
   * Crypto-shredding: destroys the sealed key and its wrapped data key and marks the connection deleted, in one
   * statement; the final row, or None unless it was live.
   */
  readonly shred: (shred: AgentConnectionShred) => Effect.Effect<Option.Option<AgentConnectionRow>>
  /**
   * Up to `limit` wrapped data keys (any workspace) not wrapped under `kekId`, in id order after `afterId`, locked for
   * this transaction (`skip locked`: another rotation's batch is left to it).
   */
  readonly claimWrappedNotUnder: (query: AgentWrappedKeysQuery) => Effect.Effect<ReadonlyArray<AgentWrappedKey>>
  /** Stores a re-wrapped data key unless it was re-wrapped or shredded meanwhile; whether it was stored. */
  readonly rewrap: (rewrap: AgentDataKeyRewrap) => Effect.Effect<boolean>
  /** How many data keys are not wrapped under `kekId`. */
  readonly countNotUnder: (kekId: string) => Effect.Effect<number>
}>()("@cp/persistence/agents/AgentConnectionsRepo") {
  /** Connections in memory, for fast deterministic tests. */
  static readonly memory = Layer.sync(AgentConnectionsRepo, () => {
    const table = new Map<AgentConnectionId, AgentConnectionRow>()
    const live = ({ orgId, connectionId }: AgentConnectionKey) =>
      Option.filter(
        Option.fromUndefinedOr(table.get(connectionId)),
        (row) => row.orgId === orgId && row.deletedAt === null
      )
    const wrappedNotUnder = (kekId: string) =>
      Array.from(table.values()).filter((row) => row.wrappedDataKey !== null && row.kekId !== kekId)
    return AgentConnectionsRepo.of({
      insert: (row) => insertUnique(table, row.id, row, uniques),
      find: (key) => Effect.sync(() => live(key)),
      list: ({ orgId, provider }) =>
        Effect.sync(() =>
          Array.from(table.values())
            .filter((row) =>
              row.orgId === orgId && row.deletedAt === null && (provider === null || row.provider === provider)
            )
            .sort(createdNewestFirst)
        ),
      update: (row) =>
        atomically((changes) => {
          const current = live({ orgId: row.orgId, connectionId: row.id })
          if (Option.isNone(current)) return Effect.succeed(Option.none())
          const next: AgentConnectionRow = { ...current.value, ...row, createdAt: current.value.createdAt }
          for (const stored of table.values()) {
            if (stored.id !== row.id && liveName(stored) === liveName(next)) {
              return Effect.fail(new UniqueViolation({ constraint: agentConnectionsNameConstraint }))
            }
          }
          changes.set(table, row.id, next)
          return Effect.succeed(Option.some(next))
        }),
      shred: ({ at, ...key }) =>
        updateRow(table, key.connectionId, (row) =>
          live(key).pipe(
            Option.map(() => ({ ...row, sealedKey: null, wrappedDataKey: null, deletedAt: at, updatedAt: at }))
          )),
      claimWrappedNotUnder: ({ afterId, kekId, limit }) =>
        Effect.sync(() =>
          wrappedNotUnder(kekId).filter((row) => row.id > afterId).sort((a, b) => a.id < b.id ? -1 : 1).slice(
            0,
            limit
          ).flatMap((row) =>
            row.wrappedDataKey === null || row.kekId === null
              ? []
              : [{ id: row.id, wrappedDataKey: row.wrappedDataKey, kekId: row.kekId }]
          )
        ),
      rewrap: ({ id, kekId, previousKekId, wrappedDataKey }) =>
        Effect.map(
          updateRow(table, id, (row) =>
            row.wrappedDataKey !== null && row.kekId === previousKekId
              ? Option.some({ ...row, wrappedDataKey, kekId })
              : Option.none()),
          Option.isSome
        ),
      countNotUnder: (kekId) => Effect.sync(() => wrappedNotUnder(kekId).length)
    })
  })

  /** Connections in the `agent_connections` table. */
  static readonly sql = Layer.effect(
    AgentConnectionsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return AgentConnectionsRepo.of({
        insert: insertRow(sql, "agent_connections", AgentConnectionRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: AgentConnectionKey,
            Result: AgentConnectionRow,
            execute: ({ orgId, connectionId }) =>
              sql`
                select * from agent_connections
                where id = ${connectionId} and org_id = ${orgId} and deleted_at is null`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: AgentConnectionsQuery,
            Result: AgentConnectionRow,
            execute: ({ orgId, provider }) =>
              sql`
                select * from agent_connections
                where org_id = ${orgId} and deleted_at is null
                  ${provider === null ? sql`` : sql`and provider = ${provider}`}
                order by created_at desc, id desc`
          }),
          Effect.orDie
        ),
        update: flow(
          SqlSchema.findOneOption({
            Request: AgentConnectionRow,
            Result: AgentConnectionRow,
            execute: (row) =>
              sql`
                update agent_connections set
                  name = ${row.name},
                  config_json = ${row.configJson},
                  key_hint = ${row.keyHint},
                  status = ${row.status},
                  last_verified_at = ${row.lastVerifiedAt},
                  sealed_key = ${row.sealedKey},
                  wrapped_data_key = ${row.wrappedDataKey},
                  kek_id = ${row.kekId},
                  updated_at = ${row.updatedAt}
                where id = ${row.id} and org_id = ${row.orgId} and deleted_at is null
                returning *`
          }),
          uniqueViolationOrDie
        ),
        shred: flow(
          SqlSchema.findOneOption({
            Request: AgentConnectionShred,
            Result: AgentConnectionRow,
            execute: ({ orgId, connectionId, at }) =>
              sql`
                update agent_connections set
                  sealed_key = null, wrapped_data_key = null, deleted_at = ${at}, updated_at = ${at}
                where id = ${connectionId} and org_id = ${orgId} and deleted_at is null
                returning *`
          }),
          Effect.orDie
        ),
        claimWrappedNotUnder: flow(
          SqlSchema.findAll({
            Request: AgentWrappedKeysQuery,
            Result: AgentWrappedKey,
            execute: ({ afterId, kekId, limit }) =>
              sql`
                select id, wrapped_data_key, kek_id from agent_connections
                where wrapped_data_key is not null and kek_id <> ${kekId} and id > ${afterId}
                order by id
                limit ${limit}
                for update skip locked`
          }),
          Effect.orDie
        ),
        rewrap: flow(
          SqlSchema.findAll({
            Request: AgentDataKeyRewrap,
            Result: AgentWrappedKey,
            execute: ({ id, kekId, previousKekId, wrappedDataKey }) =>
              sql`
                update agent_connections set wrapped_data_key = ${wrappedDataKey}, kek_id = ${kekId}
                where id = ${id} and kek_id = ${previousKekId} and wrapped_data_key is not null
                returning id, wrapped_data_key, kek_id`
          }),
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        ),
        countNotUnder: (kekId) =>
          sql<{ n: number }>`
            select count(*)::int as n from agent_connections where wrapped_data_key is not null and kek_id <> ${kekId}`
            .pipe(Effect.map((rows) => rows[0]?.n ?? 0), Effect.orDie)
      })
    })
  )
}
