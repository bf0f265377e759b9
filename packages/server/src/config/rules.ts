/**
 * The rules of the configuration area as plain functions over values (no reads, no writes): which scope a target
 * names, what a value must be, where `overridable` may be set, and what a caller sees of a stored row.
 */
import type { ConfigScopeKind, FeatureFlag, Grant, Permission, Setting, SettingValueType } from "@cp/domain"
import type { FeatureFlagRow, SettingRow } from "@cp/persistence"
import type { Schema } from "effect"
import { decide } from "../platform/rbac.ts"

/** The scope kind of a target: the deepest of environment, project and workspace it names. */
export const scopeKindOf = (
  target: { readonly projectId: unknown; readonly environmentId: unknown }
): ConfigScopeKind =>
  target.environmentId !== null ? "environment" : target.projectId !== null ? "project" : "organization"

/** Whether `value` is of the declared type; `json` takes any JSON value. */
export const matchesType = (value: Schema.Json, valueType: SettingValueType): boolean => {
  switch (valueType) {
    case "string":
      return typeof value === "string"
    case "number":
      return typeof value === "number" && Number.isFinite(value)
    case "boolean":
      return typeof value === "boolean"
    case "json":
      return true
  }
}

/** What is wrong with a value for its declared type, if anything (a 422 on `value`). */
export const valueProblem = (value: Schema.Json, valueType: SettingValueType): string | undefined =>
  matchesType(value, valueType) ? undefined : `must be a ${valueType} value`

/**
 * What is wrong with setting `overridable` at this target, if anything (a 422 on `overridable`): only the workspace
 * scope of an account root takes it, where `overridable: false` makes the setting a guardrail.
 */
export const overridableProblem = (
  target: { readonly projectId: unknown; readonly isAccountRoot: boolean },
  overridable: boolean | undefined
): string | undefined =>
  overridable !== undefined && !(target.projectId === null && target.isAccountRoot)
    ? "is valid only on the workspace scope of an account root"
    : undefined

/** The write permission of the scope a stored row lives in, and the project it is decided on. */
const writePermissionOf = (row: { readonly projectId: string | null }): [Permission, string | undefined] =>
  row.projectId === null ? ["organization.config.write", undefined] : ["project.config.write", row.projectId]

/** Whether the caller's grants may write where `row` lives: what reveals a masked value. */
export const canWrite = (grants: ReadonlyArray<Grant>, row: { readonly projectId: string | null }): boolean => {
  const [permission, projectId] = writePermissionOf(row)
  return decide(grants, permission, projectId).allow
}

/** The JSON value a row keeps as text. */
export const parseJson = (text: string): Schema.Json => JSON.parse(text) as Schema.Json

/**
 * The wire value of a setting: masked ones say so (`masked: true`) and hide their value from callers without the
 * write permission; a writer gets the value too, so a client can still show it masked until asked (`cpctl --reveal`).
 */
const shownValue = (row: SettingRow, reveal: boolean): { readonly value: Schema.Json; readonly masked?: true } =>
  row.visibility !== "masked"
    ? { value: parseJson(row.valueJson) }
    : reveal
    ? { value: parseJson(row.valueJson), masked: true }
    : { value: null, masked: true }

/** What a setting and a feature flag show alike: their id, the scope they live at and their key. */
const scopedKey = <Row extends SettingRow | FeatureFlagRow>(
  row: Row
): Pick<Row, "id" | "orgId" | "projectId" | "environmentId" | "scopeKind" | "key"> => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  environmentId: row.environmentId,
  scopeKind: row.scopeKind,
  key: row.key
})

export const toSetting = (row: SettingRow, reveal: boolean): Setting => ({
  ...scopedKey(row),
  ...shownValue(row, reveal),
  description: row.description,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

export const toFeatureFlag = (row: FeatureFlagRow): FeatureFlag => ({
  ...scopedKey(row),
  enabled: row.enabled,
  value: parseJson(row.valueJson),
  description: row.description,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

/** The names of the fields a change touched (never their values), for events and audit. */
export const changedFields = (patch: object): Array<string> => Object.keys(patch).sort()
