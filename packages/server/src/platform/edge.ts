/**
 * The edge: one global middleware that runs before the typed router on every request. It assigns the
 * request id, rewrites the `/v1/workspaces` alias, resolves the bearer token and then the workspace
 * reference (routing order of contract §4), applies `Idempotency-Key`, and turns every answer the typed
 * API cannot give (404, 405, 415, 500) into the error envelope.
 */
import { actorId, ControlPlaneApi, CurrentRequestId, OrgId, wireError } from "@cp/domain"
import {
  Conflict,
  InternalError,
  MethodNotAllowed,
  NotFound,
  UnsupportedMediaType,
  ValidationFailed
} from "@cp/domain"
import { IdempotencyRepo } from "@cp/persistence"
import { Cause, Clock, Duration, Effect, Option, Schema, type Types } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { ActorResolver } from "./actors.ts"
import { newId } from "./ids.ts"
import {
  bodyFingerprint,
  IDEMPOTENCY_HEADER,
  IDEMPOTENT_METHODS,
  isRememberedStatus,
  isValidIdempotencyKey
} from "./idempotency.ts"
import { type EdgeError, renderError } from "./render.ts"
import { type ActorResolution, CurrentRequestScope, type RequestScope } from "./requestScope.ts"
import { makeRouteTable } from "./routeTable.ts"
import { WorkspaceResolver } from "./workspaceResolver.ts"

const ALIAS = /^\/v1\/workspaces(?=\/|\?|$)/
const WORKSPACE_PATH = /^\/v1\/organizations\/([^/?]+)(.*)$/
const IN_FLIGHT_RELEASE_AFTER = Duration.seconds(60)
const DOCS_ROUTES = [["GET", "/docs"], ["GET", "/openapi.json"]] as const

const splitUrl = (url: string): { readonly path: string; readonly search: string } => {
  const q = url.indexOf("?")
  return q === -1 ? { path: url, search: "" } : { path: url.slice(0, q), search: url.slice(q) }
}

const bearerToken = (authorization: string | undefined): string | undefined => {
  const match = authorization === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(authorization)
  return match?.[1]
}

/** Adds `workspaceId` next to every `orgId` in a JSON value (the alias's only difference on the wire). */
const collectOrgIds = (value: unknown, into: Set<string>): void => {
  if (Array.isArray(value)) {
    for (const item of value) collectOrgIds(item, into)
  } else if (value !== null && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) {
      if (key === "orgId" && typeof inner === "string") into.add(inner)
      else collectOrgIds(inner, into)
    }
  }
}

const withWorkspaceIds = (value: unknown, publicIds: ReadonlyMap<string, string>): unknown => {
  if (Array.isArray(value)) return value.map((item) => withWorkspaceIds(item, publicIds))
  if (value === null || typeof value !== "object") return value
  const out: Record<string, unknown> = {}
  for (const [key, inner] of Object.entries(value)) {
    out[key] = withWorkspaceIds(inner, publicIds)
    if (key === "orgId" && typeof inner === "string") out.workspaceId = publicIds.get(inner) ?? null
  }
  return out
}

const isOrgId = Schema.is(OrgId)

const responseText = (response: HttpServerResponse.HttpServerResponse): string | undefined => {
  const body = response.body
  if (body._tag === "Uint8Array") return new TextDecoder().decode(body.body)
  if (body._tag === "Empty") return ""
  return undefined
}

