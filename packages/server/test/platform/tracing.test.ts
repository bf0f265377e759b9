import { Database } from "@cp/persistence"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it, layer } from "@effect/vitest"
import { SpanKind } from "@opentelemetry/api"
import { type ExportResult, ExportResultCode } from "@opentelemetry/core"
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, References, Schedule, Schema } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { createServer } from "node:http"
import { parseConfig } from "../../src/platform/config.ts"
import {
  currentTraceContext,
  loggingFailures,
  spanNameOf,
  TracingLive,
  TracingTest,
  withJobSpan
} from "../../src/platform/tracing.ts"

const ProbeApi = HttpApi.make("probe").add(
  HttpApiGroup.make("probe")
    .add(HttpApiEndpoint.get("read", "/workspaces/:workspaceId/probe", {
      params: { workspaceId: Schema.String },
      success: Schema.Struct({ one: Schema.Number })
    }))
    .add(HttpApiEndpoint.get("tracer", "/tracer", {
      success: Schema.Struct({ enabled: Schema.Boolean, traceContext: Schema.NullOr(Schema.String) })
    }))
)

/** A service method as the product writes them: an `Effect.fn` span around one SQL statement. */
const readOne = Effect.fn("Probe.readOne")(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly one: number }>`select 1 as one`
  return rows[0]?.one ?? 0
})

const ProbeHandlers = HttpApiBuilder.group(ProbeApi, "probe", (handlers) =>
  handlers
    .handle("read", ({ params }) =>
      Effect.gen(function*() {
        // Where the workspace resolver will annotate it: the request's own span.
        yield* Effect.annotateCurrentSpan("workspace.id", params.workspaceId)
        return { one: yield* readOne().pipe(Effect.orDie) }
      }))
    .handle("tracer", () =>
      Effect.gen(function*() {
        const context = yield* currentTraceContext
        return { enabled: yield* References.TracerEnabled, traceContext: context?.traceparent ?? null }
      })))

/** The probe API on a loopback port over an embedded database, under whatever tracing layer is provided. */
const ProbeServer = HttpRouter.serve(HttpApiBuilder.layer(ProbeApi).pipe(Layer.provide(ProbeHandlers)), {
  disableLogger: true,
  disableListenLog: true
}).pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provideMerge(Database.layerEmbeddedInMemory())
)

const get = (path: string, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const base = HttpServer.formatAddress((yield* HttpServer.HttpServer).address)
    return yield* Effect.promise(async () => {
      const response = await fetch(`${base}${path}`, { headers })
      return { status: response.status, body: await response.json() }
    })
  })

const exporter = new InMemorySpanExporter()

/** Finished spans once one named `name` has ended: server spans end just after the response is written. */
const spansOnceEnded = (name: string) =>
  Effect.sync(() => exporter.getFinishedSpans()).pipe(
    Effect.repeat({
      until: (spans) => spans.some((span) => span.name === name),
      schedule: Schedule.spaced("10 millis"),
      times: 200
    })
  )

const only = (spans: ReadonlyArray<ReadableSpan>, predicate: (span: ReadableSpan) => boolean): ReadableSpan => {
  const [span, ...others] = spans.filter(predicate)
  if (span === undefined || others.length > 0) {
    return assert.fail(`expected one such span among [${spans.map((each) => each.name).join(", ")}]`)
  }
  return span
}

const parentId = (span: ReadableSpan) => span.parentSpanContext?.spanId
const isSql = (span: ReadableSpan) => String(span.attributes["db.query.text"]).startsWith("select")

const TracedProbeServer = ProbeServer.pipe(Layer.provideMerge(TracingTest(exporter)))

