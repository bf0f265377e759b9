/**
 * The edge: one global middleware that runs before the typed router on every request. It assigns the
 * request id, rewrites the `/v1/workspaces` alias, resolves the bearer token and then the workspace
 * reference (routing order of contract §4), applies `Idempotency-Key`, and turns every answer the typed
 * API cannot give (404, 405, 415, 500) into the error envelope.
 */
import {
  AcceptsBasicCredentials,
  type Actor,
  actorId,
  BadRequest,
  ControlPlaneApi,
  CurrentRequestId,
  DEFAULT_MAX_BODY_BYTES,
  InternalError,
  MaxBodyBytes,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  ReachesHiddenWorkspace,
  ServiceUnavailable,
  UnsupportedMediaType,
  wireError
} from "@cp/domain"
import { IdempotencyRepo, Transactor } from "@cp/persistence"
import { ByteSize, Cause, Clock, Context, Effect, identity, Option, type Types } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { isSqlError } from "effect/sql/SqlError"
import { ActorResolver } from "./actors.ts"
import { aliasResponse, canonicalAliasPath } from "./alias.ts"
import { requirementOf, unauthenticated } from "./apiMiddleware.ts"
import { isCustomMethod } from "./customMethods.ts"
import { IDEMPOTENCY_HEADER, IDEMPOTENT_METHODS, responseText, withIdempotencyKey } from "./idempotency.ts"
import { newId } from "./ids.ts"
import { ServerKeys } from "./keys.ts"
import { logAccess } from "./logging.ts"
import { RETRY_AFTER_SECONDS } from "./nodeServer.ts"
import { renderError } from "./render.ts"
import { type ActorResolution, CurrentRequestScope, type RequestScope, workspaceNotFound } from "./requestScope.ts"
import { makeRouteTable } from "./routeTable.ts"
import { WorkspaceResolver } from "./workspaceResolver.ts"

const WORKSPACE_PATH = /^\/v1\/organizations\/([^/?]+)(.*)$/
const DOCS_ROUTES = [["GET", "/docs"], ["GET", "/openapi.json"]] as const

const splitUrl = (url: string): { readonly path: string; readonly search: string } => {
  const q = url.indexOf("?")
  return q === -1 ? { path: url, search: "" } : { path: url.slice(0, q), search: url.slice(q) }
}

const bearerToken = (authorization: string | undefined): string | undefined =>
  authorization === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1]

/** The password of `Authorization: Basic` credentials (any username), where a route takes a token that way. */
const basicPassword = (authorization: string | undefined): string | undefined => {
  const encoded = authorization === undefined ? undefined : /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization)?.[1]
  if (encoded === undefined) return undefined
  const decoded = Buffer.from(encoded, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  return colon === -1 || colon === decoded.length - 1 ? undefined : decoded.slice(colon + 1)
}

const isRouteNotFound = (error: unknown): boolean =>
  HttpServerError.isHttpServerError(error) && error.reason._tag === "RouteNotFound"

/** A body read that failed: stopped at the `MaxBodySize` in effect, or the client broke off mid-body. */
const bodyReadFailure = (error: unknown): "BodyTooLarge" | "Parse" | undefined =>
  HttpServerError.isHttpServerError(error) && error.reason._tag === "RequestParseError"
    ? error.reason.reason
    : undefined

/** The database could not be reached, or did not answer in time: the caller may retry, the server recovers. */
const isDatabaseUnavailable = (error: unknown): boolean =>
  isSqlError(error) && (error.reason._tag === "ConnectionError" || error.reason._tag === "StatementTimeoutError" ||
    error.reason._tag === "LockTimeoutError")

const unavailable = (message: string) =>
  Effect.map(
    renderError(wireError(ServiceUnavailable, message, { retryAfterSeconds: RETRY_AFTER_SECONDS })),
    HttpServerResponse.setHeader("retry-after", String(RETRY_AFTER_SECONDS))
  )

const tooLarge = (cap: number) =>
  renderError(wireError(PayloadTooLarge, `Request body exceeds the limit of ${cap} bytes`, { limitBytes: cap }))

