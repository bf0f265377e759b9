/**
 * Boots the whole server in-process on a free loopback port, on memory repositories, an embedded PGlite,
 * or a scratch database on the PostgreSQL server at `DATABASE_URL`, for end-to-end tests over real HTTP.
 */
import { ControlPlaneApi, layerBearerClient } from "@cp/domain"
import { type Database, Migrations } from "@cp/persistence"
import { serveApp } from "@cp/server/app"
import { AppConfig, parseConfig } from "@cp/server/platform/config"
import { DEFAULT_NODE_LIMITS, makeNodeServer, type NodeServerLimits } from "@cp/server/platform/nodeServer"
import { RepositoriesMemory, RepositoriesSql } from "@cp/server/repositories"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { FetchHttpClient, HttpClientRequest, HttpServer } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { type Backend, databaseLayer } from "../../packages/persistence/test/harness.ts"

/** The SQL databases a suite runs on: PGlite, and PostgreSQL too when `DATABASE_URL` names a server. */
export const sqlBackends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

export class TestServer extends Context.Service<TestServer, { readonly baseUrl: string }>()("test/TestServer") {}

const listeningAt = Layer.effect(
  TestServer,
  Effect.gen(function*() {
    const { address } = yield* HttpServer.HttpServer
    if (address._tag === "UnixPathAddress") return yield* Effect.die(new Error("expected a TCP listener"))
    return { baseUrl: `http://127.0.0.1:${address.port}` }
  })
)

const testConfig = (env: Readonly<Record<string, string>>) =>
  Layer.effect(AppConfig, parseConfig({ APP_ENV: "test", HOST: "127.0.0.1", PORT: "0", ...env }))

/** The whole server with `APP_ENV=test` (plus `env`) over `repositories`, on 127.0.0.1 at a port the OS picks. */
const serverWith = <R, E, RIn>(
  repositories: Layer.Layer<R, E, RIn>,
  env: Readonly<Record<string, string>>,
  limits: NodeServerLimits = DEFAULT_NODE_LIMITS
) =>
  listeningAt.pipe(
    Layer.provideMerge(serveApp),
    Layer.provideMerge(repositories),
    Layer.provide(testConfig(env)),
    Layer.provideMerge(NodeHttpServer.layer(() => makeNodeServer(limits), { port: 0, host: "127.0.0.1" }))
  )

/**
 * The server over a migrated SQL database, with the database (`SqlClient`) left in the output so tests can
 * read and seed rows; `Layer.fresh` so two replicas over one database share nothing in memory.
 */
export const testServerOver = <E>(
  database: Layer.Layer<Database.Database, E>,
  env: Readonly<Record<string, string>> = {}
) => Layer.fresh(serverWith(RepositoriesSql.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(database)), env))

/** The server on memory repositories, an embedded PGlite, or a scratch database on `DATABASE_URL`. */
export const testServer = (backend: Backend, env: Readonly<Record<string, string>> = {}) =>
  backend === "memory" ? serverWith(RepositoriesMemory, env) : testServerOver(databaseLayer(backend), env)

/** The server on memory repositories with other Node limits (header and request timeouts), to test them. */
export const testServerWithLimits = (limits: NodeServerLimits) => serverWith(RepositoriesMemory, {}, limits)

/** Raw HTTP against the test server: the exact bytes on the wire. */
export const call = (
  baseUrl: string,
  method: string,
  path: string,
  options: { readonly token?: string; readonly body?: unknown; readonly headers?: Record<string, string> } = {}
) =>
  Effect.promise(async () => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
    if (options.body !== undefined && headers["content-type"] === undefined) {
      headers["content-type"] = "application/json"
    }
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      redirect: "manual",
      ...(options.body === undefined
        ? {}
        : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) })
    })
    const text = await response.text()
    let json: unknown
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, text, json }
  })

/** The typed client derived from the domain API, authenticated with `token`. */
export const clientFor = (baseUrl: string, token = "") =>
  HttpApiClient.make(ControlPlaneApi, { baseUrl }).pipe(
    Effect.provide(layerBearerClient((request) => HttpClientRequest.bearerToken(request, token))),
    Effect.provide(FetchHttpClient.layer)
  )
