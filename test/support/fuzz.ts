/**
 * Requests for a schema fuzz of every route: each endpoint of the `HttpApi` with bodies, queries and path parameters
 * generated from its own schemas (their wire form, through Effect's `Arbitrary`), and hostile mutations of them
 * (U+0000, lone surrogates, deep and oversize values, wrong types, malformed JSON and parameters). Deterministic for
 * a seed: the same seed gives the same requests.
 */
import { Arbitrary, Effect, Schema, SchemaAST } from "effect"
import { HttpApi, type HttpApiEndpoint, type HttpApiGroup } from "effect/http-api"

/** One request to send, and what produced it (for the failure message). */
export interface FuzzRequest {
  readonly method: string
  readonly path: string
  readonly body?: string
  readonly headers?: Record<string, string>
  readonly origin: string
  /**
   * Whether to send it also without a credential and with an invalid one (routing order: the answer must be 401
   * where the route needs a credential). Only requests that still name the endpoint's route (no path parameter made
   * empty, `.` or `..`, which the client or the router reads as another path), and a sample of the mutations.
   */
  readonly probe: boolean
}

/** An endpoint as the fuzz sees it. */
export interface FuzzEndpoint {
  readonly name: string
  readonly method: string
  readonly path: string
  readonly endpoint: HttpApiEndpoint.Top
}

/** Every endpoint of `api`, in declaration order. */
export const endpointsOf = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): ReadonlyArray<FuzzEndpoint> => {
  const endpoints: Array<FuzzEndpoint> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) =>
      endpoints.push({
        name: `${group.identifier}.${endpoint.identifier}`,
        method: endpoint.method,
        path: endpoint.path,
        endpoint
      })
  })
  return endpoints
}

/** A small seeded generator (mulberry32) for the choices the mutations make. */
export const prng = (seed: number) => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { next, pick: <A>(items: ReadonlyArray<A>): A | undefined => items[Math.floor(next() * items.length)] }
}

/** The payload schema an endpoint decodes JSON bodies with, if any. */
const payloadSchema = (endpoint: HttpApiEndpoint.Top): Schema.Top | undefined => {
  for (const [, payload] of endpoint.payload) {
    if (payload.encoding._tag === "Json") return payload.schemas[0]
  }
  return undefined
}

/** The property names of a struct's wire form, optional ones included. */
const fieldNames = (schema: Schema.Top | undefined): ReadonlyArray<string> => {
  if (schema === undefined) return []
  const ast = SchemaAST.toEncoded(schema.ast)
  return SchemaAST.isObjects(ast) ? ast.propertySignatures.map((property) => String(property.name)) : []
}

/** Values sampled from the wire form of `schema`; none when the schema cannot be derived (reported in `skipped`). */
const samples = (schema: Schema.Top | undefined, count: number, seed: number, skipped: Array<string>, what: string) => {
  if (schema === undefined || count === 0) return Effect.succeed<ReadonlyArray<unknown>>([])
  let arbitrary: Arbitrary.Arbitrary<unknown>
  try {
    arbitrary = Arbitrary.schema(Schema.toEncoded(schema))
  } catch (error) {
    skipped.push(`${what}: ${String(error)}`)
    return Effect.succeed<ReadonlyArray<unknown>>([])
  }
  return Arbitrary.sampleEffect(arbitrary, { count, seed, size: 12, maxDiscards: count * 50 }).pipe(
    Effect.catch((error) => {
      skipped.push(`${what}: sampling exhausted after ${error.generated} values`)
      return Effect.succeed<ReadonlyArray<unknown>>([])
    })
  )
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A path segment: percent-encoded, or raw escapes when the value cannot be encoded (a lone surrogate). */
const segment = (value: string): string => {
  try {
    return encodeURIComponent(value)
  } catch {
    return "%ED%A0%80"
  }
}

/** A path parameter, and the literal custom verb that may follow it (`:jobId:claim`). */
const PARAM = /:(\w+)(:\w+)?/g

const fillPath = (template: string, params: Readonly<Record<string, string>>) =>
  template.replace(PARAM, (_, name: string, verb: string | undefined) => segment(params[name] ?? "x") + (verb ?? ""))

const queryString = (query: Readonly<Record<string, unknown>>): string => {
  const parts: Array<string> = []
  for (const [key, value] of Object.entries(query)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined) parts.push(`${encodeURIComponent(key)}=${segment(String(item))}`)
    }
  }
  return parts.length === 0 ? "" : `?${parts.join("&")}`
}

