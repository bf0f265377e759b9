/**
 * Limits the server enforces before a request reaches a route (issue 10 items 5 and 13): the 1 MiB JSON body cap
 * (413 `payload_too_large`, declared length or counted while streaming), and Node's own answers to malformed,
 * oversized or too slow requests, which carry the error envelope too. Raw sockets, so the exact bytes are sent.
 */
import { DEFAULT_MAX_BODY_BYTES } from "@cp/domain"
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request as httpRequest } from "node:http"
import { connect } from "node:net"
import { failed, type Res } from "./support/envelope.ts"
import { call, TestServer, testServer, testServerWithLimits } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

const portOf = (baseUrl: string) => Number(new URL(baseUrl).port)

/** Parses one HTTP/1.1 answer (status line, headers, body by content-length) into the shape `failed` checks. */
const parseRaw = (raw: string): Res => {
  const split = raw.indexOf("\r\n\r\n")
  const head = raw.slice(0, split).split("\r\n")
  const status = Number(head[0]?.split(" ")[1])
  const headers = new Headers()
  for (const line of head.slice(1)) {
    const colon = line.indexOf(":")
    headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  const length = Number(headers.get("content-length") ?? "0")
  const text = Buffer.from(raw.slice(split + 4)).subarray(0, length).toString()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status, headers, text, json }
}

/** Writes `bytes` on a fresh connection and reads until the server closes it. */
const rawExchange = (baseUrl: string, bytes: string | Buffer) =>
  Effect.promise(() =>
    new Promise<Res>((resolve, reject) => {
      const socket = connect(portOf(baseUrl), "127.0.0.1")
      const chunks: Array<Buffer> = []
      socket.on("data", (chunk: Buffer) => chunks.push(chunk))
      socket.on("error", () => {}) // a reset after the answer is fine; the answer is what is checked
      socket.on("close", () => {
        const raw = Buffer.concat(chunks).toString("latin1")
        if (raw === "") reject(new Error("the server closed the connection without an answer"))
        else resolve(parseRaw(raw))
      })
      socket.write(bytes)
    })
  )

/** A chunked POST of `total` bytes of JSON that never declares its length; the answer, read as it arrives. */
const chunkedPost = (baseUrl: string, path: string, total: number, token?: string) =>
  Effect.promise(() =>
    new Promise<Res>((resolve, reject) => {
      const req = httpRequest({
        host: "127.0.0.1",
        port: portOf(baseUrl),
        method: "POST",
        path,
        headers: {
          "content-type": "application/json",
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` })
        }
      }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString()
          const headers = new Headers()
          for (const [name, value] of Object.entries(res.headers)) {
            if (typeof value === "string") headers.set(name, value)
          }
          resolve({ status: res.statusCode ?? 0, headers, text, json: JSON.parse(text) })
        })
      })
      req.on("error", (error) => {
        // The server may close the connection once it has answered; only a missing answer is a failure.
        if (!req.writableEnded) reject(error)
      })
      const piece = Buffer.alloc(64 * 1024, "a")
      let sent = 0
      const pump = () => {
        while (sent < total) {
          sent += piece.length
          if (!req.write(piece)) return void req.once("drain", pump)
        }
        req.end()
      }
      req.write(`{"name":"`)
      pump()
    })
  )

/** A JSON body of exactly `bytes` bytes: `{"name":"aaa…"}`. */
const jsonOfSize = (bytes: number) => `{"name":"${"a".repeat(bytes - 11)}"}`

layer(testServer("memory"), { excludeTestServices: true })("request body cap (issue 10 item 5)", (it) => {
  it.effect("a JSON body of 1 MiB + 1 byte is 413 payload_too_large, with and without credentials", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token } = yield* signInWithPersonal(baseUrl, "cap")
      const body = jsonOfSize(DEFAULT_MAX_BODY_BYTES + 1)
      assert.strictEqual(Buffer.byteLength(body), DEFAULT_MAX_BODY_BYTES + 1)
      for (const caller of [{}, { token }, { token: "sps_ses_nothing.wrong" }]) {
        const error = failed(
          yield* call(baseUrl, "POST", "/v1/organizations", { ...caller, body }),
          413,
          "payload_too_large"
        )
        assert.strictEqual(error.details["limitBytes"], DEFAULT_MAX_BODY_BYTES)
      }
      failed(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body }), 413, "payload_too_large")
    }))

  it.effect("a body of exactly 1 MiB is read (and then judged on its content)", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token } = yield* signInWithPersonal(baseUrl, "cap")
      const res = yield* call(baseUrl, "POST", "/v1/organizations", { token, body: jsonOfSize(DEFAULT_MAX_BODY_BYTES) })
      failed(res, 422, "validation_failed")
    }))

  it.effect("a chunked body is counted while it streams in and refused past the cap", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token } = yield* signInWithPersonal(baseUrl, "cap")
      // 8 MiB announced nowhere: the server stops at 1 MiB rather than reading it all.
      failed(yield* chunkedPost(baseUrl, "/v1/organizations", 8 * 1024 * 1024, token), 413, "payload_too_large")
      failed(yield* chunkedPost(baseUrl, "/v1/auth/login/start", 8 * 1024 * 1024), 413, "payload_too_large")
      // The server still answers normally afterwards.
      assert.strictEqual((yield* call(baseUrl, "GET", "/health")).status, 200)
    }))

  it.effect("a declared length over the cap is refused before the body is sent (Expect: 100-continue not needed)", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const res = yield* rawExchange(
        baseUrl,
        "POST /v1/auth/login/start HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
          `content-length: ${600 * 1024 * 1024}\r\nconnection: close\r\n\r\n{"email":"`
      )
      failed(res, 413, "payload_too_large")
    }))
})

layer(testServer("memory"), { excludeTestServices: true })("Node's own answers carry the envelope (item 13)", (it) => {
  it.effect("headers over Node's limit: 431 with the envelope", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const res = yield* rawExchange(
        baseUrl,
        `GET /health HTTP/1.1\r\nhost: x\r\nx-filler: ${"a".repeat(64 * 1024)}\r\n\r\n`
      )
      failed(res, 431, "bad_request")
    }))

  it.effect("a malformed request line or method: 400 with the envelope", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      failed(yield* rawExchange(baseUrl, "G@T /health HTTP/1.1\r\nhost: x\r\n\r\n"), 400, "bad_request")
      failed(yield* rawExchange(baseUrl, "this is not http\r\n\r\n"), 400, "bad_request")
      failed(
        yield* rawExchange(baseUrl, "POST /v1/auth/login/start HTTP/1.1\r\nhost: x\r\ncontent-length: x\r\n\r\n"),
        400,
        "bad_request"
      )
    }))
})

layer(
  testServerWithLimits({ headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 100, deadlineMs: 8_000 }),
  { excludeTestServices: true }
)("slow requests are cut (item 13; short limits here, 10 s and 30 s in production)", (it) => {
  it.effect("headers that never finish: 408 with the envelope", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      failed(yield* rawExchange(baseUrl, "GET /health HTTP/1.1\r\nhost: x\r\n"), 408, "bad_request")
    }))

  it.effect("a body that never finishes: 408 with the envelope", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const res = yield* rawExchange(
        baseUrl,
        "POST /v1/auth/login/start HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
          "content-length: 100\r\n\r\n{"
      )
      failed(res, 408, "bad_request")
    }))
})
