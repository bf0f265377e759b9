/** The stored shapes of the configuration area (settings and feature flags, each at one scope) and its requests. */
import { FeatureFlag, Setting, SettingValueType, SettingVisibility } from "@cp/domain/config"
import { EnvironmentId, FeatureFlagId, OrgId, ProjectId, SettingId } from "@cp/domain/ids"
import { Schema, Struct } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/**
 * A row of `settings`; its key is unique within its scope (workspace, project or environment). The value is kept as
 * its JSON text, so every JSON value (null, a string, a number, …) round-trips verbatim on every backend.
 */
export const SettingRow = Schema.Struct({
  ...storedFields(Struct.omit(Setting.fields, ["value", "masked"])),
  valueJson: Schema.String,
  valueType: SettingValueType,
  visibility: SettingVisibility,
  /** False marks an account-scope guardrail (only on an account root's workspace scope). */
  overridable: Schema.Boolean
})
export type SettingRow = typeof SettingRow.Type

/** A row of `feature_flags`; its key is unique within its scope. */
export const FeatureFlagRow = Schema.Struct({
  ...storedFields(Struct.omit(FeatureFlag.fields, ["value"])),
  valueJson: Schema.String
})
export type FeatureFlagRow = typeof FeatureFlagRow.Type

/** One configuration scope: a workspace, one of its projects, or one environment of that project. */
export const ConfigScope = Schema.Struct({
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId)
})
export type ConfigScope = typeof ConfigScope.Type

/** A page of the rows of exactly one scope. */
export const ConfigPage = Schema.Struct({ ...ConfigScope.fields, ...pageFields })
export type ConfigPage = typeof ConfigPage.Type

/** One setting at exactly one scope (the same id at another scope is not found). */
export const SettingKey = Schema.Struct({ ...ConfigScope.fields, id: SettingId })
export type SettingKey = typeof SettingKey.Type

/** One feature flag at exactly one scope. */
export const FeatureFlagKey = Schema.Struct({ ...ConfigScope.fields, id: FeatureFlagId })
export type FeatureFlagKey = typeof FeatureFlagKey.Type

/** A setting key across every scope of a workspace. */
export const SettingKeyInOrg = Schema.Struct({ orgId: OrgId, key: Schema.String })
export type SettingKeyInOrg = typeof SettingKeyInOrg.Type
