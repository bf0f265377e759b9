/** Secret handlers, one group per `{scope}` prefix: each names its scope and calls one service method. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace, type ProjectId } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { type SecretScope, SecretsService } from "./service.ts"

export const SecretsHttp = HttpApiBuilder.group(ControlPlaneApi, "secrets", (handlers) =>
  Effect.gen(function*() {
    const secrets = yield* SecretsService
    const scope: SecretScope = { kind: "organization" }
    return handlers
      .handle("list", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) => secrets.list(workspace, scope, query)))
      .handle("create", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          secrets.create(actor, workspace, scope, payload)))
      .handle("rotate", ({ params, payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          secrets.rotate(actor, workspace, scope, params.secretId, payload)))
      .handle("revoke", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          secrets.revoke(actor, workspace, scope, params.secretId)))
  }))

export const ProjectSecretsHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "projectSecrets",
  (handlers) =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const scopeOf = (params: { readonly projectId: ProjectId }): SecretScope => ({
        kind: "project",
        projectId: params.projectId
      })
      return handlers
        .handle(
          "list",
          ({ params, query }) =>
            Effect.flatMap(CurrentWorkspace, (workspace) => secrets.list(workspace, scopeOf(params), query))
        )
        .handle(
          "create",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              secrets.create(actor, workspace, scopeOf(params), payload))
        )
        .handle(
          "rotate",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              secrets.rotate(actor, workspace, scopeOf(params), params.secretId, payload))
        )
        .handle(
          "revoke",
          ({ params }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              secrets.revoke(actor, workspace, scopeOf(params), params.secretId))
        )
    })
)

export const EnvironmentSecretsHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "environmentSecrets",
  (handlers) =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const scopeOf = (params: Extract<SecretScope, { kind: "environment" }>): SecretScope => ({
        kind: "environment",
        projectId: params.projectId,
        environmentId: params.environmentId
      })
      return handlers
        .handle(
          "list",
          ({ params, query }) =>
            Effect.flatMap(CurrentWorkspace, (workspace) =>
              secrets.list(workspace, scopeOf({ kind: "environment", ...params }), query))
        )
        .handle(
          "create",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              secrets.create(actor, workspace, scopeOf({ kind: "environment", ...params }), payload))
        )
        .handle(
          "rotate",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              secrets.rotate(actor, workspace, scopeOf({ kind: "environment", ...params }), params.secretId, payload))
        )
        .handle(
          "revoke",
          ({ params }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              secrets.revoke(actor, workspace, scopeOf({ kind: "environment", ...params }), params.secretId))
        )
    })
)
