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
import { Context, Effect, Layer, SchemaIssue } from "effect"
import { HttpRouter } from "effect/http"
import { type HttpApiEndpoint, HttpApiMiddleware } from "effect/http-api"
import type { HttpApiSchemaError } from "effect/http-api/HttpApiError"
import { decide } from "./rbac.ts"
import { CurrentRequestScope } from "./requestScope.ts"

export const AuthenticationLive = Layer.succeed(Authentication)({
  bearer: (httpEffect) =>
    Effect.gen(function*() {
      const { actor } = yield* CurrentRequestScope
      if (actor._tag !== "Resolved") {
        return yield* wireError(Unauthenticated, "Missing, invalid, expired or revoked credential")
      }
      return yield* Effect.provideService(httpEffect, CurrentActor, actor.actor)
    })
})

/** The requirement an endpoint declares; an endpoint without one fails closed (and the test suite). */
export const requirementOf = (endpoint: HttpApiEndpoint.Top) => Context.getOrUndefined(endpoint.annotations, RequiredAccess)

const checkPermission = Effect.fnUntraced(function*(permission: Permission) {
  const scope = yield* CurrentRequestScope
  if (scope.workspace === undefined) return yield* wireError(NotFound, "Workspace not found")
  const route = yield* HttpRouter.RouteContext
  const decision = decide(scope.workspace.grants, permission, route.params.projectId)
  if (!decision.allow) return yield* wireError(Forbidden, `Missing permission ${permission}`, { permission })
})

export const AuthorizationLive = Layer.succeed(Authorization)((httpEffect, { endpoint }) =>
  Effect.gen(function*() {
    const requirement = requirementOf(endpoint)
    const actor = yield* CurrentActor
    switch (requirement?._tag) {
      case "None":
      case "Authenticated":
        break
      case "Session":
        if (actor.kind !== "user") return yield* wireError(Forbidden, "This route needs a signed-in user session")
        break
      case "Permission":
        yield* checkPermission(requirement.permission)
        break
      case undefined:
        return yield* wireError(Forbidden, "This route declares no access rule")
    }
    return yield* httpEffect
  })
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

export const ApiMiddlewareLive = Layer.mergeAll(AuthenticationLive, AuthorizationLive, RequestValidationLive)
