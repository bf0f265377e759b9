/**
 * Terraform states (run-state.md §6): one row per (project, component, environment) with its lock and its current
 * version, and every stored version beside it. A change locks the state's row first (`lockForUpdate`, which creates it
 * when absent), so two clients locking or writing one state from any replica are served one after the other.
 */
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { CreatedBy } from "@cp/domain/runs"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { atomically } from "../Memory.ts"

/** One state: a component in an environment of a project of a workspace. */
export const TfStateKey = Schema.Struct({
  orgId: OrgId,
  projectId: ProjectId,
  component: Schema.String,
  environmentId: EnvironmentId
})
export type TfStateKey = typeof TfStateKey.Type

/** A row of `tfstates`: the current version (null when none or deleted), the last number used, and the lock. */
export const TfStateRow = Schema.Struct({
  ...TfStateKey.fields,
  currentVersion: Schema.NullOr(Schema.Int),
  lastVersion: Schema.Int,
  lockId: Schema.NullOr(Schema.String),
  lockInfo: Schema.NullOr(Schema.String),
  lockedAt: Schema.NullOr(Schema.Date),
  updatedAt: Schema.Date
})
export type TfStateRow = typeof TfStateRow.Type

/** What a listing shows of one stored version. */
export const TfVersionMeta = Schema.Struct({
  version: Schema.Int,
  serial: Schema.NullOr(Schema.Number),
  lineage: Schema.NullOr(Schema.String),
  size: Schema.Int,
  createdAt: Schema.Date,
  createdBy: CreatedBy
})
export type TfVersionMeta = typeof TfVersionMeta.Type

/** A row of `tfstate_versions`: the bytes as sent, kept until `purgeAfter` once the state is deleted. */
export interface TfVersionRow extends TfVersionMeta {
  readonly key: TfStateKey
  readonly content: Uint8Array
  readonly purgeAfter: Date | null
}

const Content = Schema.Struct({ content: Schema.Uint8Array })

const stateId = (key: TfStateKey) => JSON.stringify([key.projectId, key.component, key.environmentId])

