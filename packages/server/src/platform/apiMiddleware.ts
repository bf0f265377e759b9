/**
 * The typed API's middleware: bearer authentication (from what the edge resolved), the one enforcement
 * point for every endpoint's declared requirement, and the 422/400/404 shaping of schema failures.
 */
import {
  Authentication,
  Authorization,
  BadRequest,
  CurrentActor,
  Forbidden,
  NotFound,
  type Permission,
  RequestValidation,
  RequiredAccess,
  Unauthenticated,
  validationFailed,
  wireError
} from "@cp/domain"
import { Context, Effect, Layer, SchemaIssue, type Types } from "effect"
import { HttpRouter, type HttpServerResponse } from "effect/http"
import { type HttpApiEndpoint, HttpApiMiddleware } from "effect/http-api"
import type { HttpApiSchemaError } from "effect/http-api/HttpApiError"
import { decide } from "./rbac.ts"
import { CurrentRequestScope } from "./requestScope.ts"

/** What a middleware answers: the endpoint's response, or one of its own errors. */
type Answer<E> = Effect.Effect<HttpServerResponse.HttpServerResponse, E | Types.unhandled>

/** A check before the endpoint runs: nothing, or one of its errors. */
type Check<E> = Effect.Effect<void, E, HttpRouter.RouteContext>

export const AuthenticationLive = Layer.succeed(Authentication)({
  bearer: (httpEffect) =>
    Effect.flatMap(CurrentRequestScope, ({ actor }): Answer<Unauthenticated> =>
      actor._tag === "Resolved"
        ? Effect.provideService(httpEffect, CurrentActor, actor.actor)
        : Effect.fail(wireError(Unauthenticated, "Missing, invalid, expired or revoked credential")))
})

/** The requirement an endpoint declares; an endpoint without one fails closed (and the test suite). */
export const requirementOf = (endpoint: HttpApiEndpoint.Top) =>
  Context.getOrUndefined(endpoint.annotations, RequiredAccess)

/** The caller's grants on the path's workspace allow `permission` (on the path's project, if it names one). */
const checkPermission = (permission: Permission) =>
  Effect.flatMap(CurrentRequestScope, ({ workspace }): Check<NotFound | Forbidden> =>
    workspace === undefined
      ? Effect.fail(wireError(NotFound, "Workspace not found"))
      : Effect.flatMap(HttpRouter.RouteContext, (route) =>
        decide(workspace.grants, permission, route.params.projectId).allow
          ? Effect.void
          : Effect.fail(wireError(Forbidden, `Missing permission ${permission}`, { permission }))))

/**
 * The router calls this once per endpoint when it is built, so the requirement is looked up once and each request
 * runs only the check it needs (none for public and any-credential routes).
 */
export const AuthorizationLive = Layer.succeed(Authorization)((httpEffect, { endpoint }) => {
  const requirement = requirementOf(endpoint)
  switch (requirement?._tag) {
    case "None":
    case "Authenticated":
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
})

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

export const ApiMiddlewareLive = Layer.mergeAll(AuthenticationLive, AuthorizationLive, RequestValidationLive)
