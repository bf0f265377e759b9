/** API key handlers: decode is done by the router, access by the middleware; each calls one service method. */
import { ControlPlaneApi, CurrentActor, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ApiKeysService } from "./service.ts"

export const ApiKeysHttp = HttpApiBuilder.group(ControlPlaneApi, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const apiKeys = yield* ApiKeysService
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          return yield* apiKeys.create(yield* CurrentActor, yield* CurrentWorkspace, payload)
        }))
      .handle("list", ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => apiKeys.list(workspace, query)))
      .handle("revoke", ({ params }) =>
        Effect.gen(function*() {
          return yield* apiKeys.revoke(yield* CurrentActor, yield* CurrentWorkspace, params.apiKeyId)
        }))
  }))
