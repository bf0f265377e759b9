/**
 * One error class per wire code. Each encodes as `{ error: { code, message, details, requestId } }` with
 * its HTTP status; `requestId` is filled from the current request when the response is encoded.
 */
import { Effect, Schema } from "effect"
import { RequestIdSlot } from "./wire.ts"

export const ErrorDetails = Schema.Record(Schema.String, Schema.Unknown)
export type ErrorDetails = typeof ErrorDetails.Type

const errorBody = <const Code extends string>(code: Code) =>
  Schema.Struct({
    code: Schema.tag(code),
    message: Schema.String,
    details: ErrorDetails.pipe(Schema.withConstructorDefault(Effect.succeed({}))),
    requestId: RequestIdSlot
  })

export class BadRequest extends Schema.Error<BadRequest>("BadRequest")(
  { error: errorBody("bad_request") },
  { httpApiStatus: 400 }
) {}
export class Unauthenticated extends Schema.Error<Unauthenticated>("Unauthenticated")(
  { error: errorBody("unauthenticated") },
  { httpApiStatus: 401 }
) {}
export class Forbidden extends Schema.Error<Forbidden>("Forbidden")(
  { error: errorBody("forbidden") },
  { httpApiStatus: 403 }
) {}
export class NotFound extends Schema.Error<NotFound>("NotFound")(
  { error: errorBody("not_found") },
  { httpApiStatus: 404 }
) {}
export class MethodNotAllowed extends Schema.Error<MethodNotAllowed>("MethodNotAllowed")(
  { error: errorBody("unsupported") },
  { httpApiStatus: 405 }
) {}
export class UnsupportedMediaType extends Schema.Error<UnsupportedMediaType>("UnsupportedMediaType")(
  { error: errorBody("unsupported") },
  { httpApiStatus: 415 }
) {}
export class Conflict extends Schema.Error<Conflict>("Conflict")(
  { error: errorBody("conflict") },
  { httpApiStatus: 409 }
) {}
export class PreconditionFailed extends Schema.Error<PreconditionFailed>("PreconditionFailed")(
  { error: errorBody("precondition_failed") },
  { httpApiStatus: 412 }
) {}
export class ValidationFailed extends Schema.Error<ValidationFailed>("ValidationFailed")(
  { error: errorBody("validation_failed") },
  { httpApiStatus: 422 }
) {}
export class PayloadTooLarge extends Schema.Error<PayloadTooLarge>("PayloadTooLarge")(
  { error: errorBody("payload_too_large") },
  { httpApiStatus: 413 }
) {}
export class RateLimited extends Schema.Error<RateLimited>("RateLimited")(
  { error: errorBody("rate_limited") },
  { httpApiStatus: 429 }
) {}
export class InternalError extends Schema.Error<InternalError>("InternalError")(
  { error: errorBody("internal_error") },
  { httpApiStatus: 500 }
) {}
// Codes the contract adds: an external provider failed or timed out; the database did not answer in time.
export class ProviderUnavailable extends Schema.Error<ProviderUnavailable>("ProviderUnavailable")(
  { error: errorBody("provider_unavailable") },
  { httpApiStatus: 502 }
) {}
export class ServiceUnavailable extends Schema.Error<ServiceUnavailable>("ServiceUnavailable")(
  { error: errorBody("service_unavailable") },
  { httpApiStatus: 503 }
) {}
export class NotImplemented extends Schema.Error<NotImplemented>("NotImplemented")(
  { error: errorBody("not_implemented") },
  { httpApiStatus: 501 }
) {}
export class ProviderConnectionConflict extends Schema.Error<ProviderConnectionConflict>("ProviderConnectionConflict")(
  { error: errorBody("provider_connection_conflict") },
  { httpApiStatus: 409 }
) {}
export class ContractVersionUnsupported extends Schema.Error<ContractVersionUnsupported>("ContractVersionUnsupported")(
  { error: errorBody("contract_version_unsupported") },
  { httpApiStatus: 409 }
) {}
// State-plane codes; the spec leaves their statuses open (see docs/decisions.md).
export class AlreadyClaimed extends Schema.Error<AlreadyClaimed>("AlreadyClaimed")(
  { error: errorBody("already_claimed") },
  { httpApiStatus: 409 }
) {}
export class LeaseLost extends Schema.Error<LeaseLost>("LeaseLost")(
  { error: errorBody("lease_lost") },
  { httpApiStatus: 409 }
) {}
export class DepsNotReady extends Schema.Error<DepsNotReady>("DepsNotReady")(
  { error: errorBody("deps_not_ready") },
  { httpApiStatus: 409 }
) {}
export class RunTerminal extends Schema.Error<RunTerminal>("RunTerminal")(
  { error: errorBody("run_terminal") },
  { httpApiStatus: 409 }
) {}
export class ObjectMissing extends Schema.Error<ObjectMissing>("ObjectMissing")(
  { error: errorBody("object_missing") },
  { httpApiStatus: 404 }
) {}
export class RefConflict extends Schema.Error<RefConflict>("RefConflict")(
  { error: errorBody("ref_conflict") },
  { httpApiStatus: 409 }
) {}

type WireErrorClass<E> = new(
  props: { readonly error: { readonly message: string; readonly details?: ErrorDetails } }
) => E

/** Builds a wire error from a message and optional details: `wireError(NotFound, "Project not found")`. */
export const wireError = <E>(Class: WireErrorClass<E>, message: string, details?: ErrorDetails): E =>
  new Class({ error: details === undefined ? { message } : { message, details } })

/** `422 validation_failed` with `details.fields` mapping each field to its messages. */
export const validationFailed = (
  fields: Record<string, ReadonlyArray<string>>,
  message = "Request validation failed"
) => wireError(ValidationFailed, message, { fields })
