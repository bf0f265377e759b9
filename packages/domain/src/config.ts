/**
 * Configuration (spec: Configuration resource rows; "Configuration (under {scope})"): settings and feature flags at
 * workspace, project and environment scope. Each scope is one group of the same endpoints under its own prefix, so
 * each declares the permission its scope needs (`organization.config.*` on the workspace, `project.config.*` on a
 * project or environment). Settings and flags have no DELETE route (the edge answers 405).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import type { Permission } from "./access.ts"
import { Conflict, NotFound } from "./errors.ts"
import { EnvironmentId, FeatureFlagId, OrgId, ProjectId, SettingId } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { JsonValue, MultilineText } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** Where a stored setting or flag lives. */
export const ConfigScopeKind = Schema.Literals(["organization", "project", "environment"])
export type ConfigScopeKind = typeof ConfigScopeKind.Type

/** Where a resolved setting came from: a stored scope, the workspace's account root, or the built-in defaults. */
export const ResolvedScopeKind = Schema.Literals(["environment", "project", "organization", "account", "default"])
export type ResolvedScopeKind = typeof ResolvedScopeKind.Type

export const SettingValueType = Schema.Literals(["string", "number", "boolean", "json"])
export type SettingValueType = typeof SettingValueType.Type
export const SettingVisibility = Schema.Literals(["public", "internal", "masked"])
export type SettingVisibility = typeof SettingVisibility.Type

/** Setting and flag keys: 1 to 128 letters, digits, `.`, `_` or `-`, starting with a letter or digit. */
export const ConfigKey = describedText(
  "A setting or flag key: 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
).check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, {
    message: "must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
)

const Description = Schema.NullOr(MultilineText.check(Schema.isMaxLength(1024)))

/**
 * A setting as the wire shows it. `valueType` and `visibility` are enforced but never echoed. A masked setting
 * carries `masked: true`, and `value: null` when read by a caller without the scope's write permission (`masked`
 * is absent on other settings).
 */
