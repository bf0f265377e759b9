/**
 * Reads the wire envelopes of a raw `call` answer: `{ data, meta }` on success, `{ error }` otherwise. Every reader
 * checks the JSON against the domain's schemas in their wire form (ids and timestamps stay strings) and hands back
 * the very value it read, typed, so a test sees every key the server sent and the compiler sees the shape.
 */
import { ErrorDetails, Meta } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Result, Schema } from "effect"

export type Res = { readonly status: number; readonly headers: Headers; readonly text: string; readonly json: unknown }

/** A ULID, the tail of every prefixed id (`org_…`, `req_…`), as a pattern to build regular expressions from. */
export const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
/** A timestamp on the wire: ISO 8601, UTC, with milliseconds. */
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const REQUEST_ID = new RegExp(`^req_${ULID}$`)

/** `value` checked against the wire form of `schema` (failing the test with the schema's issue otherwise). */
export const wire = <S extends Schema.Top>(schema: S, value: unknown, context?: string): S["Encoded"] => {
  const encoded = Schema.toEncoded(schema)
  if (Schema.is(encoded)(value)) return value
  const issue = Result.match(Schema.decodeUnknownResult(encoded)(value), {
    onFailure: (error) => error.message,
    onSuccess: () => "not the schema's wire form"
  })
  return assert.fail(`${issue}\n${context ?? JSON.stringify(value)}`)
}

const SuccessEnvelope = Schema.Struct({ data: Schema.Unknown, meta: Meta })

const WireError = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  details: ErrorDetails,
  requestId: Schema.String
})
const ErrorEnvelope = Schema.Struct({ error: WireError })

/** The error body of a non-2xx answer. */
export type WireError = typeof WireError.Encoded

/** The `data` of a success envelope, after checking the status and the envelope's request id. */
export function ok(res: Res, status?: number): unknown
/** The `data` of a success envelope, checked against the data `fields` of the endpoint's success schema. */
export function ok<const F extends Schema.Struct.Fields>(
  res: Res,
  fields: F,
  status?: number
): Schema.Struct<F>["Encoded"]
export function ok(res: Res, fieldsOrStatus?: Schema.Struct.Fields | number, status?: number): unknown {
  const expected = typeof fieldsOrStatus === "number" ? fieldsOrStatus : status ?? 200
  assert.strictEqual(res.status, expected, res.text)
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/)
  const body = wire(SuccessEnvelope, res.json, res.text)
  assert.deepStrictEqual(Object.keys(body).sort(), ["data", "meta"])
  assert.deepStrictEqual(Object.keys(body.meta).sort(), ["cursor", "requestId"], res.text)
  assert.match(body.meta.requestId, REQUEST_ID)
  assert.strictEqual(res.headers.get("x-request-id"), body.meta.requestId)
  return typeof fieldsOrStatus === "object" ? wire(Schema.Struct(fieldsOrStatus), body.data, res.text) : body.data
}

/** The `data` of an answer, checked against `fields`, without the envelope checks of `ok`. */
export const dataOf = <const F extends Schema.Struct.Fields>(res: Res, fields: F): Schema.Struct<F>["Encoded"] =>
  wire(Schema.Struct({ data: Schema.Struct(fields) }), res.json, res.text).data

/** The `meta` of a success envelope: the request id and the next page's cursor. */
export const metaOf = (res: Res) => wire(SuccessEnvelope, res.json, res.text).meta

/** A page: the `data` of a success envelope checked against `fields`, and the cursor of the next page. */
export const pageOf = <const F extends Schema.Struct.Fields>(res: Res, fields: F) => ({
  data: ok(res, fields),
  cursor: metaOf(res).cursor
})

/** The `data` of a success that is not a page (`meta.cursor` is null), checked against `fields`. */
export const okData = <const F extends Schema.Struct.Fields>(res: Res, fields: F): Schema.Struct<F>["Encoded"] => {
  const { cursor, data } = pageOf(res, fields)
  assert.isNull(cursor, res.text)
  return data
}

/** The cursor of the next page, which must be there. */
export const nextCursor = (res: Res): string => {
  const { cursor } = metaOf(res)
  assert.isString(cursor, res.text)
  return cursor ?? ""
}

/** Every non-2xx answer: `{ error: { code, message, details, requestId } }`, `x-request-id` = `requestId`. */
export const failed = (res: Res, status: number, code: string): WireError => {
  assert.strictEqual(res.status, status, res.text)
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/)
  const body = wire(ErrorEnvelope, res.json, res.text)
  assert.deepStrictEqual(Object.keys(body), ["error"], res.text)
  assert.deepStrictEqual(Object.keys(body.error).sort(), ["code", "details", "message", "requestId"])
  assert.strictEqual(body.error.code, code, res.text)
  assert.isString(body.error.message)
  assert.isObject(body.error.details)
  assert.match(body.error.requestId, REQUEST_ID)
  assert.strictEqual(res.headers.get("x-request-id"), body.error.requestId)
  return body.error
}

/** `details.fields` of a 422: each invalid field with its messages. */
export const FieldMessages = Schema.Record(Schema.String, Schema.Array(Schema.String))

/** A 422 `validation_failed` answer's `details.fields`: each invalid field with its messages. */
export const invalidFields = (res: Res) =>
  wire(FieldMessages, failed(res, 422, "validation_failed").details["fields"], res.text)
