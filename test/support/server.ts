/**
 * Boots the whole server in-process on a free loopback port, on memory repositories, an embedded PGlite,
 * or a scratch database on the PostgreSQL server at `DATABASE_URL`, for end-to-end tests over real HTTP.
 */
import { ControlPlaneApi, Authentication } from "@cp/domain"
import { Migrations } from "@cp/persistence"
import { NodeHttpServer } from "@effect/platform-node"
import { serveApp } from "@cp/server/app"
import { AppConfig, parseConfig } from "@cp/server/platform/config"
import { RepositoriesMemory, RepositoriesSql } from "@cp/server/repositories"
import { Context, Effect, Layer } from "effect"
import { FetchHttpClient, HttpClientRequest, HttpServer } from "effect/http"
import { HttpApiClient, HttpApiMiddleware } from "effect/http-api"
import { createServer } from "node:http"
import { type Backend, databaseLayer } from "../../packages/persistence/test/harness.ts"

export class TestServer extends Context.Service<TestServer, { readonly baseUrl: string }>()("test/TestServer") {}

const repositoriesFor = (backend: Backend) =>
  backend === "memory"
    ? RepositoriesMemory
    : RepositoriesSql.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(databaseLayer(backend)))

/** The server with `APP_ENV=test` (plus `env`), listening on 127.0.0.1 at a port the OS picks. */
export const testServer = (backend: Backend, env: Readonly<Record<string, string>> = {}) =>
  Layer.effect(
    TestServer,
    Effect.gen(function*() {
      const address = yield* HttpServer.HttpServer
      if (address.address._tag === "UnixPathAddress") return yield* Effect.die(new Error("expected a TCP listener"))
      return { baseUrl: `http://127.0.0.1:${address.address.port}` }
    })
  ).pipe(
    Layer.provideMerge(serveApp),
    Layer.provide(repositoriesFor(backend)),
    Layer.provide(Layer.unwrap(Effect.map(
      parseConfig({ APP_ENV: "test", HOST: "127.0.0.1", PORT: "0", ...env }),
      (config) => Layer.succeed(AppConfig)(config)
    ))),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
  )

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
    if (options.body !== undefined && headers["content-type"] === undefined) headers["content-type"] = "application/json"
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      redirect: "manual",
      ...(options.body === undefined ? {} : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) })
    })
    const text = await response.text()
    let json: unknown = undefined
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
    Effect.provide(
      HttpApiMiddleware.layerClient(Authentication, ({ next, request }) =>
        next(HttpClientRequest.bearerToken(request, token)))
    ),
    Effect.provide(FetchHttpClient.layer)
  )