export const EdgeLive = HttpRouter.middleware(
  Effect.gen(function*() {
    const actors = yield* ActorResolver
    const workspaces = yield* WorkspaceResolver
    const idempotency = yield* IdempotencyRepo
    const routes = makeRouteTable(ControlPlaneApi, DOCS_ROUTES)

    const resolveActor = (token: string | undefined): Effect.Effect<ActorResolution> =>
      token === undefined
        ? Effect.succeed({ _tag: "Anonymous" })
        : Effect.map(actors.resolve(token), Option.match({
          onNone: (): ActorResolution => ({ _tag: "Invalid" }),
          onSome: (actor): ActorResolution => ({ _tag: "Resolved", actor })
        }))

    const rewriteAlias = Effect.fnUntraced(function*(response: HttpServerResponse.HttpServerResponse) {
      const text = responseText(response)
      if (text === undefined || !text.includes("\"orgId\"")) return response
      const json: unknown = JSON.parse(text)
      const orgIds = new Set<string>()
      collectOrgIds(json, orgIds)
      const publicIds = yield* workspaces.publicIds([...orgIds].filter(isOrgId))
      return HttpServerResponse.jsonUnsafe(withWorkspaceIds(json, publicIds), {
        status: response.status,
        headers: response.headers
      })
    })

    /** Runs the routed request, and maps what the typed API cannot express to the error envelope. */
    const route = (
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown>,
      path: string
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled> =>
      httpEffect.pipe(
        Effect.flatMap((response) =>
          response.status === 415
            ? renderError(wireError(UnsupportedMediaType, "Request body must be application/json"))
            : Effect.succeed(response)
        ),
        Effect.catchCause((cause) => {
          const failure = Cause.findErrorOption(cause)
          if (Option.isSome(failure) && isRouteNotFound(failure.value)) {
            const methods = routes.methodsAt(path)
            return renderError(
              methods.size > 0
                ? wireError(MethodNotAllowed, `Method not allowed; this path accepts ${[...methods].join(", ")}`)
                : wireError(NotFound, "No route matches this path")
            ).pipe(
              Effect.map((response) =>
                methods.size > 0 ? HttpServerResponse.setHeader(response, "allow", [...methods].join(", ")) : response
              )
            )
          }
          return Effect.logError("Unhandled failure", cause).pipe(
            Effect.andThen(renderError(wireError(InternalError, "An unexpected error occurred")))
          )
        })
      )

    return (httpEffect) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const requestId = newId("req_", now)
        return yield* Effect.provideService(handle(httpEffect, now, requestId), CurrentRequestId, requestId)
      })

    function handle(
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown>,
      now: number,
      requestId: string
    ) {
      return Effect.gen(function*() {
        const original = yield* HttpServerRequest.HttpServerRequest
        const { path: originalPath, search } = splitUrl(original.url)
        const isAlias = ALIAS.test(originalPath)
        let path = isAlias ? originalPath.replace(ALIAS, "/v1/organizations") : originalPath

        const actor = yield* resolveActor(bearerToken(original.headers.authorization))
        let workspace: RequestScope["workspace"] = undefined
        const answer = (error: EdgeError) => renderError(error)

        const run = Effect.gen(function*() {
          const workspaceMatch = WORKSPACE_PATH.exec(path)
          if (actor._tag === "Resolved" && workspaceMatch !== null) {
            const ref = decodeURIComponent(workspaceMatch[1] ?? "")
            const resolved = yield* workspaces.resolve(ref, actor.actor)
            if (Option.isNone(resolved)) return yield* answer(wireError(NotFound, "Workspace not found"))
            workspace = resolved.value
            yield* Effect.annotateCurrentSpan("workspace.id", resolved.value.organization.id)
            path = `/v1/organizations/${resolved.value.organization.id}${workspaceMatch[2] ?? ""}`
          }
          const request = path === originalPath ? original : original.modify({ url: path + search })
          const scope: RequestScope = {
            actor,
            workspace,
            ip: Option.getOrNull(request.remoteAddress),
            userAgent: request.headers["user-agent"] ?? null
          }
          const routed = route(
            httpEffect.pipe(
              Effect.provideService(HttpServerRequest.HttpServerRequest, request),
              Effect.provideService(CurrentRequestScope, scope)
            ),
            path
          )
          const key = request.headers[IDEMPOTENCY_HEADER]
          if (key === undefined || !IDEMPOTENT_METHODS.has(request.method) || actor._tag === "Invalid") return yield* routed
          return yield* withIdempotency(key, request, path, actor._tag === "Resolved" ? actorId(actor.actor) : "", routed)
        })

        const withIdempotency = Effect.fnUntraced(function*(
          key: string,
          request: HttpServerRequest.HttpServerRequest,
          canonicalPath: string,
          principal: string,
          routed: Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled>
        ) {
          if (!isValidIdempotencyKey(key)) {
            return yield* answer(wireError(ValidationFailed, "Idempotency-Key is malformed", {
              header: "Idempotency-Key",
              reason: "malformed"
            }))
          }
          const bodyHash = bodyFingerprint(yield* Effect.orElseSucceed(request.text, () => ""))
          const slot = { principal, method: request.method, path: canonicalPath, key }
          const started = yield* idempotency.begin({
            ...slot,
            bodyHash,
            now: new Date(now),
            staleAfter: IN_FLIGHT_RELEASE_AFTER
          })
          if (started._tag === "InFlight") {
            return yield* answer(wireError(Conflict, "A request with this Idempotency-Key is still in progress"))
          }
          if (started._tag === "Completed") {
              if (started.bodyHash !== bodyHash) {
                return yield* answer(wireError(ValidationFailed, "Idempotency-Key was used with a different body", {
                  header: "Idempotency-Key",
                  reason: "key_reused"
                }))
              }
              return HttpServerResponse.text(started.body, {
                status: started.status,
                contentType: "application/json",
                headers: { ...started.headers, "idempotent-replayed": "true" }
              })
          }
              const response = yield* routed.pipe(Effect.onInterrupt(() => idempotency.release(slot)))
              const text = responseText(response)
              if (isRememberedStatus(response.status) && text !== undefined) {
                yield* idempotency.complete({
                  ...slot,
                  status: response.status,
                  headers: { "x-request-id": requestId },
                  body: text,
                  now: new Date(now)
                })
              } else {
                yield* idempotency.release(slot)
              }
              return response
        })

        const response = withRetryAfter(yield* run)
        const shaped = isAlias ? yield* rewriteAlias(response) : response
        return shaped.headers["x-request-id"] === undefined
          ? HttpServerResponse.setHeader(shaped, "x-request-id", requestId)
          : shaped
      })
    }
  }),
  { global: true }
)

/** 429 answers carry `Retry-After` with the same whole seconds as `details.retryAfterSeconds`. */
const withRetryAfter = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  if (response.status !== 429 || response.headers["retry-after"] !== undefined) return response
  const seconds = /"retryAfterSeconds":(\d+)/.exec(responseText(response) ?? "")?.[1]
  return seconds === undefined ? response : HttpServerResponse.setHeader(response, "retry-after", seconds)
}

const isRouteNotFound = (error: unknown): boolean =>
  HttpServerError.isHttpServerError(error) && error.reason._tag === "RouteNotFound"