export class TfStateRepo extends Context.Service<TfStateRepo, {
  /** The state's row, created empty when absent, locked until the transaction ends (call inside one). */
  readonly lockForUpdate: (key: TfStateKey, now: Date) => Effect.Effect<TfStateRow>
  /** The state's row, if it was ever written or locked. */
  readonly find: (key: TfStateKey) => Effect.Effect<Option.Option<TfStateRow>>
  /** Stores the row's version pointers and lock. */
  readonly save: (row: TfStateRow) => Effect.Effect<void>
  /** Stores a version (its number is the row's new `lastVersion`). */
  readonly insertVersion: (row: TfVersionRow) => Effect.Effect<void>
  /** The bytes of one version, if kept. */
  readonly content: (key: TfStateKey, version: number) => Effect.Effect<Option.Option<Uint8Array>>
  /** The state's versions, newest first. */
  readonly versions: (key: TfStateKey) => Effect.Effect<ReadonlyArray<TfVersionMeta>>
  /** Marks the state's versions for removal at `at` (those not marked already). */
  readonly markForPurge: (key: TfStateKey, at: Date) => Effect.Effect<void>
  /** Removes every version whose `purgeAfter` has passed. */
  readonly purgeExpired: (now: Date) => Effect.Effect<void>
  /** The project's states, by component then environment id. */
  readonly list: (project: { readonly orgId: OrgId; readonly projectId: ProjectId }) => Effect.Effect<
    ReadonlyArray<TfStateRow>
  >
}>()("@cp/persistence/state/TfStateRepo") {
  static readonly memory = Layer.sync(TfStateRepo, () => {
    const states = new Map<string, TfStateRow>()
    const versions = new Map<string, TfVersionRow>()
    const versionId = (key: TfStateKey, version: number) => `${stateId(key)}#${version}`
    const versionsOf = (key: TfStateKey) =>
      Array.from(versions.values()).filter((row) => stateId(row.key) === stateId(key))
        .sort((a, b) => b.version - a.version)
    return TfStateRepo.of({
      lockForUpdate: (key, now) =>
        atomically((changes) => {
          const found = states.get(stateId(key))
          if (found !== undefined) return Effect.succeed(found)
          const row: TfStateRow = {
            ...key,
            currentVersion: null,
            lastVersion: 0,
            lockId: null,
            lockInfo: null,
            lockedAt: null,
            updatedAt: now
          }
          changes.set(states, stateId(key), row)
          return Effect.succeed(row)
        }),
      find: (key) => Effect.sync(() => Option.fromUndefinedOr(states.get(stateId(key)))),
      save: (row) => atomically((changes) => Effect.sync(() => changes.set(states, stateId(row), row))),
      insertVersion: (row) =>
        atomically((changes) => Effect.sync(() => changes.set(versions, versionId(row.key, row.version), row))),
      content: (key, version) =>
        Effect.sync(() =>
          Option.map(Option.fromUndefinedOr(versions.get(versionId(key, version))), (row) => row.content)
        ),
      versions: (key) =>
        Effect.sync(() =>
          versionsOf(key).map(({ createdAt, createdBy, lineage, serial, size, version }) => ({
            version,
            serial,
            lineage,
            size,
            createdAt,
            createdBy
          }))
        ),
      markForPurge: (key, at) =>
        atomically((changes) =>
          Effect.sync(() => {
            for (const row of versionsOf(key)) {
              if (row.purgeAfter === null) {
                changes.set(versions, versionId(key, row.version), { ...row, purgeAfter: at })
              }
            }
          })
        ),
      purgeExpired: (now) =>
        atomically((changes) =>
          Effect.sync(() => {
            for (const [id, row] of versions) {
              if (row.purgeAfter !== null && row.purgeAfter < now) changes.delete(versions, id)
            }
          })
        ),
      list: ({ orgId, projectId }) =>
        Effect.sync(() =>
          Array.from(states.values()).filter((row) => row.orgId === orgId && row.projectId === projectId).sort((a, b) =>
            a.component < b.component
              ? -1
              : a.component > b.component
              ? 1
              : a.environmentId < b.environmentId
              ? -1
              : 1
          )
        )
    })
  })

  static readonly sql = Layer.effect(
    TfStateRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const decodeStates = Schema.decodeUnknownEffect(Schema.Array(TfStateRow))
      const decodeMeta = Schema.decodeUnknownEffect(Schema.Array(TfVersionMeta))
      const decodeContent = Schema.decodeUnknownEffect(Schema.Array(Content))
      const stateRows = (statement: Effect.Effect<unknown, unknown>) =>
        Effect.orDie(Effect.flatMap(statement, decodeStates))
      const where = (key: TfStateKey) =>
        sql`project_id = ${key.projectId} and component = ${key.component} and environment_id = ${key.environmentId}`
      return TfStateRepo.of({
        lockForUpdate: (key, now) =>
          Effect.flatMap(
            Effect.orDie(sql`
              insert into tfstates (org_id, project_id, component, environment_id, last_version, updated_at)
              values (${key.orgId}, ${key.projectId}, ${key.component}, ${key.environmentId}, 0, ${now})
              on conflict (project_id, component, environment_id) do nothing`),
            () =>
              Effect.flatMap(
                stateRows(sql`select * from tfstates where ${where(key)} for update`),
                (rows) =>
                  rows[0] === undefined ? Effect.die(new Error("the state row vanished")) : Effect.succeed(rows[0])
              )
          ),
        find: (key) =>
          Effect.map(
            stateRows(sql`select * from tfstates where ${where(key)} and org_id = ${key.orgId}`),
            (rows) => Option.fromUndefinedOr(rows[0])
          ),
        save: (row) =>
          Effect.orDie(sql`
            update tfstates set current_version = ${row.currentVersion}, last_version = ${row.lastVersion},
              lock_id = ${row.lockId}, lock_info = ${row.lockInfo}, locked_at = ${row.lockedAt},
              updated_at = ${row.updatedAt}
            where ${where(row)}`.pipe(Effect.asVoid)),
        insertVersion: (row) =>
          Effect.orDie(sql`
            insert into tfstate_versions (project_id, component, environment_id, version, serial, lineage, size,
              content, created_at, created_by, purge_after)
            values (${row.key.projectId}, ${row.key.component}, ${row.key.environmentId}, ${row.version},
              ${row.serial}, ${row.lineage}, ${row.size}, ${row.content}, ${row.createdAt}, ${sql.json(row.createdBy)},
              ${row.purgeAfter})`.pipe(Effect.asVoid)),
        content: (key, version) =>
          Effect.map(
            Effect.orDie(Effect.flatMap(
              sql`select content from tfstate_versions where ${where(key)} and version = ${version}`,
              decodeContent
            )),
            (rows) => Option.map(Option.fromUndefinedOr(rows[0]), (row) => row.content)
          ),
        versions: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select version, serial::float8 as serial, lineage, size, created_at, created_by from tfstate_versions
              where ${where(key)} order by version desc`,
            decodeMeta
          )),
        markForPurge: (key, at) =>
          Effect.orDie(
            sql`update tfstate_versions set purge_after = ${at} where ${where(key)} and purge_after is null`.pipe(
              Effect.asVoid
            )
          ),
        purgeExpired: (now) =>
          Effect.orDie(sql`delete from tfstate_versions where purge_after < ${now}`.pipe(Effect.asVoid)),
        list: ({ orgId, projectId }) =>
          stateRows(sql`
            select * from tfstates where org_id = ${orgId} and project_id = ${projectId}
            order by component, environment_id`)
      })
    })
  )
}
