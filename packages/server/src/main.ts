/**
 * `npm start`: serves the API on `HOST`:`PORT` over the database `DATABASE_URL` names, or over an
 * embedded PGlite under `DATA_DIR`. SIGTERM/SIGINT stop taking requests, finish in-flight ones, stop
 * background fibers, close the pool and exit 0 (contract §1).
 */
import { Database, Migrations } from "@cp/persistence"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import { serveApp } from "./app.ts"
import { AppConfig, type AppConfigShape } from "./platform/config.ts"
import { TracingLive } from "./platform/tracing.ts"
import { RepositoriesSql } from "./repositories.ts"

/** The database the configuration names, migrated before anything serves. */
export const databaseFor = (config: AppConfigShape) =>
  Option.match(config.databaseUrl, {
    onSome: (url) => Database.layerPostgres(url),
    onNone: () => Database.layerEmbedded({ dataDir: config.dataDir })
  })

/** The complete server for a configuration, listening on its host and port. */
export const serverFor = (config: AppConfigShape) => {
  const announce = Layer.effectDiscard(
    Effect.log(`Control plane API on ${config.publicBaseUrl}/v1 (docs: ${config.publicBaseUrl}/docs, ${config.env} mode)`)
  )
  return Layer.mergeAll(serveApp, announce).pipe(
    Layer.provide(RepositoriesSql.pipe(Layer.provide(Migrations.layer))),
    Layer.provide(Layer.succeed(AppConfig)(config)),
    Layer.provide(NodeHttpServer.layer(createServer, { port: config.port, host: config.host })),
    Layer.provide(TracingLive(config)),
    Layer.provide(databaseFor(config))
  )
}

if (import.meta.main) {
  Effect.gen(function*() {
    const config = yield* AppConfig
    return yield* Layer.launch(serverFor(config))
  }).pipe(
    Effect.provide(AppConfig.layerFromEnv(process.env)),
    NodeRuntime.runMain
  )
}
