/** The whole server's spans: `{METHOD} {route}` with the request id the answer carries, statements by table. */
import { TracingTest } from "@cp/server/platform/tracing"
import { assert, layer } from "@effect/vitest"
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Schedule } from "effect"
import { call, TestServer, testServer } from "./support/server.ts"
import { signIn } from "./support/session.ts"

const exporter = new InMemorySpanExporter()

const spanNamed = (name: string) =>
  Effect.sync(() => exporter.getFinishedSpans().find((span) => span.name === name)).pipe(
    Effect.repeat({ until: (span) => span !== undefined, schedule: Schedule.spaced("10 millis"), times: 300 })
  )

layer(testServer("pglite").pipe(Layer.provideMerge(TracingTest(exporter))), { excludeTestServices: true })(
  "spans",
  (it) => {
    it.effect("a request's span is named {METHOD} {route} and carries its request id; its SQL is named by table", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { token } = yield* signIn(baseUrl)
        exporter.reset()
        const res = yield* call(baseUrl, "GET", "/v1/organizations", { token })
        assert.strictEqual(res.status, 200)
        const server = yield* spanNamed("GET /v1/organizations")
        assert.strictEqual(server?.attributes["http.request.id"], res.headers.get("x-request-id"))
        const names = exporter.getFinishedSpans().map((span) => span.name)
        assert.isTrue(names.some((name) => /^SELECT [a-z_]+$/.test(name)), names.join(", "))
      }))
  }
)
