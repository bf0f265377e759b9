import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { layerEmbedded } from "../src/Database.ts"

const templates = join(import.meta.dirname, "..", "..", "..", "node_modules", ".cache", "control-plane")

/** Runs `use` on an embedded database under `dataDir`, closing it afterwards. */
const markerTables = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql<{ readonly n: number }>`select count(*)::int as n from pg_tables where tablename = 'marker'`
)

const onEmbedded = <A, E>(dataDir: string, use: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.scoped(Effect.provide(use, layerEmbedded({ dataDir })))

describe("embedded database template", () => {
  it.effect("a fresh DATA_DIR starts from the install's template and shares nothing with it afterwards", () =>
    Effect.gen(function*() {
      const root = mkdtempSync(join(tmpdir(), "cp-template-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(root, { recursive: true, force: true })))
      yield* onEmbedded(
        join(root, "a"),
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`create table marker (id int)`)
      )
      const made = readdirSync(templates).filter((name) =>
        name.startsWith("pglite-datadir-") && !name.endsWith("partial")
      )
      assert.isAbove(made.length, 0)
      assert.isTrue(made.every((name) => existsSync(join(templates, name, "PG_VERSION"))))
      const tables = yield* onEmbedded(join(root, "b"), markerTables)
      assert.deepStrictEqual(tables, [{ n: 0 }])
      // The first database kept its own table across a restart.
      const kept = yield* onEmbedded(join(root, "a"), markerTables)
      assert.deepStrictEqual(kept, [{ n: 1 }])
    }).pipe(Effect.scoped))
})
