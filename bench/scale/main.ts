/**
 * `npm run bench:scale`: every list and filter route timed against one very large tenant, on PostgreSQL, printing a
 * table (and writing it to `docs/scale.md`); it asserts nothing.
 *
 * 1. Creates a scratch database `cp_scale_<random>` beside `SCALE_DATABASE_URL` / `DATABASE_URL` (default
 *    postgres://postgres@127.0.0.1:5432/test), starts our server on it (which migrates it), signs the bench user in
 *    and creates the large tenant through the API.
 * 2. Runs each area's loader (`bench/scale/<area>.ts`): set-based SQL (`generate_series`, `insert … select`) with the
 *    area's secondary indexes dropped during the load and rebuilt after, foreign-key triggers off, then `analyze`.
 * 3. Times every route the areas name: `SCALE_REQUESTS` sequential GETs each (default 200) after a few warm-ups,
 *    p50 and p99; a route with a `depth` first walks that many pages by cursor and times the page it reached. The
 *    audit rate-limit buckets are emptied between batches, so the run is not throttled.
 * 4. Prints the table, writes it to `docs/scale.md` (unless `SCALE_WRITE_DOCS=0`), stops the server and drops the
 *    database (unless `SCALE_KEEP=1`).
 *
 * Scale: `SCALE_AUDIT_ROWS` (10,000,000), `SCALE_SMALL_TENANTS` (100,000), `SCALE_USER_WORKSPACES` (5,000),
 * `SCALE_PROJECTS` (100,000), `SCALE_MEMBERS` (20,000), `SCALE_TEAMS` (5,000), … (each module's header says its
 * own). `SCALE_AREAS=audit,projects` runs only those areas. For a quick run: `SCALE_AUDIT_ROWS=200000
 * SCALE_SMALL_TENANTS=5000 SCALE_PROJECTS=5000 npm run bench:scale`.
 *
 * Adding an area: write `bench/scale/<area>.ts` exporting `area({ name, load, routes })` (see `kit.ts`): `load` fills
 * the area's tables in `tenant.orgId` (and in the small tenants if it has any) inside `bulkLoad(db, [tables], …)`,
 * sized by its own `SCALE_…` variable defaulting to the scale the issue asks for; `routes` lists every list and
 * filter route of the area (add a `depth` for a deep page). Then add it to `AREAS` below, in dependency order.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { writeFile } from "node:fs/promises"
import { loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { audit } from "./audit.ts"
import type { Area, Route, Tenant } from "./kit.ts"
import { scaleOf } from "./kit.ts"
import { members } from "./members.ts"
import { projects } from "./projects.ts"
import { runs } from "./runs.ts"
import { teams } from "./teams.ts"
import { webhooks } from "./webhooks.ts"
import { workspaces } from "./workspaces.ts"

/** Every area, in the order they load (members before audit: audit's user actors are the members). */
const AREAS: ReadonlyArray<Area> = [workspaces, members, projects, teams, audit, runs, webhooks]

const REQUESTS = scaleOf("SCALE_REQUESTS", 200)
const DB_RUNS = scaleOf("SCALE_DB_RUNS", 50)
const ADMIN_URL = process.env["SCALE_DATABASE_URL"] || process.env["DATABASE_URL"] ||
  "postgres://postgres@127.0.0.1:5432/test"
