/** Run and job handlers: each calls one service method. */
import {
  actorInWorkspace,
  ControlPlaneApi,
  CurrentActor,
  CurrentWorkspace,
  type ProjectId,
  type RunId
} from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { RunsService } from "./service.ts"

const keyOf = (params: { readonly projectId: ProjectId; readonly runId: RunId }) =>
  Effect.map(CurrentWorkspace, (workspace) => ({
    orgId: workspace.organization.id,
    projectId: params.projectId,
    runId: params.runId
  }))

export const RunsHttp = HttpApiBuilder.group(ControlPlaneApi, "runs", (handlers) =>
  Effect.gen(function*() {
    const runs = yield* RunsService
    return handlers
      .handle("create", ({ params, payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          runs.create(actor, workspace, params.projectId, payload)))
      .handle("list", ({ params, query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          runs.list(workspace, params.projectId, query)))
      .handle("get", ({ params }) =>
        Effect.flatMap(keyOf(params), runs.get))
      .handle("jobs", ({ params }) =>
        Effect.flatMap(keyOf(params), runs.jobs))
      .handle("runnable", ({ params }) =>
        Effect.flatMap(keyOf(params), runs.runnable))
      .handle("frontier", ({ params }) =>
        Effect.flatMap(keyOf(params), runs.frontier))
      .handle("log", ({ params, query }) => Effect.flatMap(keyOf(params), (key) => runs.log(key, query)))
      .handle("cancel", ({ params, payload }) =>
        Effect.flatMap(Effect.all({ actor: CurrentActor, key: keyOf(params) }), ({ actor, key }) =>
          runs.cancel(actor, key, payload)))
      .handle("claim", ({ params, payload }) =>
        Effect.flatMap(Effect.all({ actor: CurrentActor, key: keyOf(params) }), ({ actor, key }) =>
          runs.claim(actor, key, params.jobId, payload)))
      .handle("heartbeat", ({ params, payload }) =>
        Effect.flatMap(keyOf(params), (key) =>
          runs.heartbeat(key, params.jobId, payload)))
      .handle("complete", ({ params, payload }) =>
        Effect.flatMap(Effect.all({ actor: CurrentActor, key: keyOf(params) }), ({ actor, key }) =>
          runs.complete(actor, key, params.jobId, payload)))
  }))