/** Whether a path parameter with this value still names the same route. */
const keepsRoute = (value: unknown) => value !== "" && value !== "." && value !== ".."

const DEEP = 5000
const deepArray = `${"[".repeat(DEEP)}0${"]".repeat(DEEP)}`

/** Field values no schema should accept as they are (or should accept without failing the server). */
const hostileValues: ReadonlyArray<readonly [label: string, json: string]> = [
  ["NUL", JSON.stringify("a\u0000b")],
  ["lone surrogate", JSON.stringify("a\ud800b")],
  ["lone low surrogate", JSON.stringify("\udc00")],
  ["control characters", JSON.stringify("a\u001b[31m\u0007b")],
  ["oversize string (200k)", JSON.stringify("x".repeat(200_000))],
  ["number", "12345678901234567890"],
  ["negative", "-1"],
  ["float", "1.5e300"],
  ["boolean", "true"],
  ["null", "null"],
  ["array", "[\"a\",1]"],
  ["object", "{\"a\":{\"b\":[]}}"],
  ["deep array (5000)", deepArray],
  ["unicode", JSON.stringify("ünï©ødé 🚀 \u202e")]
]

/** Query and path values no schema should accept (or should accept without failing the server). */
const hostileTexts: ReadonlyArray<readonly [label: string, text: string]> = [
  ["NUL", "a\u0000b"],
  ["lone surrogate", "a\ud800b"],
  ["long (5000)", "a".repeat(5000)],
  ["dot-dot", ".."],
  ["slash", "a/b"],
  ["negative", "-1"],
  ["huge number", "1e400"],
  ["unicode", "ünï©ødé🚀"],
  ["empty", ""]
]

/** The hostile path values also sent without a valid credential. */
const PROBED_PATH_VALUES: ReadonlySet<string> = new Set(["NUL", "lone surrogate", "long (5000)"])

/** Whole bodies that are not what any route expects. */
const hostileBodies: ReadonlyArray<readonly [label: string, text: string, contentType?: string]> = [
  ["not JSON", "{\"a\":"],
  ["array", "[1,2]"],
  ["null", "null"],
  ["string", "\"s\""],
  ["empty object", "{}"],
  ["empty", ""],
  ["deep array (5000)", deepArray],
  ["NUL bytes raw", "{\"name\":\"a\u0000b\"}"],
  // Over the 1 MiB JSON limit (issue 10 item 5): 413 once bodies are capped; never a 5xx either way.
  ["oversize body (2 MiB)", `{"value":"${"x".repeat(2 * 1024 * 1024)}"}`],
  ["text/plain", "{}", "text/plain"]
]

/**
 * The requests for one endpoint: `runs` generated from its schemas (each path parameter the seeded value or,
 * one time in five, a generated one), then every hostile mutation of a generated base request.
 */
