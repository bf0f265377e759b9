/** Renders a wire error outside the typed API (edge answers: 404, 405, 413, 415, 400, 401, 409, 422, 500, 503). */
import {
  BadRequest,
  Conflict,
  InternalError,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  RateLimited,
  ServiceUnavailable,
  Unauthenticated,
  UnsupportedMediaType,
  ValidationFailed
} from "@cp/domain"
import { Effect, Schema, SchemaAST } from "effect"
import { HttpServerResponse } from "effect/http"

const EdgeError = Schema.Union([
  BadRequest,
  Unauthenticated,
  NotFound,
  MethodNotAllowed,
  Conflict,
  UnsupportedMediaType,
  ValidationFailed,
  RateLimited,
  PayloadTooLarge,
  ServiceUnavailable,
  InternalError
])
export type EdgeError = typeof EdgeError.Type

const encodeEdgeError = Schema.encodeEffect(EdgeError)

const statusOf = new Map<unknown, number>(
  EdgeError.members.map((member) => [member, SchemaAST.resolveAt<number>("httpApiStatus")(member.ast) ?? 500])
)

/** The error envelope as a response, with the status declared on the error's class. */
export const renderError = (error: EdgeError): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  encodeEdgeError(error).pipe(
    Effect.map((body) => HttpServerResponse.jsonUnsafe(body, { status: statusOf.get(error.constructor) ?? 500 })),
    Effect.orDie
  )
