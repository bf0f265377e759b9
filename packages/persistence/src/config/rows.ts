/** The stored shapes of the configuration area: settings and feature flags, each at one scope. */
import { ConfigScopeKind, FeatureFlagId, SettingId, SettingValueType, SettingVisibility } from "@cp/domain/config"
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { Schema } from "effect"

/**
 * A row of `settings`; its key is unique within its scope (workspace, project or environment). The value is kept as
 * its JSON text, so every JSON value (null, a string, a number, …) round-trips verbatim on every backend.
 */
export const SettingRow = Schema.Struct({
  id: SettingId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: ConfigScopeKind,
  key: Schema.String,
  valueJson: Schema.String,
  valueType: SettingValueType,
  visibility: SettingVisibility,
  /** False marks an account-scope guardrail (only on an account root's workspace scope). */
  overridable: Schema.Boolean,
  description: Schema.NullOr(Schema.String),
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type SettingRow = typeof SettingRow.Type

/** A row of `feature_flags`; its key is unique within its scope. */
export const FeatureFlagRow = Schema.Struct({
  id: FeatureFlagId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: ConfigScopeKind,
  key: Schema.String,
  enabled: Schema.Boolean,
  valueJson: Schema.String,
  description: Schema.NullOr(Schema.String),
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type FeatureFlagRow = typeof FeatureFlagRow.Type

/** One configuration scope: a workspace, one of its projects, or one environment of that project. */
export interface ConfigScope {
  readonly orgId: OrgId
  readonly projectId: ProjectId | null
  readonly environmentId: EnvironmentId | null
}

/** A keyset position in a newest-first list. */
export interface ConfigPagePosition {
  readonly at: Date
  readonly key: string
}

export interface ConfigPageWindow {
  readonly after?: ConfigPagePosition | undefined
  readonly limit: number
}