const SERVER_MAIN = fileURLToPath(new URL("../../packages/server/src/main.ts", import.meta.url))
const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const DOCS = fileURLToPath(new URL("../../docs/scale.md", import.meta.url))
const started = performance.now()
const progress = (message: string) =>
  process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0).padStart(5)} s] ${message}\n`)

interface Answer {
  readonly status: number
  readonly json: unknown
}

const call = async (base: string, method: string, path: string, token?: string, body?: unknown): Promise<Answer> => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, json: text === "" ? null : JSON.parse(text) }
}

const at = (answer: Answer, ...path: ReadonlyArray<string | number>): unknown => {
  let value: unknown = answer.json
  for (const key of path) {
    value = typeof value === "object" && value !== null ? (value as Record<string | number, unknown>)[key] : undefined
  }
  return value
}

const required = (what: string, answer: Answer, ...path: ReadonlyArray<string | number>): string => {
  const value = at(answer, ...path)
  if (answer.status >= 300 || typeof value !== "string") {
    throw new Error(`${what}: HTTP ${answer.status} ${JSON.stringify(answer.json)}`)
  }
  return value
}

const startServer = async (databaseUrl: string, port: number): Promise<ChildProcess> => {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), HOST: "127.0.0.1" }
  env["APP_ENV"] = "development"
  env["LOG_FORMAT"] = "json"
  delete env["DATA_DIR"]
  const child = spawn(process.execPath, ["--max-semi-space-size=64", SERVER_MAIN], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "ignore", "inherit"]
  })
  for (let attempt = 0; attempt < 1200; attempt++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return child
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  child.kill("SIGKILL")
  throw new Error("server did not become healthy")
}

/** Signs a fresh user in through the dev outbox and creates the large tenant. */
const createTenant = async (base: string) => {
  const email = `scale-${randomUUID().slice(0, 8)}@example.com`
  const challengeId = required(
    "login start",
    await call(base, "POST", "/v1/auth/login/start", undefined, { email }),
    "data",
    "challengeId"
  )
  const code = required(
    "outbox",
    await call(base, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`),
    "data",
    "messages",
    0,
    "data",
    "code"
  )
  const complete = await call(base, "POST", "/v1/auth/login/complete", undefined, { challengeId, code })
  const token = required("login complete", complete, "data", "token")
  const session = await call(base, "GET", "/v1/auth/session", token)
  const userId = required("session", session, "data", "user", "id")
  const orgId = required(
    "create workspace",
    await call(base, "POST", "/v1/organizations", token, {
      name: "Scale Tenant",
      slug: `scale-${randomBytes(3).toString("hex")}`
    }),
    "data",
    "organization",
    "id"
  )
  const tenant: Tenant = { orgId, userId }
  return { token, tenant }
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN

interface Timed {
  readonly route: Route
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly rows: number
  readonly status: number
  /** The route's statement alone in the database (execution time), when the area wrote it out. */
  readonly db?: { readonly p50: number; readonly p99: number }
}

/** `route.sql` run `DB_RUNS` times under `explain analyze`: p50 and p99 of planning plus execution time. */
const timeStatement = async (db: pg.Client, sql: string) => {
  const samples: Array<number> = []
  for (let i = 0; i < DB_RUNS + 2; i++) {
    const { rows } = await db.query<{ "QUERY PLAN": Array<{ "Planning Time": number; "Execution Time": number }> }>(
      `explain (analyze, format json) ${sql}`
    )
    const plan = rows[0]?.["QUERY PLAN"][0]
    if (i >= 2 && plan !== undefined) samples.push(plan["Planning Time"] + plan["Execution Time"])
  }
  samples.sort((a, b) => a - b)
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) }
}

const time = async (base: string, token: string, db: pg.Client, route: Route): Promise<Timed> => {
  const resetLimits = () => db.query("delete from rate_limit_buckets")
  let path = route.path
  for (let page = 0; page < (route.depth ?? 0); page++) {
    if (page % 50 === 0) await resetLimits()
    const answer = await call(base, "GET", path, token)
    const cursor = at(answer, "meta", "cursor")
    if (typeof cursor !== "string") throw new Error(`${route.label}: no cursor after page ${page + 1}`)
    const url = new URL(route.path, base)
    url.searchParams.set("cursor", cursor)
    path = `${url.pathname}${url.search}`
  }
  const samples: Array<number> = []
  let status = 0
  let rows = 0
  for (let i = 0; i < REQUESTS + 5; i++) {
    if (i % 50 === 0) await resetLimits()
    const begin = performance.now()
    const answer = await call(base, "GET", path, token)
    const took = performance.now() - begin
    status = answer.status
    if (status !== 200) throw new Error(`${route.label}: HTTP ${status} ${JSON.stringify(answer.json)}`)
    const data = at(answer, "data")
    const list = typeof data === "object" && data !== null ? Object.values(data).find(Array.isArray) : undefined
    rows = Array.isArray(list) ? list.length : 0
    if (i >= 5) samples.push(took)
  }
  samples.sort((a, b) => a - b)
  const timed = {
    route,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    max: samples.at(-1) ?? 0,
    rows,
    status
  }
  return route.sql === undefined ? timed : { ...timed, db: await timeStatement(db, route.sql) }
}

const table = (results: ReadonlyArray<Timed>, heading: string): string => {
  const lines = [
    heading,
    "",
    "| area | route | rows on page | p50 ms | p99 ms | max ms | statement alone p50 / p99 ms | ≤ 50 ms p99 |",
    "|---|---|---:|---:|---:|---:|---:|:---:|",
    ...results.map((r) =>
      `| ${r.route.area} | ${r.route.label.replaceAll("|", "\\|")} | ${r.rows} | ${r.p50.toFixed(1)} | ${
        r.p99.toFixed(1)
      } | ${r.max.toFixed(1)} | ${r.db === undefined ? "" : `${r.db.p50.toFixed(2)} / ${r.db.p99.toFixed(2)}`} | ${
        r.p99 <= 50 ? "yes" : "**no**"
      } |`
    )
  ]
  return lines.join("\n")
}

