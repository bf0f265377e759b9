/** Agent provider connection handlers and the operator's KEK rotation: one service call each. */
import { actorInWorkspace, ControlPlaneApi, CurrentActor, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { AgentProvidersService } from "./service.ts"

export const AgentProvidersHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "agentProviders",
  (handlers) =>
    Effect.gen(function*() {
      const agents = yield* AgentProvidersService
      return handlers
        .handle(
          "list",
          ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => agents.list(workspace, query.provider))
        )
        .handle(
          "create",
          ({ payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) => agents.create(actor, workspace, payload))
        )
        .handle(
          "update",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              agents.update(actor, workspace, params.connectionId, payload))
        )
        .handle(
          "disconnect",
          ({ params }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              agents.disconnect(actor, workspace, params.connectionId))
        )
        .handle(
          "verify",
          ({ params }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              agents.verify(actor, workspace, params.connectionId))
        )
    })
)

export const AdminHttp = HttpApiBuilder.group(ControlPlaneApi, "admin", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* AgentProvidersService
    return handlers.handle("rotateKek", () =>
      Effect.map(Effect.flatMap(CurrentActor, agents.rotateKek), (rotation) => ({ rotation })))
  }))
