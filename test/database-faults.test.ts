/**
 * A database that stops answering (issue 10 item 6): the server talks to PostgreSQL through a TCP proxy in this
 * test that can stop forwarding. While it is frozen a request answers 503 `service_unavailable` with `Retry-After`
 * (within the request deadline, not as long as the freeze lasts); once it forwards again the server answers 200 by
 * itself. And a read the database holds up (issue 19: here, waiting on a lock another session holds) is cancelled by
 * the statement timeout and answers 503 from the database's own error, not the request deadline's. Needs
 * `DATABASE_URL`; skipped without it.
 */
import { Database } from "@cp/persistence"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { connect, createServer, type Server, type Socket } from "node:net"
import { failed } from "./support/envelope.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

/** A TCP proxy to `target` that can stop forwarding (bytes wait in the sockets) and start again. */
const freezableProxy = (target: URL) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ server: Server; port: number; pairs: Set<[Socket, Socket]>; frozen: { value: boolean } }>(
        (resolve) => {
          const pairs = new Set<[Socket, Socket]>()
          const frozen = { value: false }
          const server = createServer((client) => {
            const upstream = connect(Number(target.port || 5432), target.hostname)
            const pair: [Socket, Socket] = [client, upstream]
            pairs.add(pair)
            client.pipe(upstream)
            upstream.pipe(client)
            if (frozen.value) { for (const socket of pair) socket.pause() }
            const close = () => {
              pairs.delete(pair)
              client.destroy()
              upstream.destroy()
            }
            client.on("error", close).on("close", close)
            upstream.on("error", close).on("close", close)
          })
          server.listen(0, "127.0.0.1", () => {
            const address = server.address()
            resolve({ server, port: typeof address === "object" && address ? address.port : 0, pairs, frozen })
          })
        }
      )
    ),
    ({ pairs, server }) =>
      Effect.promise(() => {
        for (const pair of pairs) for (const socket of pair) socket.destroy()
        return new Promise<void>((resolve) => server.close(() => resolve()))
      })
  ).pipe(Effect.map((proxy) => ({
    port: proxy.port,
    /** Stops forwarding in both directions, on open connections and on new ones. */
    freeze: () => {
      proxy.frozen.value = true
      for (const pair of proxy.pairs) for (const socket of pair) socket.pause()
    },
    thaw: () => {
      proxy.frozen.value = false
      for (const pair of proxy.pairs) for (const socket of pair) socket.resume()
    }
  })))

const databaseUrl = process.env["DATABASE_URL"]

describe.skipIf(databaseUrl === undefined || databaseUrl === "")("a database that stops answering (item 6)", () => {
  it.live(
    "answers 503 service_unavailable with Retry-After while frozen, and 200 again once it answers",
    () =>
      Effect.gen(function*() {
        const url = new URL(yield* scratchDatabaseUrl("cp_fault"))
        const proxy = yield* freezableProxy(url)
        const proxied = new URL(url)
        proxied.hostname = "127.0.0.1"
        proxied.port = String(proxy.port)
        const context = yield* Layer.build(testServerOver(Database.layerPostgres(proxied.toString())))
        const { baseUrl } = Context.get(context, TestServer)
        const { token, personal } = yield* signInWithPersonal(baseUrl, "fault")
        const read = call(baseUrl, "GET", `/v1/organizations/${personal.id}`, { token })
        assert.strictEqual((yield* read).status, 200)

        proxy.freeze()
        // Thawed again before the server stops, even when an assertion below fails.
        yield* Effect.addFinalizer(() => Effect.sync(proxy.thaw))
        // A read, and a write with its transaction: both answer instead of hanging for as long as the freeze lasts.
        const [reading, writing] = yield* Effect.all([
          read,
          call(baseUrl, "POST", "/v1/organizations", { token, body: { name: "Frozen" } })
        ], { concurrency: "unbounded" })
        for (const res of [reading, writing]) {
          const error = failed(res, 503, "service_unavailable")
          assert.strictEqual(res.headers.get("retry-after"), String(error.details["retryAfterSeconds"]))
        }

        proxy.thaw()
        // Recovery needs nobody: the same request succeeds again (interrupted connections are replaced as they fail).
        let status = 0
        for (let attempt = 0; attempt < 40 && status !== 200; attempt++) {
          if (attempt > 0) yield* Effect.sleep("250 millis")
          status = (yield* read).status
        }
        assert.strictEqual(status, 200)
        const created = yield* call(baseUrl, "POST", "/v1/organizations", { token, body: { name: "Thawed" } })
        assert.strictEqual(created.status, 200, created.text)
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )

  it.live(
    "a read held up past the statement timeout is cancelled and answers 503 service_unavailable; the next one is 200",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("cp_slow_read")
        const context = yield* Layer.build(testServerOver(Database.layerPostgres(url)))
        const { baseUrl } = Context.get(context, TestServer)
        const { token, personal } = yield* signInWithPersonal(baseUrl, "slow")
        const read = call(baseUrl, "GET", `/v1/organizations/${personal.id}/audit`, { token })
        assert.strictEqual((yield* read).status, 200)

        // Another session locks the audit table for longer than the statement timeout: the read waits on it.
        // Taking the lock may itself wait (autovacuum's analyze of the fresh table): no timeout for this session.
        const side = Context.get(yield* Layer.build(Database.layerPostgres(url, 0)), PgClient.PgClient)
        const held = yield* side.withTransaction(Effect.gen(function*() {
          yield* side`lock table audit_entries in access exclusive mode`
          return yield* read
        }))
        const error = failed(held, 503, "service_unavailable")
        // The database's statement timeout answered, not the request deadline (whose message is its own).
        assert.strictEqual(error.message, "The database is unavailable; retry later")
        assert.strictEqual(held.headers.get("retry-after"), String(error.details["retryAfterSeconds"]))

        // The lock is gone with the side transaction, and the connection the cancelled read held serves again.
        assert.strictEqual((yield* read).status, 200)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
