/** Webhook handlers: each names the caller and the workspace and calls one service method. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { WebhooksService } from "./service.ts"

export const WebhooksHttp = HttpApiBuilder.group(ControlPlaneApi, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* WebhooksService
    const inWorkspace = <A, E>(f: (workspace: typeof CurrentWorkspace.Service) => Effect.Effect<A, E>) =>
      Effect.flatMap(CurrentWorkspace, f)
    return handlers
      .handle(
        "listEndpoints",
        ({ query }) => inWorkspace((workspace) => webhooks.listEndpoints(workspace, null, query))
      )
      .handle(
        "createEndpoint",
        ({ payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.createEndpoint(actor, workspace, null, payload))
      )
      .handle(
        "listProjectEndpoints",
        ({ params, query }) =>
          inWorkspace((workspace) => webhooks.listEndpoints(workspace, params.projectId, query))
      )
      .handle(
        "createProjectEndpoint",
        ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.createEndpoint(actor, workspace, params.projectId, payload))
      )
      .handle(
        "getEndpoint",
        ({ params }) =>
          inWorkspace((workspace) =>
            webhooks.getEndpoint(workspace, params.endpointId)
          )
      )
      .handle(
        "updateEndpoint",
        ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.updateEndpoint(actor, workspace, params.endpointId, payload))
      )
      .handle(
        "deleteEndpoint",
        ({ params }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.deleteEndpoint(actor, workspace, params.endpointId))
      )
      .handle(
        "disableEndpoint",
        ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.disableEndpoint(actor, workspace, params.endpointId, payload))
      )
      .handle(
        "enableEndpoint",
        ({ params }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.enableEndpoint(actor, workspace, params.endpointId))
      )
      .handle(
        "rotateSecret",
        ({ params }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.rotateSecret(actor, workspace, params.endpointId))
      )
      .handle(
        "listEndpointSubscriptions",
        ({ params, query }) =>
          inWorkspace((workspace) =>
            webhooks.listSubscriptions(workspace, params.endpointId, query)
          )
      )
      .handle(
        "listDeliveryAttempts",
        ({ params, query }) =>
          inWorkspace((workspace) =>
            webhooks.listAttempts(workspace, params.endpointId, query)
          )
      )
      .handle("endpointStats", ({ params }) =>
        inWorkspace((workspace) =>
          webhooks.stats(workspace, params.endpointId)
        ))
      .handle(
        "recoverEndpoint",
        ({ params, payload }) => inWorkspace((workspace) => webhooks.recover(workspace, params.endpointId, payload))
      )
      .handle(
        "testEndpoint",
        ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.test(actor, workspace, params.endpointId, payload))
      )
      .handle(
        "createSubscription",
        ({ payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.createSubscription(actor, workspace, payload))
      )
      .handle(
        "getSubscription",
        ({ params }) =>
          inWorkspace((workspace) =>
            webhooks.getSubscription(workspace, params.subscriptionId)
          )
      )
      .handle(
        "updateSubscription",
        ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.updateSubscription(actor, workspace, params.subscriptionId, payload))
      )
      .handle(
        "deleteSubscription",
        ({ params }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            webhooks.deleteSubscription(actor, workspace, params.subscriptionId))
      )
      .handle(
        "getDeliveryAttempt",
        ({ params }) =>
          inWorkspace((workspace) =>
            webhooks.getAttempt(workspace, params.attemptId)
          )
      )
      .handle(
        "replayDeliveryAttempt",
        ({ params }) =>
          inWorkspace((workspace) =>
            webhooks.replayAttempt(workspace, params.attemptId)
          )
      )
  }))
