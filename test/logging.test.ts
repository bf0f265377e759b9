import { AccessLogLevel, logAccess, logFormatOf } from "@cp/server/platform/logging"
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Layer, Logger, Schema } from "effect"
import { call, TestServer, testServer } from "./support/server.ts"

/** One JSON log line as `Logger.formatJson` writes it. */
const LogLine = Schema.fromJsonString(Schema.Struct({
  message: Schema.Unknown,
  level: Schema.String,
  cause: Schema.optionalKey(Schema.String),
  annotations: Schema.Record(Schema.String, Schema.Unknown)
}))
const decodeLine = Schema.decodeUnknownSync(LogLine)

/** The JSON format's loggers, writing into `lines` instead of the console. */
const capturing = (lines: Array<string>) =>
  Layer.merge(
    Logger.layer([Logger.map(Logger.formatJson, (line) => void lines.push(line))]),
    Layer.succeed(AccessLogLevel)("Info")
  )

describe("log format", () => {
  it.effect("json in production, pretty elsewhere, LOG_FORMAT wins, anything else is a configuration error", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* logFormatOf({}, "production"), "json")
      assert.strictEqual(yield* logFormatOf({}, "development"), "pretty")
      assert.strictEqual(yield* logFormatOf({ LOG_FORMAT: "json" }, "development"), "json")
      assert.strictEqual(yield* logFormatOf({ LOG_FORMAT: "pretty" }, "production"), "pretty")
      const error = yield* Effect.flip(logFormatOf({ LOG_FORMAT: "xml" }, "production"))
      assert.strictEqual(error.message, "LOG_FORMAT must be json or pretty")
    }))

  it.effect("a 5xx is one error line with its request id, route and cause", () => {
    const lines: Array<string> = []
    const entry = {
      requestId: "req_01ABC",
      method: "POST",
      route: "/v1/organizations/:orgId/projects",
      status: 500,
      durationMs: 3,
      workspace: "org_01ABC",
      actorKind: "user"
    }
    return logAccess(500, () => entry, Cause.die(new Error("disk on fire"))).pipe(
      Effect.provide(capturing(lines)),
      Effect.map(() => {
        assert.strictEqual(lines.length, 1)
        const line = decodeLine(lines[0])
        assert.strictEqual(line.level, "ERROR")
        assert.deepStrictEqual(line.annotations, entry)
        assert.include(line.cause ?? "", "disk on fire")
      })
    )
  })

  it.effect("without the JSON format a request below 500 logs nothing", () => {
    const lines: Array<string> = []
    const entry = () => assert.fail("the entry is not even built")
    return logAccess(200, entry, undefined).pipe(
      Effect.provide(Logger.layer([Logger.map(Logger.formatJson, (line) => void lines.push(line))])),
      Effect.map(() => assert.deepStrictEqual(lines, []))
    )
  })
})

const lines: Array<string> = []

layer(testServer("memory").pipe(Layer.provide(capturing(lines))), { excludeTestServices: true })(
  "access lines",
  (it) => {
    it.effect("each request writes one JSON access line with the route template and the caller's kind", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        lines.length = 0
        const res = yield* call(baseUrl, "GET", "/v1/organizations/some-slug/projects?limit=5", {
          headers: { authorization: "Bearer not-a-token" }
        })
        assert.strictEqual(res.status, 401)
        const requestId = res.headers.get("x-request-id")
        const access = lines.map((line) => decodeLine(line)).filter((line) =>
          line.annotations["requestId"] === requestId
        )
        assert.strictEqual(access.length, 1)
        assert.strictEqual(access[0]?.level, "INFO")
        assert.deepStrictEqual({ ...access[0]?.annotations, durationMs: 0 }, {
          requestId,
          method: "GET",
          route: "/v1/organizations/:orgId/projects",
          status: 401,
          durationMs: 0,
          workspace: null,
          actorKind: "invalid"
        })
      }))
  }
)
