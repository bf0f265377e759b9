/**
 * Settings and feature flags: one repository for the configuration area. A row belongs to exactly one scope
 * (`ConfigScope`); keys are unique per scope (`UniqueViolation` on `settings_scope_key` / `feature_flags_scope_key`).
 */
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import {
  ConfigPage,
  type ConfigScope,
  FeatureFlagKey,
  FeatureFlagRow,
  SettingKey,
  SettingKeyInOrg,
  SettingRow
} from "./rows.ts"

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

export class ConfigRepo extends Context.Service<ConfigRepo, {
  /** `UniqueViolation` on `settings_scope_key` when the scope already has a setting with that key. */
  readonly insertSetting: (row: SettingRow) => Effect.Effect<void, UniqueViolation>
  /** The setting with this id at exactly this scope; None otherwise. */
  readonly findSetting: (key: SettingKey) => Effect.Effect<Option.Option<SettingRow>>
  /** Up to `limit` settings of exactly this scope strictly after `after`, newest first (createdAt desc, id desc). */
  readonly listSettings: (page: ConfigPage) => Effect.Effect<ReadonlyArray<SettingRow>>
  /** Every setting of the workspace with this key, at any of its scopes. */
  readonly settingsWithKey: (key: SettingKeyInOrg) => Effect.Effect<ReadonlyArray<SettingRow>>
  /** Replaces the stored row with the same id and scope; None when it is not there. */
  readonly updateSetting: (row: SettingRow) => Effect.Effect<Option.Option<SettingRow>>
  /** `UniqueViolation` on `feature_flags_scope_key` when the scope already has a flag with that key. */
  readonly insertFlag: (row: FeatureFlagRow) => Effect.Effect<void, UniqueViolation>
  readonly findFlag: (key: FeatureFlagKey) => Effect.Effect<Option.Option<FeatureFlagRow>>
  readonly listFlags: (page: ConfigPage) => Effect.Effect<ReadonlyArray<FeatureFlagRow>>
  readonly updateFlag: (row: FeatureFlagRow) => Effect.Effect<Option.Option<FeatureFlagRow>>
}>()("@cp/persistence/config/ConfigRepo") {
  /** Configuration in memory, for fast deterministic tests. */
  static readonly memory = Layer.sync(ConfigRepo, () => {
    const settings = new Map<string, SettingRow>()
    const flags = new Map<string, FeatureFlagRow>()
    const findIn = <R extends ConfigScope & { readonly id: string }>(
      map: Map<string, R>,
      key: ConfigScope & { readonly id: string }
    ) => Option.filter(Option.fromUndefinedOr(map.get(key.id)), inScope(key))
    const pageIn = <R extends ConfigScope & { readonly createdAt: Date; readonly id: string }>(
      map: Map<string, R>,
      page: ConfigPage
    ) => windowOf(Array.from(map.values()).filter(inScope(page)), idPosition, page)
    const replace = <R extends ConfigScope & { readonly id: string }>(map: Map<string, R>, row: R) =>
      atomically((changes) => {
        if (Option.isNone(findIn(map, row))) return Effect.succeed(Option.none<R>())
        changes.set(map, row.id, row)
        return Effect.succeed(Option.some(row))
      })
    return ConfigRepo.of({
      insertSetting: (row) => insertUnique(settings, row.id, row, settingUniques),
      findSetting: (key) => Effect.sync(() => findIn(settings, key)),
      listSettings: (page) => Effect.sync(() => pageIn(settings, page)),
      settingsWithKey: ({ orgId, key }) =>
        Effect.sync(() => Array.from(settings.values()).filter((row) => row.orgId === orgId && row.key === key)),
      updateSetting: (row) => replace(settings, row),
      insertFlag: (row) => insertUnique(flags, row.id, row, flagUniques),
      findFlag: (key) => Effect.sync(() => findIn(flags, key)),
      listFlags: (page) => Effect.sync(() => pageIn(flags, page)),
      updateFlag: (row) => replace(flags, row)
    })
  })

  /** Configuration in the `settings` and `feature_flags` tables. */
  static readonly sql = Layer.effect(
    ConfigRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const scopeIs = (scope: typeof ConfigScope.Encoded) =>
        sql.and([
          sql`org_id = ${scope.orgId}`,
          sql`project_id is not distinct from ${scope.projectId}`,
          sql`environment_id is not distinct from ${scope.environmentId}`
        ])
      /** The one keyset query of both tables. */
      const pageOf = (table: string) => ({ after, limit, ...scope }: typeof ConfigPage.Encoded) =>
        keysetQuery(sql, sql`select * from ${sql(table)}`, [scopeIs(scope)], { after, limit })

      return ConfigRepo.of({
        insertSetting: insertRow(sql, "settings", SettingRow),
        findSetting: flow(
          SqlSchema.findOneOption({
            Request: SettingKey,
            Result: SettingRow,
            execute: ({ id, ...scope }) => sql`select * from settings where id = ${id} and ${scopeIs(scope)}`
          }),
          Effect.orDie
        ),
        listSettings: flow(
          SqlSchema.findAll({ Request: ConfigPage, Result: SettingRow, execute: pageOf("settings") }),
          Effect.orDie
        ),
        settingsWithKey: flow(
          SqlSchema.findAll({
            Request: SettingKeyInOrg,
            Result: SettingRow,
            execute: ({ orgId, key }) => sql`select * from settings where org_id = ${orgId} and key = ${key}`
          }),
          Effect.orDie
        ),
        updateSetting: flow(
          SqlSchema.findOneOption({
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
          }),
          Effect.orDie
        ),
        insertFlag: insertRow(sql, "feature_flags", FeatureFlagRow),
        findFlag: flow(
          SqlSchema.findOneOption({
            Request: FeatureFlagKey,
            Result: FeatureFlagRow,
            execute: ({ id, ...scope }) => sql`select * from feature_flags where id = ${id} and ${scopeIs(scope)}`
          }),
          Effect.orDie
        ),
        listFlags: flow(
          SqlSchema.findAll({ Request: ConfigPage, Result: FeatureFlagRow, execute: pageOf("feature_flags") }),
          Effect.orDie
        ),
        updateFlag: flow(
          SqlSchema.findOneOption({
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
          }),
          Effect.orDie
        )
      })
    })
  )
}