export const Setting = Schema.Struct({
  id: SettingId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: ConfigScopeKind,
  key: Schema.String,
  value: Schema.Json,
  description: Schema.NullOr(Schema.String),
  masked: Schema.optionalKey(Schema.Literal(true)),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Setting = typeof Setting.Type

/**
 * A resolved setting: the first match of the walk, with `overridable` (false for a locked account-scope guardrail)
 * and where it came from. A built-in default has `id: null`, null project and environment and epoch timestamps.
 */
export const ResolvedSetting = Schema.Struct({
  id: Schema.NullOr(SettingId),
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: ResolvedScopeKind,
  key: Schema.String,
  value: Schema.Json,
  description: Schema.NullOr(Schema.String),
  masked: Schema.optionalKey(Schema.Literal(true)),
  overridable: Schema.Boolean,
  inheritedFrom: Schema.Struct({ scopeKind: ResolvedScopeKind }),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type ResolvedSetting = typeof ResolvedSetting.Type

/**
 * `overridable: false` locks the setting for every lower scope (an account-scope guardrail); it is accepted only on
 * the workspace scope of an account root (422 on `overridable` elsewhere).
 */
export const SettingInput = Schema.Struct({
  key: ConfigKey,
  value: JsonValue,
  description: Schema.optionalKey(Description),
  valueType: Schema.optionalKey(SettingValueType),
  visibility: Schema.optionalKey(SettingVisibility),
  overridable: Schema.optionalKey(Schema.Boolean)
})
export type SettingInput = typeof SettingInput.Type

/** Every field optional: an omitted one keeps what is stored. */
export const SettingPatch = Schema.Struct({
  value: Schema.optionalKey(JsonValue),
  description: Schema.optionalKey(Description),
  valueType: Schema.optionalKey(SettingValueType),
  visibility: Schema.optionalKey(SettingVisibility),
  overridable: Schema.optionalKey(Schema.Boolean)
})
export type SettingPatch = typeof SettingPatch.Type

export const FeatureFlag = Schema.Struct({
  id: FeatureFlagId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: ConfigScopeKind,
  key: Schema.String,
  enabled: Schema.Boolean,
  value: Schema.Json,
  description: Schema.NullOr(Schema.String),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type FeatureFlag = typeof FeatureFlag.Type

/** Flag create (the spec does not show it): `enabled` is required, `value` (any JSON) defaults to null. */
export const FeatureFlagInput = Schema.Struct({
  key: ConfigKey,
  enabled: Schema.Boolean,
  value: Schema.optionalKey(JsonValue),
  description: Schema.optionalKey(Description)
})
export type FeatureFlagInput = typeof FeatureFlagInput.Type

export const FeatureFlagPatch = Schema.Struct({
  enabled: Schema.optionalKey(Schema.Boolean),
  value: Schema.optionalKey(JsonValue),
  description: Schema.optionalKey(Description)
})
export type FeatureFlagPatch = typeof FeatureFlagPatch.Type

/** `key` is required; without it the query fails validation (422 on `key`). */
export const ResolveQuery = {
  key: ConfigKey.annotate({ description: "The key of the setting to resolve" })
}

const configGroup = <const Name extends string, const Params extends Schema.Struct.Fields>(
  name: Name,
  prefix: `/${string}`,
  params: Params,
  read: Permission,
  write: Permission,
  title: string
) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("listSettings", `${prefix}/config/settings`, {
        params,
        query: PageQuery,
        success: Page({ settings: Schema.Array(Setting) }),
        error: NotFound
      }).annotateMerge(doc("List settings", "The settings defined at this scope.")).annotateMerge(
        requires.permission(read)
      ),
      HttpApiEndpoint.post("createSetting", `${prefix}/config/settings`, {
        params,
        payload: SettingInput,
        success: Envelope({ setting: Setting }),
        error: [NotFound, Conflict]
      }).annotateMerge(doc("Create a setting", "Masked settings are stored and returned masked.")).annotateMerge(
        requires.permission(write)
      ),
      HttpApiEndpoint.get("resolveSetting", `${prefix}/config/settings/resolve`, {
        params,
        query: ResolveQuery,
        success: Envelope({ setting: ResolvedSetting }),
        error: NotFound
      }).annotateMerge(
        doc(
          "Resolve a setting",
          "The value in effect at this scope: the most specific of environment, project and workspace."
        )
      ).annotateMerge(requires.permission(read)),
      HttpApiEndpoint.patch("updateSetting", `${prefix}/config/settings/:settingId`, {
        params: { ...params, settingId: SettingId },
        payload: SettingPatch,
        success: Envelope({ setting: Setting }),
        error: NotFound
      }).annotateMerge(doc("Update a setting")).annotateMerge(requires.permission(write)),
      HttpApiEndpoint.get("listFeatureFlags", `${prefix}/config/feature-flags`, {
        params,
        query: PageQuery,
        success: Page({ featureFlags: Schema.Array(FeatureFlag) }),
        error: NotFound
      }).annotateMerge(doc("List feature flags", "The flags defined at this scope.")).annotateMerge(
        requires.permission(read)
      ),
      HttpApiEndpoint.post("createFeatureFlag", `${prefix}/config/feature-flags`, {
        params,
        payload: FeatureFlagInput,
        success: Envelope({ featureFlag: FeatureFlag }),
        error: [NotFound, Conflict]
      }).annotateMerge(doc("Create a feature flag")).annotateMerge(requires.permission(write)),
      HttpApiEndpoint.patch("updateFeatureFlag", `${prefix}/config/feature-flags/:flagId`, {
        params: { ...params, flagId: FeatureFlagId },
        payload: FeatureFlagPatch,
        success: Envelope({ featureFlag: FeatureFlag }),
        error: NotFound
      }).annotateMerge(doc("Update a feature flag")).annotateMerge(requires.permission(write))
    )
    .middleware(WorkspaceAuthorization)
    .middleware(WorkspaceAuthentication)
    .annotateMerge(OpenApi.annotations({ title, description: `Settings and feature flags at ${title.toLowerCase()}` }))

const orgPrefix = "/v1/organizations/:orgId"
const projectPrefix = `${orgPrefix}/projects/:projectId`
const environmentPrefix = `${projectPrefix}/environments/:environmentId`

export class ConfigurationApi extends configGroup(
  "configuration",
  orgPrefix,
  { orgId: OrgRef },
  "organization.config.read",
  "organization.config.write",
  "Workspace configuration"
) {}

export class ProjectConfigurationApi extends configGroup(
  "projectConfiguration",
  projectPrefix,
  { orgId: OrgRef, projectId: ProjectId },
  "project.config.read",
  "project.config.write",
  "Project configuration"
) {}

export class EnvironmentConfigurationApi extends configGroup(
  "environmentConfiguration",
  environmentPrefix,
  { orgId: OrgRef, projectId: ProjectId, environmentId: EnvironmentId },
  "project.config.read",
  "project.config.write",
  "Environment configuration"
) {}
