/** Configuration handlers, one group per scope: each handler builds the scope from its path and calls the service. */
import { ControlPlaneApi, CurrentActor, type EnvironmentId, type ProjectId } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { currentWorkspace } from "../platform/requestScope.ts"
import { type ConfigTarget, ConfigService } from "./service.ts"

interface ScopeParams {
  readonly orgId: string
  readonly projectId?: ProjectId
  readonly environmentId?: EnvironmentId
}

/** The scope the path names, in the workspace the edge resolved. */
const targetOf = (params: ScopeParams) =>
  Effect.map(currentWorkspace, (workspace): ConfigTarget => ({
    workspace,
    projectId: params.projectId ?? null,
    environmentId: params.environmentId ?? null
  }))

const withActor = (params: ScopeParams) => Effect.all({ actor: CurrentActor, target: targetOf(params) })

export const ConfigurationHttp = HttpApiBuilder.group(ControlPlaneApi, "configuration", (handlers) =>
  Effect.gen(function*() {
    const config = yield* ConfigService
    return handlers
      .handle("listSettings", ({ params, query }) => Effect.flatMap(targetOf(params), (t) => config.listSettings(t, query)))
      .handle("createSetting", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) => config.createSetting(actor, target, payload)))
      .handle("resolveSetting", ({ params, query }) =>
        Effect.flatMap(targetOf(params), (t) => config.resolveSetting(t, query.key)))
      .handle("updateSetting", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) =>
          config.updateSetting(actor, target, params.settingId, payload)))
      .handle("listFeatureFlags", ({ params, query }) =>
        Effect.flatMap(targetOf(params), (t) => config.listFeatureFlags(t, query)))
      .handle("createFeatureFlag", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) => config.createFeatureFlag(actor, target, payload)))
      .handle("updateFeatureFlag", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) =>
          config.updateFeatureFlag(actor, target, params.flagId, payload)))
  }))

export const ProjectConfigurationHttp = HttpApiBuilder.group(ControlPlaneApi, "projectConfiguration", (handlers) =>
  Effect.gen(function*() {
    const config = yield* ConfigService
    return handlers
      .handle("listSettings", ({ params, query }) => Effect.flatMap(targetOf(params), (t) => config.listSettings(t, query)))
      .handle("createSetting", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) => config.createSetting(actor, target, payload)))
      .handle("resolveSetting", ({ params, query }) =>
        Effect.flatMap(targetOf(params), (t) => config.resolveSetting(t, query.key)))
      .handle("updateSetting", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) =>
          config.updateSetting(actor, target, params.settingId, payload)))
      .handle("listFeatureFlags", ({ params, query }) =>
        Effect.flatMap(targetOf(params), (t) => config.listFeatureFlags(t, query)))
      .handle("createFeatureFlag", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) => config.createFeatureFlag(actor, target, payload)))
      .handle("updateFeatureFlag", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) =>
          config.updateFeatureFlag(actor, target, params.flagId, payload)))
  }))

export const EnvironmentConfigurationHttp = HttpApiBuilder.group(ControlPlaneApi, "environmentConfiguration", (handlers) =>
  Effect.gen(function*() {
    const config = yield* ConfigService
    return handlers
      .handle("listSettings", ({ params, query }) => Effect.flatMap(targetOf(params), (t) => config.listSettings(t, query)))
      .handle("createSetting", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) => config.createSetting(actor, target, payload)))
      .handle("resolveSetting", ({ params, query }) =>
        Effect.flatMap(targetOf(params), (t) => config.resolveSetting(t, query.key)))
      .handle("updateSetting", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) =>
          config.updateSetting(actor, target, params.settingId, payload)))
      .handle("listFeatureFlags", ({ params, query }) =>
        Effect.flatMap(targetOf(params), (t) => config.listFeatureFlags(t, query)))
      .handle("createFeatureFlag", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) => config.createFeatureFlag(actor, target, payload)))
      .handle("updateFeatureFlag", ({ params, payload }) =>
        Effect.flatMap(withActor(params), ({ actor, target }) =>
          config.updateFeatureFlag(actor, target, params.flagId, payload)))
  }))