const main = async () => {
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  const name = `cp_scale_${randomBytes(4).toString("hex")}`
  await admin.query(`create database ${name}`)
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  const databaseUrl = url.toString()
  const port = scaleOf("SCALE_PORT", 0) || 20_000 + Math.floor(Math.random() * 20_000)
  const base = `http://127.0.0.1:${port}`
  let child: ChildProcess | undefined
  const db = new pg.Client({ connectionString: databaseUrl })
  // Dropping the database (on a signal) ends this connection under a statement in flight: that statement fails.
  db.on("error", () => undefined)
  let cleaning: Promise<void> | undefined
  /**
   * Stops the server and drops the scratch database (unless `SCALE_KEEP=1`), once: at the end, or on a signal (the
   * load's statement then fails, and `main` waits for this same cleanup before it ends).
   */
  const cleanup = () =>
    cleaning ??= (async () => {
      child?.kill("SIGTERM")
      if (process.env["SCALE_KEEP"] === "1") {
        progress(`kept ${databaseUrl}`)
      } else {
        await new Promise((resolve) => setTimeout(resolve, 1000))
        await admin.query(`drop database if exists ${name} with (force)`)
      }
      await db.end().catch(() => undefined)
      await admin.end()
    })()
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => void cleanup().finally(() => process.exit(130)))
  }
  try {
    progress(`database ${name}`)
    child = await startServer(databaseUrl, port)
    await db.connect()
    await db.query("set maintenance_work_mem = '1GB'")
    await db.query("set synchronous_commit = off")
    const { tenant, token } = await createTenant(base)
    const only = (process.env["SCALE_AREAS"] ?? "").split(",").filter((a) => a !== "")
    const areas = AREAS.filter((a) => only.length === 0 || only.includes(a.name))
    const loaded: Array<{ area: Area; result: unknown }> = []
    for (const area of areas) {
      const begin = performance.now()
      const result = await area.load({ db, tenant, progress })
      progress(`loaded ${area.name} in ${((performance.now() - begin) / 1000).toFixed(0)} s`)
      loaded.push({ area, result })
    }
    await db.query("vacuum analyze")
    progress("vacuum analyze done")
    const { rows: sizes } = await db.query<{ table: string; rows: string }>(
      `select relname as table, n_live_tup::text as rows from pg_stat_user_tables where n_live_tup >= 1000
       order by n_live_tup desc`
    )
    // The floor: an authenticated read that touches no list, timed the same way, so the machine's own cost shows.
    const results: Array<Timed> = [
      await time(base, token, db, { area: "(floor)", label: "GET /v1/auth/session", path: "/v1/auth/session" })
    ]
    for (const { area, result } of loaded) {
      for (const route of area.routes(tenant, result)) {
        const timed = await time(base, token, db, route)
        progress(`${route.area} ${route.label}: p50 ${timed.p50.toFixed(1)} ms, p99 ${timed.p99.toFixed(1)} ms`)
        results.push(timed)
      }
    }
    const load = loadavg().map((l) => l.toFixed(2)).join(", ")
    const heading = [
      `PostgreSQL, ${REQUESTS} sequential requests per route after 5 warm-ups, one tenant holding:`,
      "",
      ...sizes.map((s) => `- \`${s.table}\`: ${Number(s.rows).toLocaleString("en")} rows`),
      "",
      `Load average at the end: ${load} (2 shared cores). Generated and timed in ${
        ((performance.now() - started) / 1000 / 60).toFixed(1)
      } min.`
    ].join("\n")
    const text = table(results, heading)
    console.log(`\n${text}\n`)
    if (process.env["SCALE_WRITE_DOCS"] !== "0") {
      await writeFile(
        DOCS,
        "# What each list route costs at scale\n\n" +
          "Written by `npm run bench:scale` (`bench/scale/main.ts`); do not edit by hand. " +
          "Every list is keyset-paged; " +
          `a deep page is reached by walking the cursor that many pages.\n\n${text}\n`
      )
      progress(`wrote ${DOCS}`)
    }
  } finally {
    await cleanup()
  }
}

await main()
