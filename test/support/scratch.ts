/** A scratch database on the PostgreSQL server at `DATABASE_URL`, for suites that run several servers over one. */
import { Database } from "@cp/persistence"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"

/** Creates `<prefix>_<random>` on the `DATABASE_URL` server, dropped (connections and all) with the scope: its URL. */
export const scratchDatabaseUrl = (prefix: string) =>
  Effect.gen(function*() {
    const serverUrl = process.env["DATABASE_URL"] ?? ""
    // Creating a database may outlast a request's statement timeout on a busy machine: no limit for this client.
    const admin = Context.get(yield* Layer.build(Database.layerPostgres(serverUrl, 0)), PgClient.PgClient)
    const name = `${prefix}_${randomUUID().replaceAll("-", "")}`
    yield* Effect.acquireRelease(
      admin`create database ${admin(name)}`,
      () => Effect.orDie(admin`drop database if exists ${admin(name)} with (force)`)
    )
    const url = new URL(serverUrl)
    url.pathname = `/${name}`
    return url.toString()
  })
