/** Workspace handlers: decode is done by the router, access by the middleware; each calls one service method. */
import { ControlPlaneApi, CurrentActor, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { WorkspacesService } from "./service.ts"

export const WorkspacesHttp = HttpApiBuilder.group(ControlPlaneApi, "workspaces", (handlers) =>
  Effect.gen(function*() {
    const workspaces = yield* WorkspacesService
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(CurrentActor, (actor) => workspaces.create(actor, payload)))
      .handle("list", ({ query }) => Effect.flatMap(CurrentActor, (actor) => workspaces.list(actor, query)))
      .handle("get", () => Effect.map(CurrentWorkspace, ({ organization }) => ({ organization })))
      .handle("children", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) => workspaces.children(workspace, query)))
      .handle("effectiveAccess", ({ query }) =>
        Effect.gen(function*() {
          return yield* workspaces.effectiveAccess(yield* CurrentActor, yield* CurrentWorkspace, query)
        }))
  }))
