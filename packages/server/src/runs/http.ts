/** Handlers of the run-state plane part I (runs, job logs, command-line links): each calls one service method. */
import {
  actorInWorkspace,
  ControlPlaneApi,
  CurrentActor,
  CurrentWorkspace,
  type LinkId,
  type ProjectId,
  type RunId
} from "@cp/domain"
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { CliLinksService } from "./links.ts"
import { JobLogsService } from "./logs.ts"
import { WorkflowCredentials } from "./oidc.ts"
import { RunSecretsService } from "./secrets.ts"
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

/** Job log handlers: `Accept: text/plain` on a read answers the raw bytes instead of the envelope. */
export const JobLogsHttp = HttpApiBuilder.group(ControlPlaneApi, "jobLogs", (handlers) =>
  Effect.gen(function*() {
    const logs = yield* JobLogsService
    return handlers
      .handle("append", ({ params, payload }) =>
        Effect.flatMap(keyOf(params), (key) => logs.append(key, params.jobId, payload)))
      .handle("read", ({ params, query, request }) =>
        Effect.flatMap(keyOf(params), (key) =>
          Effect.map(logs.read(key, params.jobId, query), ({ bytes, log }) =>
            wantsText(request.headers["accept"])
              ? HttpServerResponse.uint8Array(bytes, { contentType: "text/plain; charset=utf-8" })
              : { log })))
  }))

/** Whether the client asked for the raw text (`curl -H 'Accept: text/plain'`), not JSON. */
const wantsText = (accept: string | undefined): boolean =>
  accept !== undefined && /(^|,)\s*text\/plain/i.test(accept) && !/application\/json/i.test(accept)

/** Command-line link handlers. */
export const CliLinksHttp = HttpApiBuilder.group(ControlPlaneApi, "cliLinks", (handlers) =>
  Effect.gen(function*() {
    const links = yield* CliLinksService
    const keyOfLink = (params: { readonly projectId: ProjectId; readonly linkId: LinkId }) =>
      Effect.map(actorInWorkspace, ({ actor, workspace }) => ({
        actor,
        workspace,
        key: { orgId: workspace.organization.id, projectId: params.projectId, linkId: params.linkId }
      }))
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          links.create(actor, workspace, payload)))
      .handle("list", () =>
        Effect.flatMap(CurrentWorkspace, links.list))
      .handle("listForProject", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          links.listForProject(workspace, params.projectId)))
      .handle("update", ({ params, payload }) =>
        Effect.flatMap(keyOfLink(params), ({ actor, key, workspace }) =>
          links.update(actor, workspace, key, payload.ciSettings)))
      .handle("unlink", ({ params }) =>
        Effect.flatMap(keyOfLink(params), ({ actor, key, workspace }) =>
          links.unlink(actor, workspace, key)))
  }))

export const CliLinkResolveHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "cliLinkResolve",
  (handlers) =>
    Effect.gen(function*() {
      const links = yield* CliLinksService
      return handlers.handle(
        "resolve",
        ({ query }) => Effect.flatMap(CurrentActor, (actor) => links.resolve(actor, query.remoteUrl))
      )
    })
)

/** The OIDC exchange and the development issuer; its JWKS is the raw `{ keys }` document, not the envelope. */
export const OidcHttp = HttpApiBuilder.group(ControlPlaneApi, "oidc", (handlers) =>
  Effect.gen(function*() {
    const credentials = yield* WorkflowCredentials
    return handlers
      .handle("exchange", ({ payload }) => credentials.exchange(payload))
      .handle("devJwks", () =>
        Effect.map(credentials.devJwks, (jwks) => ({ keys: jwks.keys.map((key) => ({ ...key })) })))
      .handle("devToken", ({ payload }) =>
        credentials.devToken(payload))
  }))

/** Lease-bound run secrets. */
export const RunSecretsHttp = HttpApiBuilder.group(ControlPlaneApi, "runSecrets", (handlers) =>
  Effect.gen(function*() {
    const secrets = yield* RunSecretsService
    return handlers
      .handle("resolve", ({ params, payload }) =>
        Effect.flatMap(Effect.all({ actor: CurrentActor, key: keyOf(params) }), ({ actor, key }) =>
          secrets.resolve(actor, key, payload)))
      .handle("output", ({ params, payload }) =>
        Effect.flatMap(Effect.all({ both: actorInWorkspace, key: keyOf(params) }), ({ both, key }) =>
          secrets.output(both.actor, both.workspace, key, payload)))
  }))
