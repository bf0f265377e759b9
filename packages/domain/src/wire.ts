/**
 * The wire envelopes. Handlers and services return plain values and fail with the error classes in
 * `errors.ts`; these schema transforms add `{ data, meta }` and the `requestId` when the router encodes
 * the response, so no handler ever builds an envelope by hand.
 */
import { Context, Effect, Schema, SchemaGetter } from "effect"

/** The current request's id, set once per request by the server's request-id middleware. */
export const CurrentRequestId = Context.Reference<string>("@cp/domain/CurrentRequestId", {
  defaultValue: () => "req_unknown"
})

const currentRequestId = Effect.service(CurrentRequestId)

/** A request id slot: callers never fill it; encoding takes the current request's id. */
export const RequestIdSlot = Schema.String.pipe(
  Schema.decodeTo(Schema.String, {
    decode: SchemaGetter.passthrough(),
    encode: SchemaGetter.transformEffect((given: string) => given === "" ? currentRequestId : Effect.succeed(given))
  }),
  Schema.withConstructorDefault(Effect.succeed(""))
)

export const Meta = Schema.Struct({
  requestId: Schema.String,
  cursor: Schema.NullOr(Schema.String)
})

/** `{ data: {fields}, meta }` around a plain value; the client decodes back to the plain value. */
export const Envelope = <const F extends Schema.Struct.Fields>(fields: F) => {
  const Data = Schema.Struct(fields)
  return Schema.Struct({ data: Data, meta: Meta }).pipe(
    Schema.decodeTo(Schema.toType(Data), {
      decode: SchemaGetter.transform((envelope) => envelope.data),
      encode: SchemaGetter.transformEffect((value) =>
        Effect.map(currentRequestId, (requestId) => ({ data: value, meta: { requestId, cursor: null } }))
      )
    })
  )
}

/** `{ data, meta }` around a union of answers (a claim's outcomes); the client decodes back to the answer. */
export const EnvelopeOf = <A, I, RD, RE>(Data: Schema.Codec<A, I, RD, RE>) =>
  Schema.Struct({ data: Data, meta: Meta }).pipe(
    Schema.decodeTo(Schema.toType(Data), {
      decode: SchemaGetter.transform((envelope: { readonly data: A }) => envelope.data),
      encode: SchemaGetter.transformEffect((value: A) =>
        Effect.map(currentRequestId, (requestId) => ({ data: value, meta: { requestId, cursor: null } }))
      )
    })
  )

/** A page as services return it: the data and the cursor of the next page. */
export interface Paged<A> {
  readonly data: A
  readonly cursor: string | null
}

/** One page of a list: the service returns `{ data, cursor }`, the wire carries the cursor in `meta`. */
export const Page = <const F extends Schema.Struct.Fields>(fields: F) => {
  const Data = Schema.Struct(fields)
  const PageValue = Schema.Struct({ data: Schema.toType(Data), cursor: Schema.NullOr(Schema.String) })
  return Schema.Struct({ data: Data, meta: Meta }).pipe(
    Schema.decodeTo(PageValue, {
      decode: SchemaGetter.transform((envelope) => ({ data: envelope.data, cursor: envelope.meta.cursor })),
      encode: SchemaGetter.transformEffect((page) =>
        Effect.map(currentRequestId, (requestId) => ({ data: page.data, meta: { requestId, cursor: page.cursor } }))
      )
    })
  )
}

/** ISO 8601 UTC with milliseconds on the wire, `Date` in code. */
export const Timestamp = Schema.Date.pipe(
  Schema.encodeTo(Schema.String.annotate({ format: "date-time" }), {
    decode: SchemaGetter.Date(),
    encode: SchemaGetter.transform((date: Date) => date.toISOString())
  })
)

/** The largest request body a JSON route accepts unless it declares its own cap (contract: 1 MiB, 413 above it). */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

/**
 * An endpoint annotation for a route that takes a larger (or smaller) raw body than the JSON default, e.g. a
 * provider webhook: `.annotateMerge(maxBodyBytes(5 * 1024 * 1024))`. The edge enforces it before the body is read.
 */
export class MaxBodyBytes extends Context.Service<MaxBodyBytes, number>()("@cp/domain/MaxBodyBytes") {}

export const maxBodyBytes = (bytes: number) => Context.make(MaxBodyBytes, bytes)
