/**
 * `npm run bench:webhooks`: the webhook run of webhooks.md §5, on demand; prints figures, asserts nothing.
 *
 * Starts one server process (`packages/server/src/main.ts`, the node flags of `npm start`) on a scratch PostgreSQL
 * database (LISTEN/NOTIFY wakes its worker), a local HTTPS receiver answering 200 (its CA trusted through
 * `NODE_EXTRA_CA_CERTS`), and measures:
 *
 * 1. Throughput: `BENCH_WEBHOOK_BACKLOG` (default 20,000) delivery attempts written straight into the outbox at once,
 *    then the time until the receiver has them all: deliveries per second of one process, and the server process's
 *    CPU time (/proc utime + stime) per delivery, which a loaded machine moves far less than the rate.
 * 2. Latency: `BENCH_WEBHOOK_EVENTS` (default 2,000) events written through the API (`POST …/teams`, 8 at a time), and
 *    for each the time from the event's `occurred_at` (stamped in its transaction) to its receipt: p50, p99, max.
 *
 * `BENCH_DATABASE_URL` or `DATABASE_URL`: the PostgreSQL admin connection (default
 * postgres://postgres@127.0.0.1:5432/test). `BENCH_SERVER_NODE_FLAGS`: extra node flags for the server process (for
 * example `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the worker). The machine's load average is printed with the
 * figures, since other work on it moves them.
 */
