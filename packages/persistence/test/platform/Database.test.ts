import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Database from "../../src/Database.ts"
import * as Migrations from "../../src/Migrations.ts"
import { DatabaseHealth } from "../../src/platform/DatabaseHealth.ts"
import { ServerSecretsRepo } from "../../src/platform/ServerSecretsRepo.ts"
import { backends, databaseLayer } from "../harness.ts"

const fromEnv = (env: Record<string, string>) =>
  Database.layerFromEnv.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))

const secretAfterMigrating = (generated: string) =>
  Effect.gen(function*() {
    const applied = yield* Migrations.run
    const secrets = yield* ServerSecretsRepo
    return { applied: applied.length, secret: yield* secrets.getOrCreate("SECRETS_KEK", () => generated) }
  }).pipe(Effect.provide(ServerSecretsRepo.sql))

describe("Database", () => {
  it.live("without DATABASE_URL, an embedded database under DATA_DIR keeps its data across restarts", () =>
    Effect.acquireUseRelease(
      Effect.promise(() => mkdtemp(join(tmpdir(), "cp-data-"))),
      (dir) =>
        Effect.gen(function*() {
          const layer = fromEnv({ DATA_DIR: join(dir, "data") })
          const first = yield* secretAfterMigrating("first").pipe(Effect.provide(layer))
          const second = yield* secretAfterMigrating("second").pipe(Effect.provide(layer))
          assert.isAbove(first.applied, 0)
          assert.deepStrictEqual(second, { applied: 0, secret: "first" })
        }),
      (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
    ))

  const ping = Effect.flatMap(DatabaseHealth, (health) => health.ping).pipe(Effect.provide(DatabaseHealth.sql))

  const databaseUrl = process.env["DATABASE_URL"]
  if (databaseUrl) {
    it.live("with DATABASE_URL, connects to that server", () =>
      ping.pipe(Effect.provide(fromEnv({ DATABASE_URL: databaseUrl, DATA_DIR: "/nonexistent" }))))
  }

  for (const backend of backends.filter((b) => b !== "memory")) {
    it.live(`[${backend}] ping answers, and replicas migrating together apply each migration once`, () =>
      Effect.gen(function*() {
        yield* ping
        const runs = yield* Effect.all([Migrations.run, Migrations.run, Migrations.run], { concurrency: "unbounded" })
        const applied = runs.flat().map(([id]) => id).sort((a, b) => a - b)
        const declared = Object.keys(Migrations.migrations).map((key) => Number.parseInt(key, 10))
        assert.deepStrictEqual(applied, declared)
      }).pipe(Effect.provide(databaseLayer(backend))))
  }
})
