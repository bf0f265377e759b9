/** Assertions on the wire envelopes of a raw `call` answer: `{ data, meta }` on success, `{ error }` otherwise. */
import { assert } from "@effect/vitest"

export type Res = { readonly status: number; readonly headers: Headers; readonly text: string; readonly json: unknown }

const REQUEST_ID = /^req_[0-9A-HJKMNP-TV-Z]{26}$/

// Tests read arbitrary JSON answers; `any` keeps the assertions on them short.
/** The `data` of a success envelope, after checking the status and the envelope's request id. */
export const ok = (res: Res, status = 200): any => {
  assert.strictEqual(res.status, status, res.text)
  const body = res.json as any
  assert.deepStrictEqual(Object.keys(body).sort(), ["data", "meta"])
  assert.match(body.meta.requestId, REQUEST_ID)
  assert.strictEqual(res.headers.get("x-request-id"), body.meta.requestId)
  return body.data
}

/** Every non-2xx answer: `{ error: { code, message, details, requestId } }`, `x-request-id` = `requestId`. */
export const failed = (res: Res, status: number, code: string): any => {
  assert.strictEqual(res.status, status, res.text)
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/)
  const body = res.json as any
  assert.deepStrictEqual(Object.keys(body), ["error"], res.text)
  assert.deepStrictEqual(Object.keys(body.error).sort(), ["code", "details", "message", "requestId"])
  assert.strictEqual(body.error.code, code, res.text)
  assert.isString(body.error.message)
  assert.isObject(body.error.details)
  assert.match(body.error.requestId, REQUEST_ID)
  assert.strictEqual(res.headers.get("x-request-id"), body.error.requestId)
  return body.error
}