import { Organization, WebhookEndpoint } from "@cp/domain"
import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { createServer as createHttpsServer } from "node:https"
import { createServer as createNetServer } from "node:net"
import { cpus, loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { ok } from "../test/support/envelope.ts"
import { makeTestCa } from "../test/support/httpsReceiver.ts"
import { call } from "../test/support/server.ts"
import { signIn } from "../test/support/session.ts"
import { CLK_TCK, cpuTicks } from "./proc.ts"

const ADMIN_URL = process.env["BENCH_DATABASE_URL"] ?? process.env["DATABASE_URL"] ??
  "postgres://postgres@127.0.0.1:5432/test"
const BACKLOG = Number(process.env["BENCH_WEBHOOK_BACKLOG"] ?? 20_000)
const EVENTS = Number(process.env["BENCH_WEBHOOK_EVENTS"] ?? 2_000)
const MAIN = fileURLToPath(new URL("../packages/server/src/main.ts", import.meta.url))

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createNetServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN

const main = async () => {
  const ca = makeTestCa()
  const received = new Map<string, number>()
  let watcher: (() => void) | undefined
  const receiver = createHttpsServer({ key: ca.key, cert: ca.cert }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      received.set(String(body.id), Date.now())
      res.writeHead(200).end()
      watcher?.()
    })
  })
  let handshakes = 0
  receiver.on("secureConnection", () => handshakes++)
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const address = receiver.address()
  const receiverPort = typeof address === "object" && address !== null ? address.port : 0

  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  const name = `cp_bench_webhooks_${randomUUID().replaceAll("-", "")}`
  await admin.query(`create database ${name}`)
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  const port = await freePort()
  const flags = (process.env["BENCH_SERVER_NODE_FLAGS"] ?? "").split(" ").filter((flag) => flag !== "")
  const server = spawn(process.execPath, ["--max-semi-space-size=64", ...flags, MAIN], {
    env: {
      PATH: process.env["PATH"] ?? "",
      APP_ENV: "test",
      HOST: "127.0.0.1",
      PORT: String(port),
      DATABASE_URL: url.toString(),
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: "1",
      NODE_EXTRA_CA_CERTS: ca.caFile
    },
    stdio: ["ignore", "ignore", "inherit"]
  })
  const baseUrl = `http://127.0.0.1:${port}`
  const db = new pg.Client({ connectionString: url.toString() })
  try {
    for (let i = 0; i < 600; i++) {
      if (await fetch(`${baseUrl}/health`).then((r) => r.ok, () => false)) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await db.connect()
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
    const session = await run(signIn(baseUrl))
    const [personal] = ok(await run(call(baseUrl, "GET", "/v1/organizations", { token: session.token })), {
      organizations: Schema.Array(Organization)
    }).organizations
    if (personal === undefined) throw new Error("no workspace")
    const path = `/v1/organizations/${personal.id}`
    const { endpoint } = ok(
      await run(call(baseUrl, "POST", `${path}/webhooks/endpoints`, {
        token: session.token,
        body: { url: `https://127.0.0.1:${receiverPort}/hook` }
      })),
      { endpoint: WebhookEndpoint }
    )
    await run(call(baseUrl, "POST", `${path}/webhooks/subscriptions`, {
      token: session.token,
      body: { endpointId: endpoint.id, eventType: "team.created" }
    }))

    const until = (count: number) =>
      new Promise<void>((resolve) => {
        watcher = () => received.size >= count && resolve()
        watcher()
      })

    // 1. Throughput: a backlog written straight into the outbox, drained by the one process.
    const pid = server.pid ?? 0
    const cpuBefore = await cpuTicks(pid)
    const started = Date.now()
    await db.query(
      `insert into webhook_deliveries (id, org_id, endpoint_id, subscription_id, event_id, event_type, status,
         attempt_number, idempotency_key, created_at, updated_at, body, due_at)
       select 'whd_' || lpad(upper(to_hex(g)), 26, '0'), $1, $2, null, gen_random_uuid(), 'bench.backlog', 'pending',
         1, 'bench', now(), now(),
         json_build_object('id', 'backlog-' || g, 'type', 'bench.backlog', 'occurred_at', now(),
           'data', '{}'::json)::text,
         now()
       from generate_series(1, $3) g`,
      [personal.id, endpoint.id, BACKLOG]
    )
    await db.query(`select pg_notify('webhook_deliveries', '')`)
    await until(BACKLOG)
    const seconds = (Date.now() - started) / 1000
    const cpuUsPerDelivery = ((await cpuTicks(pid)) - cpuBefore) / CLK_TCK * 1e6 / BACKLOG
    const backlogHandshakes = handshakes

    // 2. Latency: events through the API, each timed from its occurred_at to its receipt.
    received.clear()
    let next = 0
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < EVENTS) {
        const i = next++
        await run(call(baseUrl, "POST", `${path}/teams`, { token: session.token, body: { name: `Bench ${i}` } }))
      }
    }))
    await until(EVENTS)
    const events = await db.query<{ id: string; at: Date }>(
      `select id::text as id, occurred_at as at from events where type = 'team.created' and org_id = $1`,
      [personal.id]
    )
    const latencies = events.rows.flatMap((row) => {
      const at = received.get(row.id)
      return at === undefined ? [] : [at - row.at.getTime()]
    }).sort((a, b) => a - b)

    console.log(
      `webhook bench (PostgreSQL, one server process, ${cpus().length} cores, load average ${
        loadavg().map((load) => load.toFixed(2)).join(" ")
      })`
    )
    console.log(
      `  throughput: ${BACKLOG} deliveries in ${seconds.toFixed(2)} s = ${
        (BACKLOG / seconds).toFixed(0)
      } deliveries/s per process, server CPU ${
        cpuUsPerDelivery.toFixed(0)
      } µs per delivery (${backlogHandshakes} TLS handshakes)`
    )
    console.log(
      `  event write -> receipt over ${latencies.length} API events: p50 ${percentile(latencies, 0.5)} ms, ` +
        `p99 ${percentile(latencies, 0.99)} ms, max ${latencies.at(-1)} ms`
    )
  } finally {
    server.kill("SIGTERM")
    await new Promise((resolve) => server.once("exit", resolve))
    await db.end().catch(() => undefined)
    await admin.query(`drop database if exists ${name} with (force)`)
    await admin.end()
    receiver.closeAllConnections()
    receiver.close()
  }
}

await main()
