/** Team handlers: decode is done by the router, access by the middleware; each calls one service method. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { TeamsService } from "./service.ts"

export const TeamsHttp = HttpApiBuilder.group(ControlPlaneApi, "teams", (handlers) =>
  Effect.gen(function*() {
    const teams = yield* TeamsService
    return handlers
      .handle("list", ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => teams.list(workspace, query)))
      .handle("create", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.create(actor, workspace, payload)))
      .handle("get", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) => teams.get(workspace, params.teamId)))
      .handle("update", ({ params, payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.update(actor, workspace, params.teamId, payload)))
      .handle("delete", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.delete(actor, workspace, params.teamId)))
      .handle("listMembers", ({ params, query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          teams.listMembers(workspace, params.teamId, query)))
      .handle("addMember", ({ params, payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.addMember(actor, workspace, params.teamId, payload)))
      .handle("removeMember", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.removeMember(actor, workspace, params.teamId, params.subjectId)))
      .handle("listGrants", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          teams.listGrants(workspace, query)))
      .handle("grant", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.grant(actor, workspace, payload)))
      .handle("revoke", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          teams.revoke(actor, workspace, payload)))
  }))
