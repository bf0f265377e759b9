/**
 * OpenTelemetry tracing: one `http.server` span per request (route and status from the platform), child spans from
 * `Effect.fn` service methods and `effect/sql` statements, and background job spans linked to the trace that queued
 * their work. Spans leave over OTLP/HTTP only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; otherwise tracing is off.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import {
  BatchSpanProcessor,
  type InMemorySpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option, References, type Tracer } from "effect"
import { Headers, HttpMiddleware, HttpTraceContext } from "effect/http"
import type { AppConfigShape, AppEnv } from "./config.ts"

/** Server spans are named `http.server <METHOD>`, apart from the bare-method client spans of outgoing calls. */
const ServerSpanNames = Layer.succeed(HttpMiddleware.SpanNameGenerator)((request) => `http.server ${request.method}`)

const sdk = (spanProcessor: SpanProcessor, env: AppEnv): Layer.Layer<never> =>
  Layer.merge(
    NodeSdk.layer(() => ({
      resource: { serviceName: "control-plane", attributes: { "deployment.environment.name": env } },
      spanProcessor
    })),
    ServerSpanNames
  )

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
      sdk(
        new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, "")}/v1/traces` })),
        config.env
      )
  })

/** Tracing into an in-memory exporter, each span handed over as it ends; read it before the layer's scope closes. */
export const TracingTest = (exporter: InMemorySpanExporter): Layer.Layer<never> =>
  sdk(new SimpleSpanProcessor(exporter), "test")

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