layer(TracedProbeServer, { excludeTestServices: true })("TracingTest", (it) => {
  it.effect("a request is one http.server span with route, status and workspace.id; its SQL is a grandchild", () =>
    Effect.gen(function*() {
      exporter.reset()
      const response = yield* get("/workspaces/ws_01ABC/probe")
      assert.deepStrictEqual(response, { status: 200, body: { one: 1 } })
      const spans = yield* spansOnceEnded("GET /workspaces/:workspaceId/probe")

      const server = only(spans, (span) => span.name === "GET /workspaces/:workspaceId/probe")
      assert.strictEqual(server.kind, SpanKind.SERVER)
      assert.isUndefined(server.parentSpanContext)
      assert.strictEqual(server.attributes["http.route"], "/workspaces/:workspaceId/probe")
      assert.strictEqual(server.attributes["http.response.status_code"], 200)
      assert.strictEqual(server.attributes["http.request.method"], "GET")
      assert.strictEqual(server.attributes["workspace.id"], "ws_01ABC")
      assert.strictEqual(server.resource.attributes["service.name"], "control-plane")

      const method = only(spans, (span) => span.name === "Probe.readOne")
      assert.strictEqual(parentId(method), server.spanContext().spanId)

      const statement = only(spans, isSql)
      assert.strictEqual(statement.name, "SELECT")
      assert.strictEqual(statement.kind, SpanKind.CLIENT)
      assert.strictEqual(statement.attributes["db.system.name"], "postgresql")
      assert.strictEqual(statement.attributes["db.query.text"], "select 1 as one")
      assert.strictEqual(parentId(statement), method.spanContext().spanId)

      const traceIds = new Set([server, method, statement].map((span) => span.spanContext().traceId))
      assert.strictEqual(traceIds.size, 1)
    }))

  it.effect("an incoming traceparent makes the request span a child of the caller's span", () =>
    Effect.gen(function*() {
      exporter.reset()
      const traceId = "0af7651916cd43dd8448eb211c80319c"
      yield* get("/workspaces/ws_01ABC/probe", { traceparent: `00-${traceId}-b7ad6b7169203331-01` })
      const server = only(
        yield* spansOnceEnded("GET /workspaces/:workspaceId/probe"),
        (span) => span.name === "GET /workspaces/:workspaceId/probe"
      )
      assert.strictEqual(server.spanContext().traceId, traceId)
      assert.strictEqual(parentId(server), "b7ad6b7169203331")
    }))

  it.effect("currentTraceContext inside a request names the request's span", () =>
    Effect.gen(function*() {
      exporter.reset()
      const { body } = yield* get("/tracer")
      const server = only(yield* spansOnceEnded("GET /tracer"), (span) => span.name === "GET /tracer")
      const { traceId, spanId } = server.spanContext()
      assert.deepStrictEqual(body, { enabled: true, traceContext: `00-${traceId}-${spanId}-01` })
    }))

  it.effect("a background job is a root span of its own, linked to the trace that queued it, with its SQL inside", () =>
    Effect.gen(function*() {
      exporter.reset()
      const stored = yield* currentTraceContext.pipe(Effect.withSpan("Webhooks.enqueue"))
      yield* readOne().pipe(withJobSpan("job.webhook_delivery", stored))

      const spans = exporter.getFinishedSpans()
      const enqueue = only(spans, (span) => span.name === "Webhooks.enqueue")
      const job = only(spans, (span) => span.name === "job.webhook_delivery")
      assert.strictEqual(job.kind, SpanKind.CONSUMER)
      assert.isUndefined(job.parentSpanContext)
      assert.notStrictEqual(job.spanContext().traceId, enqueue.spanContext().traceId)
      assert.deepStrictEqual(job.links.map((link) => link.context.spanId), [enqueue.spanContext().spanId])
      assert.strictEqual(job.links[0]?.context.traceId, enqueue.spanContext().traceId)

      const method = only(spans, (span) => span.name === "Probe.readOne")
      assert.strictEqual(parentId(method), job.spanContext().spanId)
      assert.strictEqual(parentId(only(spans, isSql)), method.spanContext().spanId)
    }))

  it.effect("a job whose work carries no trace context still gets its root span, without links", () =>
    Effect.gen(function*() {
      exporter.reset()
      yield* Effect.void.pipe(withJobSpan("job.sweep", null))
      const job = only(exporter.getFinishedSpans(), (span) => span.name === "job.sweep")
      assert.isUndefined(job.parentSpanContext)
      assert.deepStrictEqual(job.links, [])
    }))
})

