/**
 * Settings and feature flags: one repository for the configuration area. A row belongs to exactly one scope
 * (`ConfigScope`); keys are unique per scope (`UniqueViolation` on `settings_scope_key` / `feature_flags_scope_key`).
 */
import { FeatureFlagId, SettingId } from "@cp/domain/config"
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { idPosition, keyAfter, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { type ConfigPageWindow, type ConfigScope, FeatureFlagRow, SettingRow } from "./rows.ts"

export const settingsKeyConstraint = "settings_scope_key"
export const featureFlagsKeyConstraint = "feature_flags_scope_key"

const scopeKeyOf = (row: ConfigScope & { readonly key: string }) =>
  `${row.orgId} ${row.projectId ?? ""} ${row.environmentId ?? ""} ${row.key}`

const inScope = (scope: ConfigScope) => (row: ConfigScope) =>
  row.orgId === scope.orgId && row.projectId === scope.projectId && row.environmentId === scope.environmentId

const settingUniques: ReadonlyArray<UniqueKey<SettingRow>> = [
  primaryKey("settings_pkey"),
  { constraint: settingsKeyConstraint, key: scopeKeyOf }
]
const flagUniques: ReadonlyArray<UniqueKey<FeatureFlagRow>> = [
  primaryKey("feature_flags_pkey"),
  { constraint: featureFlagsKeyConstraint, key: scopeKeyOf }
]

const ScopeRequest = Schema.Struct({
  orgId: OrgId,
  projectId: Schema.NullOr(Schema.String),
  environmentId: Schema.NullOr(Schema.String)
})
const PageRequest = Schema.Struct({
  ...ScopeRequest.fields,
  limit: Schema.Int,
  after: Schema.optionalKey(Schema.UndefinedOr(Schema.Struct({ at: Schema.Date, key: Schema.String })))
})
const SettingKey = Schema.Struct({ ...ScopeRequest.fields, id: SettingId })
const FlagKey = Schema.Struct({ ...ScopeRequest.fields, id: FeatureFlagId })
const KeyLookup = Schema.Struct({ orgId: OrgId, key: Schema.String })

export class ConfigRepo extends Context.Service<ConfigRepo, {
  /** `UniqueViolation` on `settings_scope_key` when the scope already has a setting with that key. */
  readonly insertSetting: (row: SettingRow) => Effect.Effect<void, UniqueViolation>
  /** The setting with this id at exactly this scope; None otherwise. */
  readonly findSetting: (scope: ConfigScope, id: SettingId) => Effect.Effect<Option.Option<SettingRow>>
  /** Up to `limit` settings of exactly this scope strictly after `after`, newest first (createdAt desc, id desc). */
  readonly listSettings: (scope: ConfigScope, window: ConfigPageWindow) => Effect.Effect<ReadonlyArray<SettingRow>>
  /** Every setting of the workspace with this key, at any of its scopes. */
  readonly settingsWithKey: (orgId: OrgId, key: string) => Effect.Effect<ReadonlyArray<SettingRow>>
  /** Replaces the stored row with the same id and scope; None when it is not there. */
  readonly updateSetting: (row: SettingRow) => Effect.Effect<Option.Option<SettingRow>>
  /** `UniqueViolation` on `feature_flags_scope_key` when the scope already has a flag with that key. */
  readonly insertFlag: (row: FeatureFlagRow) => Effect.Effect<void, UniqueViolation>
  readonly findFlag: (scope: ConfigScope, id: FeatureFlagId) => Effect.Effect<Option.Option<FeatureFlagRow>>
  readonly listFlags: (scope: ConfigScope, window: ConfigPageWindow) => Effect.Effect<ReadonlyArray<FeatureFlagRow>>
  readonly updateFlag: (row: FeatureFlagRow) => Effect.Effect<Option.Option<FeatureFlagRow>>
}>()("@cp/persistence/config/ConfigRepo") {
  /** Configuration in memory, for fast deterministic tests. */
  static readonly memory = Layer.sync(ConfigRepo, () => {
    const settings = new Map<string, SettingRow>()
    const flags = new Map<string, FeatureFlagRow>()
    const findIn = <R extends ConfigScope & { readonly id: string }>(
      map: Map<string, R>,
      scope: ConfigScope,
      id: string
    ) => Option.filter(Option.fromUndefinedOr(map.get(id)), inScope(scope))
    const replace = <R extends ConfigScope & { readonly id: string }>(map: Map<string, R>, row: R) =>
      atomically((changes) => {
        const current = findIn(map, row, row.id)
        if (Option.isNone(current)) return Effect.succeed(Option.none<R>())
        changes.set(map, row.id, row)
        return Effect.succeed(Option.some(row))
      })
    return ConfigRepo.of({
      insertSetting: Effect.fn("ConfigRepo.insertSetting")((row: SettingRow) =>
        insertUnique(settings, row.id, row, settingUniques)
      ),
      findSetting: Effect.fn("ConfigRepo.findSetting")(function*(scope: ConfigScope, id: SettingId) {
        return findIn(settings, scope, id)
      }),
      listSettings: Effect.fn("ConfigRepo.listSettings")(function*(scope: ConfigScope, window: ConfigPageWindow) {
        return windowOf(Array.from(settings.values()).filter(inScope(scope)), idPosition, window)
      }),
      settingsWithKey: Effect.fn("ConfigRepo.settingsWithKey")(function*(orgId: OrgId, key: string) {
        return Array.from(settings.values()).filter((row) => row.orgId === orgId && row.key === key)
      }),
      updateSetting: Effect.fn("ConfigRepo.updateSetting")((row: SettingRow) => replace(settings, row)),
      insertFlag: Effect.fn("ConfigRepo.insertFlag")((row: FeatureFlagRow) =>
        insertUnique(flags, row.id, row, flagUniques)
      ),
      findFlag: Effect.fn("ConfigRepo.findFlag")(function*(scope: ConfigScope, id: FeatureFlagId) {
        return findIn(flags, scope, id)
      }),
      listFlags: Effect.fn("ConfigRepo.listFlags")(function*(scope: ConfigScope, window: ConfigPageWindow) {
        return windowOf(Array.from(flags.values()).filter(inScope(scope)), idPosition, window)
      }),
      updateFlag: Effect.fn("ConfigRepo.updateFlag")((row: FeatureFlagRow) => replace(flags, row))
    })
  })

  /** Configuration in the `settings` and `feature_flags` tables. */
  static readonly sql = Layer.effect(
    ConfigRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const scopeIs = (
        scope: { readonly orgId: string; readonly projectId: string | null; readonly environmentId: string | null }
      ) =>
        sql.and([
          sql`org_id = ${scope.orgId}`,
          sql`project_id is not distinct from ${scope.projectId}`,
          sql`environment_id is not distinct from ${scope.environmentId}`
        ])
      const pageOf = (table: string, { after, limit, ...scope }: typeof PageRequest.Encoded) =>
        sql`
          select * from ${sql(table)}
          where ${sql.and([scopeIs(scope), ...keyAfter(sql, after)])}
          order by created_at desc, id desc
          limit ${limit}`

      const insertSetting = SqlSchema.void({
        Request: SettingRow,
        execute: (row) => sql`insert into settings ${sql.insert(row)}`
      })
      const findSetting = SqlSchema.findOneOption({
        Request: SettingKey,
        Result: SettingRow,
        execute: ({ id, ...scope }) => sql`select * from settings where id = ${id} and ${scopeIs(scope)}`
      })
      const listSettings = SqlSchema.findAll({
        Request: PageRequest,
        Result: SettingRow,
        execute: (request) => pageOf("settings", request)
      })
      const settingsWithKey = SqlSchema.findAll({
        Request: KeyLookup,
        Result: SettingRow,
        execute: ({ orgId, key }) => sql`select * from settings where org_id = ${orgId} and key = ${key}`
      })
      const updateSetting = SqlSchema.findOneOption({
        Request: SettingRow,
        Result: SettingRow,
        execute: (row) =>
          sql`
            update settings set
              value_json = ${row.valueJson},
              value_type = ${row.valueType},
              visibility = ${row.visibility},
              overridable = ${row.overridable},
              description = ${row.description},
              updated_at = ${row.updatedAt}
            where id = ${row.id} and ${scopeIs(row)}
            returning *`
      })
      const insertFlag = SqlSchema.void({
        Request: FeatureFlagRow,
        execute: (row) => sql`insert into feature_flags ${sql.insert(row)}`
      })
      const findFlag = SqlSchema.findOneOption({
        Request: FlagKey,
        Result: FeatureFlagRow,
        execute: ({ id, ...scope }) => sql`select * from feature_flags where id = ${id} and ${scopeIs(scope)}`
      })
      const listFlags = SqlSchema.findAll({
        Request: PageRequest,
        Result: FeatureFlagRow,
        execute: (request) => pageOf("feature_flags", request)
      })
      const updateFlag = SqlSchema.findOneOption({
        Request: FeatureFlagRow,
        Result: FeatureFlagRow,
        execute: (row) =>
          sql`
            update feature_flags set
              enabled = ${row.enabled},
              value_json = ${row.valueJson},
              description = ${row.description},
              updated_at = ${row.updatedAt}
            where id = ${row.id} and ${scopeIs(row)}
            returning *`
      })
      const scopeOf = (scope: ConfigScope) => ({
        orgId: scope.orgId,
        projectId: scope.projectId,
        environmentId: scope.environmentId
      })

      return ConfigRepo.of({
        insertSetting: Effect.fn("ConfigRepo.insertSetting")((row: SettingRow) =>
          uniqueViolationOrDie(insertSetting(row))
        ),
        findSetting: Effect.fn("ConfigRepo.findSetting")((scope: ConfigScope, id: SettingId) =>
          Effect.orDie(findSetting({ ...scopeOf(scope), id }))
        ),
        listSettings: Effect.fn("ConfigRepo.listSettings")((scope: ConfigScope, window: ConfigPageWindow) =>
          Effect.orDie(listSettings({ ...scopeOf(scope), limit: window.limit, after: window.after }))
        ),
        settingsWithKey: Effect.fn("ConfigRepo.settingsWithKey")((orgId: OrgId, key: string) =>
          Effect.orDie(settingsWithKey({ orgId, key }))
        ),
        updateSetting: Effect.fn("ConfigRepo.updateSetting")((row: SettingRow) => Effect.orDie(updateSetting(row))),
        insertFlag: Effect.fn("ConfigRepo.insertFlag")((row: FeatureFlagRow) => uniqueViolationOrDie(insertFlag(row))),
        findFlag: Effect.fn("ConfigRepo.findFlag")((scope: ConfigScope, id: FeatureFlagId) =>
          Effect.orDie(findFlag({ ...scopeOf(scope), id }))
        ),
        listFlags: Effect.fn("ConfigRepo.listFlags")((scope: ConfigScope, window: ConfigPageWindow) =>
          Effect.orDie(listFlags({ ...scopeOf(scope), limit: window.limit, after: window.after }))
        ),
        updateFlag: Effect.fn("ConfigRepo.updateFlag")((row: FeatureFlagRow) => Effect.orDie(updateFlag(row)))
      })
    })
  )
}
