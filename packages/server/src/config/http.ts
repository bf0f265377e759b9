/** Configuration handlers, one group per scope: each handler builds the scope from its path and calls the service. */
import {
  ControlPlaneApi,
  CurrentActor,
  CurrentWorkspace,
  type EnvironmentId,
  type FeatureFlagId,
  type FeatureFlagInput,
  type FeatureFlagPatch,
  type ProjectId,
  type SettingId,
  type SettingInput,
  type SettingPatch
} from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { PageRequest } from "../platform/pagination.ts"
import { ConfigService, type ConfigTarget } from "./service.ts"

interface ScopeParams {
  readonly orgId: string
  readonly projectId?: ProjectId
  readonly environmentId?: EnvironmentId
}

/** The scope the path names, in the workspace the edge resolved. */
const targetOf = (params: ScopeParams) =>
  Effect.map(CurrentWorkspace, (workspace): ConfigTarget => ({
    workspace,
    projectId: params.projectId ?? null,
    environmentId: params.environmentId ?? null
  }))

const withActor = (params: ScopeParams) => Effect.all({ actor: CurrentActor, target: targetOf(params) })

/** The handlers every configuration group shares; only the scope in the path differs between groups. */
const configurationHandlers = (config: ConfigService["Service"]) => ({
  listSettings: ({ params, query }: { readonly params: ScopeParams; readonly query: PageRequest }) =>
    Effect.flatMap(targetOf(params), (t) => config.listSettings(t, query)),
  createSetting: ({ params, payload }: { readonly params: ScopeParams; readonly payload: SettingInput }) =>
    Effect.flatMap(withActor(params), ({ actor, target }) => config.createSetting(actor, target, payload)),
  resolveSetting: ({ params, query }: { readonly params: ScopeParams; readonly query: { readonly key: string } }) =>
    Effect.flatMap(targetOf(params), (t) => config.resolveSetting(t, query.key)),
  updateSetting: (
    { params, payload }: {
      readonly params: ScopeParams & { readonly settingId: SettingId }
      readonly payload: SettingPatch
    }
  ) =>
    Effect.flatMap(
      withActor(params),
      ({ actor, target }) => config.updateSetting(actor, target, params.settingId, payload)
    ),
  listFeatureFlags: ({ params, query }: { readonly params: ScopeParams; readonly query: PageRequest }) =>
    Effect.flatMap(targetOf(params), (t) => config.listFeatureFlags(t, query)),
  createFeatureFlag: ({ params, payload }: { readonly params: ScopeParams; readonly payload: FeatureFlagInput }) =>
    Effect.flatMap(withActor(params), ({ actor, target }) => config.createFeatureFlag(actor, target, payload)),
  updateFeatureFlag: (
    { params, payload }: {
      readonly params: ScopeParams & { readonly flagId: FeatureFlagId }
      readonly payload: FeatureFlagPatch
    }
  ) =>
    Effect.flatMap(
      withActor(params),
      ({ actor, target }) => config.updateFeatureFlag(actor, target, params.flagId, payload)
    )
})

export const ConfigurationHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "configuration",
  (handlers) =>
    Effect.gen(function*() {
      return handlers.handleAll(configurationHandlers(yield* ConfigService))
    })
)

export const ProjectConfigurationHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "projectConfiguration",
  (handlers) =>
    Effect.gen(function*() {
      return handlers.handleAll(configurationHandlers(yield* ConfigService))
    })
)

export const EnvironmentConfigurationHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "environmentConfiguration",
  (handlers) =>
    Effect.gen(function*() {
      return handlers.handleAll(configurationHandlers(yield* ConfigService))
    })
)
