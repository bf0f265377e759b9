/**
 * Handlers of the object store and its GC: each calls one service method. Object bodies stay streams both ways: a PUT
 * hands the request body to the service as it arrives, a GET answers a streamed body with its `Content-Length`,
 * `ETag` and, for a single `Range`, 206 and `Content-Range` (HEAD: the same headers, no body read).
 */
import { ControlPlaneApi, CurrentWorkspace, type ProjectId } from "@cp/domain"
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { GcService } from "./gc.ts"
import { StateReadModels } from "./readModels.ts"
import { rangeOf } from "./rules.ts"
import { ObjectsService, type OpenedObject, type ProjectScope } from "./service.ts"

const scopeOf = (params: { readonly projectId: ProjectId }): Effect.Effect<ProjectScope, never, CurrentWorkspace> =>
  Effect.map(CurrentWorkspace, (workspace) => ({ orgId: workspace.organization.id, projectId: params.projectId }))

const OCTETS = "application/octet-stream"

/** The raw answer to a GET (or HEAD) of an object: whole, one range (206), or 416 for a range past its end. */
const objectResponse = ({ object, read }: OpenedObject, range: string | undefined) => {
  const size = object.size
  const headers = { etag: `"${object.digest}"`, "accept-ranges": "bytes" }
  const wanted = rangeOf(range, size)
  switch (wanted._tag) {
    case "Unsatisfiable":
      return HttpServerResponse.empty({ status: 416, headers: { ...headers, "content-range": `bytes */${size}` } })
    case "Whole":
      return HttpServerResponse.stream(read(0, size), {
        contentType: OCTETS,
        contentLength: size,
        headers: { ...headers, "content-length": String(size) }
      })
    case "Partial":
      return HttpServerResponse.stream(read(wanted.start, wanted.end), {
        status: 206,
        contentType: OCTETS,
        contentLength: wanted.end - wanted.start,
        headers: {
          ...headers,
          "content-length": String(wanted.end - wanted.start),
          "content-range": `bytes ${wanted.start}-${wanted.end - 1}/${size}`
        }
      })
  }
}

export const ObjectsHttp = HttpApiBuilder.group(ControlPlaneApi, "objects", (handlers) =>
  Effect.gen(function*() {
    const objects = yield* ObjectsService
    const gc = yield* GcService
    return handlers
      .handle("missing", ({ params, payload }) =>
        Effect.flatMap(scopeOf(params), (scope) => objects.missing(scope, payload)))
      .handle("list", ({ params, query }) =>
        Effect.flatMap(scopeOf(params), (scope) => objects.list(scope, query)))
      .handle("put", ({ params, payload }) =>
        Effect.flatMap(scopeOf(params), (scope) =>
          objects.put(scope, params.digest, payload)))
      .handle("get", ({ params, request }) =>
        Effect.flatMap(scopeOf(params), (scope) =>
          Effect.map(objects.open(scope, params.digest), (opened) =>
            objectResponse(opened, request.headers["range"]))))
      .handle("startUpload", ({ params, payload }) =>
        Effect.flatMap(scopeOf(params), (scope) =>
          objects.startUpload(scope, params.digest, payload)))
      .handle("putPart", ({ params, payload }) =>
        Effect.flatMap(scopeOf(params), (scope) =>
          objects.putPart(scope, params.digest, params.uploadId, params.partNumber, payload)))
      .handle("completeUpload", ({ params }) =>
        Effect.flatMap(scopeOf(params), (scope) =>
          objects.completeUpload(scope, params.digest, params.uploadId)))
      .handle("gcReport", ({ params }) =>
        Effect.flatMap(scopeOf(params), gc.report))
      .handle("gcCollect", ({ params, payload }) =>
        Effect.flatMap(scopeOf(params), (scope) =>
          gc.collect(scope, payload)))
  }))

/** The workspace-wide state read models. */
export const StateReadModelsHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "stateReadModels",
  (handlers) =>
    Effect.gen(function*() {
      const models = yield* StateReadModels
      return handlers
        .handle("usage", () => Effect.flatMap(CurrentWorkspace, (workspace) => models.usage(workspace.organization.id)))
        .handle(
          "runs",
          ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => models.runs(workspace.organization.id, query))
        )
    })
)
