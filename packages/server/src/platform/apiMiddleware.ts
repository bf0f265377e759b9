/**
 * The typed API's middleware: bearer authentication (from what the edge resolved), which hands handlers the caller
 * and, on workspace routes, the workspace; the one enforcement point for every endpoint's declared requirement; and
 * the 422/400/404 shaping of schema failures.
 */
import {
  Authentication,
  Authorization,
  BadRequest,
  CurrentActor,
  CurrentWorkspace,
  Forbidden,
  NotFound,
  type Permission,
  RequestValidation,
  RequiredAccess,
  Unauthenticated,
  validationFailed,
  wireError,
  WorkspaceAuthentication,
  WorkspaceAuthorization
} from "@cp/domain"
import { Context, Effect, Layer, SchemaIssue, type Types } from "effect"
import { HttpRouter, type HttpServerResponse } from "effect/http"
import { type HttpApiEndpoint, HttpApiMiddleware } from "effect/http-api"
import type { HttpApiSchemaError } from "effect/http-api/HttpApiError"
import { decide } from "./rbac.ts"
import { CurrentRequestScope, workspaceNotFound } from "./requestScope.ts"

/** The endpoint's response, needing nothing a middleware has not provided. */
type Served = Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled>

/** What a middleware answers: the endpoint's response, or one of its own errors. */
type Answer<E, R = never> = Effect.Effect<HttpServerResponse.HttpServerResponse, E | Types.unhandled, R>

export const unauthenticated = () => wireError(Unauthenticated, "Missing, invalid, expired or revoked credential")

export const AuthenticationLive = Layer.succeed(Authentication)({
  bearer: (httpEffect) =>
    Effect.flatMap(CurrentRequestScope, ({ actor }): Answer<Unauthenticated> =>
      actor._tag === "Resolved"
        ? Effect.provideService(httpEffect, CurrentActor, actor.actor)
        : Effect.fail(unauthenticated()))
})

export const WorkspaceAuthenticationLive = Layer.succeed(WorkspaceAuthentication)({
  bearer: (httpEffect) =>
    Effect.flatMap(CurrentRequestScope, ({ actor, workspace }): Answer<Unauthenticated | NotFound> => {
      if (actor._tag !== "Resolved") return Effect.fail(unauthenticated())
      // The edge resolved the path's workspace or answered 404; only a path the router reads differently, such as
      // `/v1/organizations//members`, comes here without one.
      if (workspace === undefined) return Effect.fail(workspaceNotFound())
      // Both in one context update: no copy of the request context, and no second switch to a new one.
      return Effect.updateContext(
        httpEffect,
        (context: Context.Context<never>) =>
          context.pipe(Context.add(CurrentActor, actor.actor), Context.add(CurrentWorkspace, workspace))
      )
    })
})

/** The requirement an endpoint declares; an endpoint without one fails closed (and the test suite). */
export const requirementOf = (endpoint: HttpApiEndpoint.Top) =>
  Context.getOrUndefined(endpoint.annotations, RequiredAccess)

/**
 * The check `endpoint`'s requirement asks for, around `httpEffect`; `checkPermission` checks a permission. The router
 * calls this once per endpoint when it is built, so the requirement is looked up once and each request runs only the
 * check it needs (none for public and any-credential routes).
 */
const authorize = <R>(
  endpoint: HttpApiEndpoint.Top,
  httpEffect: Served,
  checkPermission: (permission: Permission) => Effect.Effect<void, Forbidden, R>
): Answer<Forbidden, CurrentActor | R> => {
  const requirement = requirementOf(endpoint)
  switch (requirement?._tag) {
    case "None":
    case "Authenticated":
    case "ResourcePermission":
      return httpEffect
    case "Session":
      return Effect.flatMap(
        CurrentActor,
        (actor): Answer<Forbidden> =>
          actor.kind === "user"
            ? httpEffect
            : Effect.fail(wireError(Forbidden, "This route needs a signed-in user session"))
      )
    case "Permission":
      return Effect.andThen(checkPermission(requirement.permission), httpEffect)
    case undefined:
      return Effect.fail(wireError(Forbidden, "This route declares no access rule"))
  }
}

/** Outside a workspace there are no grants to hold a permission: such a declaration fails closed. */
export const AuthorizationLive = Layer.succeed(Authorization)((httpEffect, { endpoint }) =>
  requirementOf(endpoint)?._tag === "ResourcePermission"
    ? Effect.fail(wireError(Forbidden, "This route checks a permission outside a workspace"))
    : authorize(
      endpoint,
      httpEffect,
      () => Effect.fail(wireError(Forbidden, "This route checks a permission outside a workspace"))
    )
)

/** The caller's grants on the path's workspace allow `permission` (on the path's project, if it names one). */
const checkPermission = (permission: Permission) =>
  Effect.flatMap(
    CurrentWorkspace,
    ({ grants }) =>
      Effect.flatMap(HttpRouter.RouteContext, (route) =>
        decide(grants, permission, route.params.projectId).allow
          ? Effect.void
          : Effect.fail(wireError(Forbidden, `Missing permission ${permission}`, { permission })))
  )

export const WorkspaceAuthorizationLive = Layer.succeed(WorkspaceAuthorization)((httpEffect, { endpoint }) =>
  authorize(endpoint, httpEffect, checkPermission)
)

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** `details.fields`: dotted path of each failing field → its messages (`_` for the value as a whole). */
const fieldsOf = (error: HttpApiSchemaError): Record<string, Array<string>> => {
  const fields: Record<string, Array<string>> = {}
  for (const issue of formatIssues(error.cause.issue).issues) {
    const field = (issue.path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment))
      .join(".") || "_"
    ;(fields[field] ??= []).push(issue.message)
  }
  return fields
}

const isMalformedJson = (error: HttpApiSchemaError): boolean =>
  error.kind === "Payload" && error.cause.issue._tag === "InvalidValue" &&
  error.cause.issue.annotations?.message === "Expected a valid JSON body"

export const RequestValidationLive = HttpApiMiddleware.layerSchemaErrorTransform(RequestValidation, (error) => {
  if (error.kind === "Params") return Effect.fail(wireError(NotFound, "Not found"))
  if (isMalformedJson(error)) return Effect.fail(wireError(BadRequest, "Request body is not valid JSON"))
  return Effect.fail(validationFailed(fieldsOf(error)))
})

export const ApiMiddlewareLive = Layer.mergeAll(
  AuthenticationLive,
  WorkspaceAuthenticationLive,
  AuthorizationLive,
  WorkspaceAuthorizationLive,
  RequestValidationLive
)
