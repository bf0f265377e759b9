/**
 * `npm start`: serves the API on `HOST`:`PORT` over the database `DATABASE_URL` names, or over an
 * embedded PGlite under `DATA_DIR`. SIGTERM/SIGINT stop taking requests, finish in-flight ones, stop
 * background fibers, close the pool and exit 0 (contract §1).
 */
import { Database, Migrations } from "@cp/persistence"
// Module paths, not the package index: the index loads every Node integration (Redis, workers, …) at start-up.
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Layer, Option, Runtime } from "effect"
import { serveApp } from "./app.ts"
import { AppConfig, type AppConfigShape } from "./platform/config.ts"
import { logFormatOf, LoggingLive } from "./platform/logging.ts"
import { makeNodeServer } from "./platform/nodeServer.ts"
import { TracingLive } from "./platform/tracing.ts"
import { RepositoriesSql } from "./repositories.ts"

/** The database the configuration names, migrated before anything serves. */
export const databaseFor = (config: AppConfigShape) =>
  Option.match(config.databaseUrl, {
    onSome: (url) => Database.layerPostgres(url),
    onNone: () => Database.layerEmbedded({ dataDir: config.dataDir })
  })

/**
 * A Node server that answers 503 to requests arriving between `listen` and the moment the router attaches
 * its own `request` listener (Node would otherwise leave them hanging).
 */
const gatedServer = () => {
  const server = makeNodeServer()
  // The listeners the server has of its own, this one included; the router's comes on top.
  const ownListeners = server.listenerCount("request") + 1
  server.on("request", (_request, response) => {
    if (server.listenerCount("request") > ownListeners) return
    response.writeHead(503, { "content-type": "application/json", "retry-after": "1" })
    response.end(JSON.stringify({
      error: { code: "internal_error", message: "The server is starting", details: {}, requestId: "req_starting" }
    }))
  })
  return server
}

/** The complete server for a configuration, listening on its host and port. */
export const serverFor = (config: AppConfigShape) => {
  // The start line, and a stop line once the server has closed (released before the database and after the listener).
  const announce = Layer.effectDiscard(
    Effect.acquireRelease(
      Effect.log(
        `Control plane API on ${config.publicBaseUrl}/v1 (docs: ${config.publicBaseUrl}/docs, ${config.env} mode)`
      ),
      (_, exit) =>
        Effect.log(
          `Control plane API stopping (${
            Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? "signal" : "failure"
          })`
        )
    )
  )
  // Layers provided later are built first: the database is migrated before the port opens.
  return Layer.mergeAll(serveApp, announce).pipe(
    Layer.provide(NodeHttpServer.layer(gatedServer, { port: config.port, host: config.host })),
    Layer.provide(RepositoriesSql.pipe(Layer.provide(Migrations.layer))),
    Layer.provide(Layer.succeed(AppConfig)(config)),
    Layer.provide(TracingLive(config)),
    Layer.provide(databaseFor(config))
  )
}

/** A SIGTERM/SIGINT stop is the normal way out: exit 0 once everything has closed (contract §1). */
const stoppedBySignalIsSuccess: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

if (import.meta.main) {
  Effect.gen(function*() {
    const config = yield* AppConfig
    const logFormat = yield* logFormatOf(process.env, config.env)
    return yield* Layer.launch(serverFor(config)).pipe(Effect.provide(LoggingLive(logFormat)))
  }).pipe(
    Effect.provide(AppConfig.layerFromEnv(process.env)),
    NodeRuntime.runMain({ teardown: stoppedBySignalIsSuccess })
  )
}
