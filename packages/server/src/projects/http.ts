/** Project and environment handlers: each calls one service method. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ProjectsService } from "./service.ts"

export const ProjectsHttp = HttpApiBuilder.group(ControlPlaneApi, "projects", (handlers) =>
  Effect.gen(function*() {
    const projects = yield* ProjectsService
    return handlers
      .handle("list", ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => projects.list(workspace, query)))
      .handle("create", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          projects.create(actor, workspace, payload)))
      .handle("get", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          projects.get(workspace, params.projectId)))
      .handle("archive", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          projects.archive(actor, workspace, params.projectId)))
      .handle("restore", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          projects.restore(actor, workspace, params.projectId)))
      .handle("listEnvironments", ({ params, query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          projects.listEnvironments(workspace, params.projectId, query)))
      .handle("createEnvironment", ({ params, payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          projects.createEnvironment(actor, workspace, params.projectId, payload)))
      .handle("getEnvironment", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          projects.getEnvironment(workspace, params.projectId, params.environmentId)))
      .handle("archiveEnvironment", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          projects.archiveEnvironment(actor, workspace, params.projectId, params.environmentId)))
  }))