export const requestsFor = Effect.fnUntraced(function*(
  target: FuzzEndpoint,
  options: {
    readonly runs: number
    readonly seed: number
    /** Seeded values of path parameters by name (`orgId`, `projectId`, …). */
    readonly params: Readonly<Record<string, string>>
    readonly skipped: Array<string>
  }
) {
  const { endpoint } = target
  const random = prng(options.seed)
  const payload = payloadSchema(endpoint)
  const sampled = (schema: Schema.Top | undefined, offset: number, what: string) =>
    samples(schema, options.runs, options.seed + offset, options.skipped, `${target.name} ${what}`)
  const bodies = yield* sampled(payload, 0, "payload")
  const queries = yield* sampled(endpoint.query, 1, "query")
  const paramSamples = yield* sampled(endpoint.params, 2, "params")
  const paramNames = [...target.path.matchAll(PARAM)].map((match) => match[1] ?? "")
  const seededParams = Object.fromEntries(paramNames.map((name) => [name, options.params[name] ?? "x"]))
  const hasBody = payload !== undefined
  const requests: Array<FuzzRequest> = []
  const json = { "content-type": "application/json" }

  for (let i = 0; i < options.runs; i++) {
    const generated = paramSamples[i]
    const params = Object.fromEntries(
      paramNames.map((name) => {
        const own = isRecord(generated) ? generated[name] : undefined
        return [name, random.next() < 0.2 && typeof own === "string" ? own : seededParams[name] ?? "x"]
      })
    )
    const query = queries[i]
    const body = bodies[i]
    requests.push({
      method: target.method,
      path: fillPath(target.path, params) + (isRecord(query) ? queryString(query) : ""),
      ...(hasBody ? { body: JSON.stringify(body ?? {}), headers: json } : {}),
      origin: `generated #${i}`,
      probe: Object.values(params).every(keepsRoute)
    })
  }

  const base = isRecord(bodies[0]) ? bodies[0] : {}
  const basePath = fillPath(target.path, seededParams)
  const baseQuery = isRecord(queries[0]) ? queries[0] : {}
  if (hasBody) {
    for (const field of fieldNames(payload)) {
      for (const [label, value] of hostileValues) {
        const others = Object.entries(base).filter(([key]) => key !== field).map(([key, v]) =>
          `${JSON.stringify(key)}:${JSON.stringify(v)}`
        )
        requests.push({
          method: target.method,
          path: basePath + queryString(baseQuery),
          body: `{${[...others, `${JSON.stringify(field)}:${value}`].join(",")}}`,
          headers: json,
          origin: `body field ${field} = ${label}`,
          probe: false
        })
      }
    }
    for (const [label, text, contentType] of hostileBodies) {
      requests.push({
        method: target.method,
        path: basePath,
        body: text,
        headers: { "content-type": contentType ?? "application/json" },
        origin: `body ${label}`,
        probe: text.length < 1024
      })
    }
  }
  const queryFields = fieldNames(endpoint.query)
  for (const field of queryFields) {
    for (const [label, text] of hostileTexts) {
      requests.push({
        method: target.method,
        path: basePath + queryString({ ...baseQuery, [field]: text }),
        ...(hasBody ? { body: JSON.stringify(base), headers: json } : {}),
        origin: `query ${field} = ${label}`,
        probe: false
      })
    }
    requests.push({
      method: target.method,
      path: `${basePath}?${field}=1&${field}=2`,
      ...(hasBody ? { body: JSON.stringify(base), headers: json } : {}),
      origin: `query ${field} repeated`,
      probe: false
    })
  }
  for (const name of paramNames) {
    for (const [label, text] of hostileTexts) {
      if (text === "") continue
      requests.push({
        method: target.method,
        path: fillPath(target.path, { ...seededParams, [name]: text }),
        ...(hasBody ? { body: JSON.stringify(base), headers: json } : {}),
        origin: `path ${name} = ${label}`,
        probe: keepsRoute(text) && PROBED_PATH_VALUES.has(label)
      })
    }
    requests.push({
      method: target.method,
      path: fillPath(target.path, seededParams).replace(segment(seededParams[name] ?? "x"), "%ED%A0%80%00"),
      origin: `path ${name} = invalid UTF-8 escapes`,
      probe: true
    })
  }
  if (target.method !== "GET") {
    requests.push({
      method: target.method,
      path: basePath,
      ...(hasBody ? { body: JSON.stringify(base) } : {}),
      headers: { ...(hasBody ? json : {}), "idempotency-key": "bad key ü" },
      origin: "malformed Idempotency-Key",
      probe: true
    })
  }
  return requests
})
