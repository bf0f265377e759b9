/**
 * OpenTelemetry tracing: one server span per request named `{METHOD} {route}` (route, status and request id as
 * attributes), child spans from `Effect.fn` service methods and `effect/sql` statements named by operation and table
 * (`SELECT projects`), and background job spans linked to the trace that queued their work. Spans leave over
 * OTLP/HTTP only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; otherwise tracing is off. An export that fails is logged
 * once per outage (and once when it recovers), not once per batch.
 */
import { type ExportResult, ExportResultCode } from "@opentelemetry/core"
import type { InMemorySpanExporter, ReadableSpan, SpanExporter, SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option, References, type Tracer } from "effect"
import { Headers, HttpMiddleware, HttpTraceContext } from "effect/http"
import type { AppConfigShape, AppEnv } from "./config.ts"

/**
 * Server spans start as `http.server <METHOD>` (the route is not known yet, and a path that matches no route keeps
 * that name); `spanNameOf` renames them `{METHOD} {route}` once the router has set `http.route`.
 */
const ServerSpanNames = Layer.succeed(HttpMiddleware.SpanNameGenerator)((request) => `http.server ${request.method}`)

const SQL_TARGET =
  /^\s*(?:with\b[\s\S]*?\)\s*)?(select|insert|update|delete)\b(?:[\s\S]*?\b(?:from|into)\b)?\s+("?[a-z_][a-z0-9_]*"?)/i

/**
 * The name a finished span is exported under: a server span `{METHOD} {route}`, a statement `{OPERATION} {table}`
 * (`SELECT projects`, `INSERT event_log`; the operation alone when no table is named), anything else as it is.
 */
export const spanNameOf = (span: Pick<ReadableSpan, "name" | "attributes">): string => {
  const route = span.attributes["http.route"]
  const method = span.attributes["http.request.method"]
  if (typeof route === "string" && typeof method === "string" && span.name.startsWith("http.server")) {
    return `${method} ${route}`
  }
  const query = span.attributes["db.query.text"]
  if (typeof query !== "string") return span.name
  const match = SQL_TARGET.exec(query)
  if (match === null) return query.trim().split(/\s+/, 1)[0]?.toUpperCase() ?? span.name
  const operation = match[1]!.toUpperCase()
  const table = operation === "SELECT" && !/\bfrom\b/i.test(query) ? undefined : match[2]!.replaceAll("\"", "")
  return table === undefined ? operation : `${operation} ${table}`
}

/** Hands each finished span on under its `spanNameOf` name (a view over the span, which has ended and is frozen). */
const naming = (inner: SpanProcessor): SpanProcessor => ({
  onStart: (span, context) => inner.onStart(span, context),
  onEnd: (span) => {
    const name = spanNameOf(span)
    inner.onEnd(name === span.name ? span : Object.create(span, { name: { value: name, enumerable: true } }))
  },
  forceFlush: () => inner.forceFlush(),
  shutdown: () => inner.shutdown()
})

/**
 * An exporter that logs the first failure of an outage (with its error) and the recovery, and nothing in between:
 * a collector that is down would otherwise cost a line per batch, or be silent.
 */
export const loggingFailures = (
  inner: SpanExporter,
  log: (effect: Effect.Effect<void>) => void
): SpanExporter => {
  let failing = false
  return {
    export: (spans, done) =>
      inner.export(spans, (result: ExportResult) => {
        if (result.code !== ExportResultCode.SUCCESS && !failing) {
          failing = true
          log(Effect.logWarning("OTLP trace export failing; spans are dropped until it recovers", result.error))
        } else if (result.code === ExportResultCode.SUCCESS && failing) {
          failing = false
          log(Effect.logInfo("OTLP trace export recovered"))
        }
        done(result)
      }),
    shutdown: () => inner.shutdown(),
    ...(inner.forceFlush === undefined ? {} : { forceFlush: () => inner.forceFlush!() })
  }
}

// The OpenTelemetry SDK is loaded only when tracing is on: with tracing off (the default) start-up skips its modules.
const sdk = (spanProcessor: () => Promise<SpanProcessor>, env: AppEnv): Layer.Layer<never> =>
  Layer.unwrap(Effect.promise(async () => {
    const NodeSdk = await import("@effect/opentelemetry/NodeSdk")
    const processor = naming(await spanProcessor())
    return Layer.merge(
      NodeSdk.layer(() => ({
        resource: { serviceName: "control-plane", attributes: { "deployment.environment.name": env } },
        spanProcessor: processor
      })),
      ServerSpanNames
    )
  }))

/** With no exporter every span would be thrown away, so none are made: the request path stays as cheap as possible. */
const TracingOff: Layer.Layer<never> = Layer.succeed(References.TracerEnabled)(false)

/**
 * Tracing for a server configuration: batched OTLP/HTTP export to `<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces` (the
 * exporter still reads `OTEL_EXPORTER_OTLP_HEADERS` for credentials), or tracing off when no endpoint is set.
 */
export const TracingLive = (config: AppConfigShape): Layer.Layer<never> =>
  Option.match(config.otlpEndpoint, {
    onNone: () => TracingOff,
    onSome: (endpoint) =>
      Layer.unwrap(Effect.map(Effect.context<never>(), (context) => {
        // The exporter calls back outside any fiber: log with the loggers of the layer that built it.
        const log = (effect: Effect.Effect<void>) => void Effect.runForkWith(context)(effect)
        return sdk(async () => {
          const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http")
          const { BatchSpanProcessor } = await import("@opentelemetry/sdk-trace-base")
          const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, "")}/v1/traces` })
          return new BatchSpanProcessor(loggingFailures(exporter, log))
        }, config.env)
      }))
  })

/** Tracing into an in-memory exporter, each span handed over as it ends; read it before the layer's scope closes. */
export const TracingTest = (exporter: InMemorySpanExporter): Layer.Layer<never> =>
  sdk(async () => new (await import("@opentelemetry/sdk-trace-base")).SimpleSpanProcessor(exporter), "test")

/** What queued work stores (a JSON object, e.g. `event_log.trace_context`) so its job can link back to the trace. */
export type TraceContext = { readonly traceparent: string }

/** The current span as a W3C `traceparent`; null when there is no recorded span (tracing off, or outside any span). */
export const currentTraceContext: Effect.Effect<TraceContext | null> = Effect.map(
  Effect.option(Effect.currentSpan),
  Option.match({
    onNone: () => null,
    onSome: (span) => span.sampled ? { traceparent: `00-${span.traceId}-${span.spanId}-01` } : null
  })
)

const linksTo = (stored: Readonly<Record<string, unknown>> | null): ReadonlyArray<Tracer.SpanLink> => {
  const traceparent = stored?.["traceparent"]
  if (typeof traceparent !== "string") return []
  return Option.match(HttpTraceContext.w3c(Headers.fromInput({ traceparent })), {
    onNone: () => [],
    onSome: (span) => [{ span, attributes: {} }]
  })
}

/**
 * Runs one background job as a new root span linked to the trace that queued its work (`stored` is what
 * `currentTraceContext` gave then), so jobs get traces of their own without stretching the request's trace.
 */
export const withJobSpan =
  (name: string, stored: Readonly<Record<string, unknown>> | null) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withSpan(self, name, { root: true, kind: "consumer", links: linksTo(stored) })
