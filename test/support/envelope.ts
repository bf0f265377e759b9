/** Assertions on the wire envelopes of a raw `call` answer: `{ data, meta }` on success, `{ error }` otherwise. */
import { assert } from "@effect/vitest"

export type Res = { readonly status: number; readonly headers: Headers; readonly text: string; readonly json: unknown }

/** The `data` of a success envelope, after checking the status and the envelope's request id. */
export const ok = (res: Res, status = 200): any => {
  assert.strictEqual(res.status, status, res.text)
  const body = res.json as any
  assert.deepStrictEqual(Object.keys(body).sort(), ["data", "meta"])
  assert.match(body.meta.requestId, /^req_/)
  assert.strictEqual(res.headers.get("x-request-id"), body.meta.requestId)
  return body.data
}

/** The `error` of an error envelope, after checking its status, code and shape. */
export const failed = (res: Res, status: number, code: string): any => {
  assert.strictEqual(res.status, status, res.text)
  const body = res.json as any
  assert.deepStrictEqual(Object.keys(body), ["error"])
  assert.deepStrictEqual(Object.keys(body.error).sort(), ["code", "details", "message", "requestId"])
  assert.strictEqual(body.error.code, code)
  assert.isObject(body.error.details)
  assert.strictEqual(res.headers.get("x-request-id"), body.error.requestId)
  return body.error
}