describe("TracingLive", () => {
  it.live("without OTEL_EXPORTER_OTLP_ENDPOINT tracing is off on request fibers and no trace context is stored", () =>
    Effect.gen(function*() {
      const config = yield* parseConfig({ APP_ENV: "test" })
      const { body } = yield* get("/tracer").pipe(
        Effect.provide(ProbeServer.pipe(Layer.provide(TracingLive(config))))
      )
      assert.deepStrictEqual(body, { enabled: false, traceContext: null })
    }))

  it.live("with OTEL_EXPORTER_OTLP_ENDPOINT spans leave over OTLP/HTTP at <endpoint>/v1/traces as control-plane", () =>
    Effect.gen(function*() {
      const posts: Array<{ readonly url: string; readonly contentType: string; readonly body: string }> = []
      const collector = createServer((request, response) => {
        let body = ""
        request.setEncoding("utf8")
        request.on("data", (chunk: string) => (body += chunk))
        request.on("end", () => {
          posts.push({ url: request.url ?? "", contentType: request.headers["content-type"] ?? "", body })
          response.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => void collector.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.callback<void>((resume) => void collector.close(() => resume(Effect.void)))
      )
      const bound = collector.address()
      const port = bound !== null && typeof bound === "object" ? bound.port : 0
      const config = yield* parseConfig({
        APP_ENV: "production",
        SECRETS_KEK: "a2V5",
        TOKEN_SIGNING_KEY: "c2lnbg==",
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}/otlp/`
      })
      // Releasing the layer flushes the batch processor.
      yield* Effect.void.pipe(Effect.withSpan("probe.exported"), Effect.provide(TracingLive(config)))
      assert.strictEqual(posts.length, 1)
      const [post] = posts
      assert.strictEqual(post?.url, "/otlp/v1/traces")
      assert.include(post?.contentType, "application/json")
      assert.include(post?.body, "\"probe.exported\"")
      assert.include(post?.body, "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"control-plane\"}}")
      assert.include(post?.body, "{\"key\":\"deployment.environment.name\",\"value\":{\"stringValue\":\"production\"}}")
    }))
})

describe("span names", () => {
  const statement = (query: string) => spanNameOf({ name: "postgresql", attributes: { "db.query.text": query } })

  it("names a statement by its operation and table", () => {
    assert.strictEqual(statement("select id, name from projects where org_id = $1"), "SELECT projects")
    assert.strictEqual(statement("insert into event_log (id) values ($1)"), "INSERT event_log")
    assert.strictEqual(statement("update \"teams\" set name = $1"), "UPDATE teams")
    assert.strictEqual(statement("delete from idempotency_keys where expires_at < now()"), "DELETE idempotency_keys")
    assert.strictEqual(
      statement("with doomed as (select id from a) delete from sessions where id in (1)"),
      "DELETE sessions"
    )
    assert.strictEqual(statement("select pg_advisory_xact_lock(42)"), "SELECT")
    assert.strictEqual(statement("BEGIN"), "BEGIN")
  })

  it("names a routed server span {METHOD} {route}, and leaves others alone", () => {
    const attributes = { "http.request.method": "PATCH", "http.route": "/v1/organizations/:orgId/teams/:teamId" }
    assert.strictEqual(
      spanNameOf({ name: "http.server PATCH", attributes }),
      "PATCH /v1/organizations/:orgId/teams/:teamId"
    )
    assert.strictEqual(spanNameOf({ name: "http.server GET", attributes: {} }), "http.server GET")
    assert.strictEqual(spanNameOf({ name: "Projects.create", attributes: {} }), "Projects.create")
  })
})

describe("OTLP export failures", () => {
  it.effect("are logged once per outage, and the recovery once", () =>
    Effect.gen(function*() {
      const logged: Array<Effect.Effect<void>> = []
      const failed: ExportResult = { code: ExportResultCode.FAILED, error: new Error("connection refused") }
      const succeeded: ExportResult = { code: ExportResultCode.SUCCESS }
      const results = [failed, failed, failed, succeeded, succeeded, failed]
      let next = 0
      const exporter = loggingFailures({
        export: (_spans, done) => done(results[next++]!),
        shutdown: () => Promise.resolve()
      }, (effect) => void logged.push(effect))
      for (let i = 0; i < results.length; i++) exporter.export([], () => {})
      assert.strictEqual(logged.length, 3) // failing, recovered, failing again
    }))
})