/** What the access line needs that only the edge learns on the way: the caller, the workspace, a 500's cause. */
interface Seen {
  actorKind: string
  workspace: string | null
  cause: Cause.Cause<unknown> | undefined
}

export const EdgeLive = HttpRouter.middleware(
  Effect.gen(function*() {
    const actors = yield* ActorResolver
    const workspaces = yield* WorkspaceResolver
    const idempotency = yield* IdempotencyRepo
    const tx = yield* Transactor
    const keys = yield* ServerKeys
    const routes = makeRouteTable(ControlPlaneApi, DOCS_ROUTES)
    const hiddenReach = makeRouteTable(
      ControlPlaneApi,
      [],
      (endpoint) => Context.getOrUndefined(endpoint.annotations, ReachesHiddenWorkspace) === true
    )
    const basicRoutes = makeRouteTable(
      ControlPlaneApi,
      [],
      (endpoint) => Context.getOrUndefined(endpoint.annotations, AcceptsBasicCredentials) === true
    )
    /** The request's token: a bearer token, or on routes that take them, the password of Basic credentials. */
    const tokenOf = (authorization: string | undefined, method: string, path: string): string | undefined =>
      bearerToken(authorization) ??
        (basicRoutes.endpointAt(method, path) === undefined ? undefined : basicPassword(authorization))
    const ownBodyCaps = makeRouteTable(
      ControlPlaneApi,
      [],
      (endpoint) => Context.getOrUndefined(endpoint.annotations, MaxBodyBytes) !== undefined
    )
    /** The route's own body cap, when it declares one (`maxBodyBytes`); the JSON default applies otherwise. */
    const ownBodyCap = (method: string, path: string): number | undefined => {
      const endpoint = ownBodyCaps.endpointAt(method, path)
      return endpoint === undefined ? undefined : Context.getOrUndefined(endpoint.annotations, MaxBodyBytes)
    }

    const resolution = (actor: Option.Option<Actor>): ActorResolution =>
      Option.match(actor, {
        onNone: (): ActorResolution => ({ _tag: "Invalid" }),
        onSome: (actor): ActorResolution => ({ _tag: "Resolved", actor })
      })

    /**
     * The bearer token, then the workspace reference `ref` of a workspace path (routing order of contract §4); the
     * workspace is undefined when the path names none or there is no actor, None when it is not visible. A route
     * marked `reachesHiddenWorkspace` (an invitee accepting by token) is reached even without a grant there.
     */
    const resolveCaller = Effect.fnUntraced(function*(
      token: string | undefined,
      ref: string | undefined,
      method: string,
      path: string
    ) {
      const anonymous: ActorResolution = { _tag: "Anonymous" }
      if (token === undefined) return { actor: anonymous, workspace: undefined }
      if (ref === undefined) return { actor: resolution(yield* actors.resolve(token)), workspace: undefined }
      if (hiddenReach.endpointAt(method, path) === undefined) {
        const found = yield* actors.resolveOnWorkspace(token, ref)
        return { actor: resolution(found.actor), workspace: found.workspace }
      }
      const actor = resolution(yield* actors.resolve(token))
      if (actor._tag !== "Resolved") return { actor, workspace: undefined }
      return { actor, workspace: yield* workspaces.resolveEvenIfHidden(ref, actor.actor) }
    })

    /**
     * Whether this caller's `Idempotency-Key` is looked at (routing order of contract §4: the credential first): not
     * with an invalid credential, and without one only on a route that needs none, so the route's 401 comes first.
     */
    const mayUseIdempotencyKey = (actor: ActorResolution, method: string, path: string): boolean => {
      if (actor._tag !== "Anonymous") return actor._tag === "Resolved"
      const endpoint = routes.endpointAt(method, path)
      return endpoint !== undefined && requirementOf(endpoint)?._tag === "None"
    }

    /**
     * The router found no route although the API has one for this method and path: the router could not read the
     * path (an escape that is not UTF-8). The credential still comes first (401 where the route needs one), then the
     * path is a malformed id (404). Any other miss goes on to `noRoute`.
     */
    const unreadablePath = (actor: ActorResolution, method: string, path: string) => (error: unknown) => {
      const endpoint = routes.endpointAt(method, path)
      if (endpoint === undefined) return Effect.fail(error)
      return renderError(
        actor._tag !== "Resolved" && requirementOf(endpoint)?._tag !== "None"
          ? unauthenticated()
          : wireError(NotFound, "Not found")
      )
    }

    /**
     * No route for this path: 405 with `Allow` when another method serves it, 404 otherwise; `LOCK`/`UNLOCK` anywhere
     * their routes are not is 405 (contract §4).
     */
    const noRoute = (method: string, path: string) => {
      const methods = [...routes.methodsAt(path)].join(", ")
      return methods === "" && !isCustomMethod(method)
        ? renderError(wireError(NotFound, "No route matches this path"))
        : Effect.map(
          renderError(
            wireError(
              MethodNotAllowed,
              methods === ""
                ? `Method ${method} is not allowed here`
                : `Method not allowed; this path accepts ${methods}`
            )
          ),
          methods === "" ? identity : HttpServerResponse.setHeader("allow", methods)
        )
    }

    /**
     * Every failure becomes an envelope: a missing route 404/405, anything else a 500 whose cause the access line
     * logs. A client that went away interrupts the request; that is not an error and is not logged.
     */
    const renderFailures =
      (method: string, path: string, bodyCap: number, seen: Seen) =>
      (cause: Cause.Cause<unknown>): Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled> => {
        if (Cause.hasInterruptsOnly(cause)) return Effect.interrupt
        const failure = Cause.findErrorOption(cause)
        if (Option.isSome(failure) && isRouteNotFound(failure.value)) return noRoute(method, path)
        // The typed API reads JSON bodies with `orDie`: an overflow arrives as a defect.
        const bodyRead = cause.reasons.map((reason) =>
          Cause.isFailReason(reason)
            ? bodyReadFailure(reason.error)
            : Cause.isDieReason(reason)
            ? bodyReadFailure(reason.defect)
            : undefined
        )
        if (bodyRead.includes("BodyTooLarge")) return tooLarge(bodyCap)
        if (bodyRead.includes("Parse")) return renderError(wireError(BadRequest, "The request body could not be read"))
        seen.cause = cause // logged once, with the request's access line
        const database = cause.reasons.some((reason) =>
          (Cause.isFailReason(reason) && isDatabaseUnavailable(reason.error)) ||
          (Cause.isDieReason(reason) && isDatabaseUnavailable(reason.defect))
        )
        return database
          ? unavailable("The database is unavailable; retry later")
          : renderError(wireError(InternalError, "An unexpected error occurred"))
      }

    /** The typed router's own 415 is plain text: give it the envelope. */
    const withEnvelope415 = (response: HttpServerResponse.HttpServerResponse) =>
      response.status === 415
        ? renderError(wireError(UnsupportedMediaType, "Request body must be application/json"))
        : Effect.succeed(response)

    const handle = Effect.fnUntraced(function*(
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown>,
      now: number,
      requestId: string,
      seen: Seen
    ) {
      const original = yield* HttpServerRequest.HttpServerRequest
      const { path: sentPath, search } = splitUrl(original.url)
      // A client joining a base URL that ends in "/" with a path that starts with one (the docs page, with the
      // document's relative server "/") sends "//v1/…": the same route.
      const requestedPath = sentPath.startsWith("//") ? sentPath.replace(/^\/+/, "/") : sentPath
      const aliasPath = canonicalAliasPath(requestedPath)
      let path = aliasPath ?? requestedPath
      // Not URL-decoded: valid references (`org_`/`ws_` ids, slugs) contain no escapes.
      const workspaceMatch = WORKSPACE_PATH.exec(path)
      const caller = yield* resolveCaller(
        tokenOf(original.headers.authorization, original.method, path),
        workspaceMatch?.[1],
        original.method,
        path
      )
      const actor = caller.actor
      seen.actorKind = actor._tag === "Resolved" ? actor.actor.kind : actor._tag === "Invalid" ? "invalid" : "anonymous"
      let workspace: RequestScope["workspace"] = undefined
      if (actor._tag === "Resolved" && caller.workspace !== undefined) {
        if (Option.isNone(caller.workspace)) return yield* renderError(workspaceNotFound())
        workspace = caller.workspace.value
        seen.workspace = workspace.organization.id
        yield* Effect.annotateCurrentSpan("workspace.id", workspace.organization.id)
        path = `/v1/organizations/${workspace.organization.id}${workspaceMatch?.[2] ?? ""}`
      }

      const request = path === sentPath ? original : original.modify({ url: path + search })
      const scope: RequestScope = {
        actor,
        workspace,
        ip: Option.getOrNull(request.remoteAddress),
        userAgent: request.headers["user-agent"] ?? null
      }
      const served = Effect.flatMap(httpEffect, withEnvelope415).pipe(
        Effect.catchIf(isRouteNotFound, unreadablePath(actor, request.method, path))
      )
      // Each provided service deepens the request's context, and a deep one is copied whole: provide only a change.
      const routed = Effect.provideService(
        request === original ? served : Effect.provideService(served, HttpServerRequest.HttpServerRequest, request),
        CurrentRequestScope,
        scope
      )
      const key = request.headers[IDEMPOTENCY_HEADER]
      const response = key === undefined || !IDEMPOTENT_METHODS.has(request.method) ||
          !mayUseIdempotencyKey(actor, request.method, path)
        ? yield* routed
        : yield* withIdempotencyKey(idempotency, tx, keys, {
          key,
          principal: actor._tag === "Resolved" ? actorId(actor.actor) : "",
          method: request.method,
          canonicalPath: path,
          body: yield* Effect.orElseSucceed(request.text, () => ""),
          now,
          requestId
        }, routed)
      return aliasPath === undefined ? response : yield* aliasResponse(workspaces, response, responseText(response))
    })

    return (httpEffect) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const requestId = newId("req_", now)
        const request = yield* HttpServerRequest.HttpServerRequest
        const { path: requestedPath } = splitUrl(request.url)
        const path = canonicalAliasPath(requestedPath) ?? requestedPath
        yield* Effect.annotateCurrentSpan("http.request.id", requestId)
        const seen: Seen = { actorKind: "anonymous", workspace: null, cause: undefined }
        // Bodies are capped before anything reads them (or asks who is calling): a declared length above the cap
        // is refused at once; a chunked body is counted as it streams in (`MaxBodySize`) and refused at the cap.
        const ownCap = ownBodyCap(request.method, path)
        const bodyCap = ownCap ?? DEFAULT_MAX_BODY_BYTES
        // Reading `headers` builds them anew: only requests that may carry a body pay for it a second time.
        const declaredLength = request.method === "GET" || request.method === "HEAD"
          ? undefined
          : request.headers["content-length"]
        const answer = declaredLength !== undefined && Number(declaredLength) > bodyCap
          ? tooLarge(bodyCap)
          : handle(httpEffect, now, requestId, seen).pipe(
            Effect.catchCause(renderFailures(request.method, path, bodyCap, seen)),
            // The server provides the default cap once (`serveApp`); only a route with its own adds one.
            ownCap === undefined
              ? identity
              : Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(ownCap))
          )
        const response = yield* Effect.provideService(answer, CurrentRequestId, requestId)
        const end = yield* Clock.currentTimeMillis
        yield* logAccess(response.status, () => ({
          requestId,
          method: request.method,
          route: routes.endpointAt(request.method, path)?.path ?? path,
          status: response.status,
          durationMs: end - now,
          workspace: seen.workspace,
          actorKind: seen.actorKind
        }), seen.cause)
        return response.headers["x-request-id"] === undefined
          ? HttpServerResponse.setHeader(response, "x-request-id", requestId)
          : response
      })
  }),
  { global: true }
)
