/**
 * `npm run bench:usage`: usage ingestion and summary reads (metering-billing.md §7), on PostgreSQL, printing figures
 * and asserting nothing.
 *
 * 1. Starts our server (the node flags `npm start` uses) on a scratch database, signs a user in.
 * 2. Single ingest: `BENCH_CONNECTIONS` clients POST /usage back to back for `BENCH_SECONDS`: records per second.
 * 3. Batch ingest: the same clients POST /usage/batch of 1000 records: records per second.
 * 4. Raw PostgreSQL: the same number of `pg` connections run `INSERT … ON CONFLICT DO NOTHING` of 1000 rows of the
 *    same shape into `usage_records` (one multi-row statement each, no rollups): records per second. Steps 3 and 4
 *    alternate `BENCH_ROUNDS` times so drifting load hits both alike; the ratio is the median of per-round ratios.
 *    After the rounds: how long the roll-up fiber took to fold what was still pending, and whether the rollups then
 *    hold exactly the records the API stored.
 * 5. Summary: `BENCH_USAGE_RECORDS` records (default 10 million) generated with SQL in another workspace (its
 *    rollups built from them with SQL too), then `BENCH_SUMMARY_REQUESTS` sequential GET /usage/summary (default
 *    window, day and hour buckets, with and without a project filter): p50 / p99 latency.
 *
 * Environment: `BENCH_DATABASE_URL` or `DATABASE_URL` (admin connection; default postgres://postgres@127.0.0.1/test),
 * `BENCH_SECONDS` (default 10), `BENCH_ROUNDS` (default 3), `BENCH_CONNECTIONS` (default 4),
 * `BENCH_USAGE_RECORDS` (default 10000000, 0 skips step 5), `BENCH_SUMMARY_REQUESTS` (default 400),
 * `BENCH_CPU_PROF_DIR` (the server writes a V8 CPU profile there on exit; read it with `node bench/profile.ts`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { readFile } from "node:fs/promises"
import { createServer } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"

const positive = (name: string, fallback: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${raw}`)
  return value
}

const SECONDS = positive("BENCH_SECONDS", 10)
const ROUNDS = Math.round(positive("BENCH_ROUNDS", 3))
const CONNECTIONS = Math.round(positive("BENCH_CONNECTIONS", 4))
const RECORDS = process.env["BENCH_USAGE_RECORDS"] === "0" ? 0 : Math.round(positive("BENCH_USAGE_RECORDS", 10_000_000))
const CPU_PROF_DIR = process.env["BENCH_CPU_PROF_DIR"]
const SUMMARY_REQUESTS = Math.round(positive("BENCH_SUMMARY_REQUESTS", 400))
const BATCH = 1000
const ADMIN_URL = process.env["BENCH_DATABASE_URL"] || process.env["DATABASE_URL"] ||
  "postgres://postgres@127.0.0.1:5432/test"
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const SERVER_MAIN = fileURLToPath(new URL("../packages/server/src/main.ts", import.meta.url))

const nodeFlags = async (): Promise<ReadonlyArray<string>> => {
  const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { scripts?: { start?: string } }
  const flags = /\bnode((?:\s+--\S+)*)\s+packages\/server\/src\/main\.ts/.exec(manifest.scripts?.start ?? "")?.[1]
  return (flags ?? "").split(/\s+/).filter((flag) => flag !== "")
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error()))
    })
  })

interface Answer {
  readonly status: number
  readonly json: unknown
}

const call = async (method: string, url: string, options: { token?: string; body?: unknown } = {}): Promise<Answer> => {
  const response = await fetch(url, {
    method,
    headers: {
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...(options.body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const text = await response.text()
  return { status: response.status, json: text === "" ? null : JSON.parse(text) }
}

/** `answer.json` at `path`, failing loudly on a non-2xx answer. */
const field = (what: string, answer: Answer, ...path: ReadonlyArray<string | number>): unknown => {
  if (answer.status < 200 || answer.status >= 300) {
    throw new Error(`${what}: HTTP ${answer.status} ${JSON.stringify(answer.json)}`)
  }
  let value: unknown = answer.json
  for (const key of path) {
    value = typeof value === "object" && value !== null ? (value as Record<string | number, unknown>)[key] : undefined
  }
  if (value === undefined) throw new Error(`${what}: no ${path.join(".")} in ${JSON.stringify(answer.json)}`)
  return value
}

const signIn = async (base: string) => {
  const email = `bench-usage-${randomUUID().slice(0, 8)}@example.com`
  const challengeId = String(
    field("login start", await call("POST", `${base}/v1/auth/login/start`, { body: { email } }), "data", "challengeId")
  )
  const code = String(
    field(
      "outbox",
      await call("GET", `${base}/v1/dev/outbox?to=${encodeURIComponent(email)}`),
      "data",
      "messages",
      0,
      "data",
      "code"
    )
  )
  const token = String(
    field(
      "login complete",
      await call("POST", `${base}/v1/auth/login/complete`, { body: { challengeId, code } }),
      "data",
      "token"
    )
  )
  const orgId = String(
    field("organizations", await call("GET", `${base}/v1/organizations`, { token }), "data", "organizations", 0, "id")
  )
  return { token, orgId }
}

const startServer = async (databaseUrl: string): Promise<{ base: string; child: ChildProcess }> => {
  const port = await freePort()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: "127.0.0.1",
    APP_ENV: "development"
  }
  delete env["DATA_DIR"]
  const profile = CPU_PROF_DIR === undefined || CPU_PROF_DIR === ""
    ? []
    : ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF_DIR}`]
  const child = spawn(process.execPath, [...(await nodeFlags()), ...profile, SERVER_MAIN], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "ignore", "inherit"]
  })
  const base = `http://127.0.0.1:${port}`
  for (let attempt = 0; attempt < 1200; attempt++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) return { base, child }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  child.kill("SIGKILL")
  throw new Error("server did not become healthy")
}

/** `CONNECTIONS` loops running `step` until `SECONDS` pass; the records per second they stored. */
const load = async (step: () => Promise<number>, counter?: { stored: number }): Promise<number> => {
  const deadline = performance.now() + SECONDS * 1000
  const started = performance.now()
  let stored = 0
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < deadline) {
      const n = await step()
      stored += n
      if (counter !== undefined) counter.stored += n
    }
  }))
  return stored / ((performance.now() - started) / 1000)
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}
const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}

const main = async () => {
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  const name = `cp_bench_usage_${randomBytes(4).toString("hex")}`
  await admin.query(`create database ${name}`)
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  const databaseUrl = url.toString()
  const { base, child } = await startServer(databaseUrl)
  const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS })
  try {
    const { orgId, token } = await signIn(base)
    const metric = "bench.calls"
    const record = () => ({
      metric,
      idempotencyKey: randomUUID(),
      quantity: 3,
      resourceId: "res-1",
      metadata: { region: "eu" }
    })

    // Every record the API stored, to check the rollups against.
    const viaApi = { stored: 0 }
    // Warm-up: the JIT and the connection pools.
    await load(
      async () =>
        (await call("POST", `${base}/v1/organizations/${orgId}/usage`, { token, body: record() })).status === 200
          ? 1
          : 0,
      viaApi
    )

    const single = await load(async () => {
      const answer = await call("POST", `${base}/v1/organizations/${orgId}/usage`, { token, body: record() })
      return answer.status === 200 ? 1 : 0
    }, viaApi)

    const batchRound = () =>
      load(async () => {
        const answer = await call("POST", `${base}/v1/organizations/${orgId}/usage/batch`, {
          token,
          body: { records: Array.from({ length: BATCH }, record) }
        })
        const results = field("batch", answer, "data", "results")
        return Array.isArray(results) ? results.filter((r: { ok?: boolean }) => r.ok === true).length : 0
      }, viaApi)
    const rawRound = () =>
      load(async () => {
        const now = new Date()
        const params: Array<unknown> = []
        const rows: Array<string> = []
        for (let i = 0; i < BATCH; i++) {
          const p = params.length
          params.push(randomUUID(), orgId, "res-1", metric, 3, randomUUID(), now, JSON.stringify({ region: "eu" }), now)
          rows.push(
            `($${p + 1}, $${p + 2}, null, null, $${p + 3}, $${p + 4}, $${p + 5}, $${p + 6}, $${p + 7}, $${p + 8}, $${
              p + 9
            })`
          )
        }
        const result = await pool.query(
          `insert into usage_records (id, org_id, project_id, environment_id, resource_id, metric, quantity,
             idempotency_key, recorded_at, metadata, created_at) values ${rows.join(", ")}
           on conflict (org_id, idempotency_key) do nothing`,
          params
        )
        return result.rowCount ?? 0
      })
    const batches: Array<number> = []
    const raws: Array<number> = []
    for (let round = 0; round < ROUNDS; round++) {
      batches.push(await batchRound())
      raws.push(await rawRound())
    }
    const ratios = batches.map((b, i) => b / (raws[i] ?? Number.NaN))

    console.log(`\nUsage ingestion, PostgreSQL, ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} rounds`)
    console.log(`  single POST /usage            ${single.toFixed(0).padStart(9)} records/s`)
    console.log(
      `  POST /usage/batch (1000)      ${median(batches).toFixed(0).padStart(9)} records/s  (rounds ${
        batches.map((v) => v.toFixed(0)).join(", ")
      })`
    )
    console.log(
      `  raw INSERT … ON CONFLICT      ${median(raws).toFixed(0).padStart(9)} records/s  (rounds ${
        raws.map((v) => v.toFixed(0)).join(", ")
      })`
    )
    console.log(`  batch / raw                   ${(median(ratios) * 100).toFixed(0).padStart(8)} %   (goal ≥ 50 %)`)
    console.log(`  single / raw                  ${((single / median(raws)) * 100).toFixed(1).padStart(8)} %`)

    // The roll-up fiber's backlog when the load stopped, and the rollups against what the API stored.
    const drainStarted = performance.now()
    const pendingTable = (await pool.query("select to_regclass('usage_rollup_pending') is not null as present"))
      .rows[0] as { present: boolean }
    if (pendingTable.present) {
      const backlog = await pool.query("select count(*)::int as n from usage_rollup_pending")
      while ((await pool.query("select 1 from usage_rollup_pending limit 1")).rowCount !== 0) {
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      console.log(
        `  roll-up backlog at the end     ${
          String((backlog.rows[0] as { n: number }).n).padStart(8)
        } pending sums, folded in ${((performance.now() - drainStarted) / 1000).toFixed(1)} s`
      )
    }
    const rolled = (await pool.query(
      `select coalesce(sum(record_count), 0)::float8 as n from usage_rollups
       where org_id = $1 and bucket_type = 'hour'`,
      [orgId]
    )).rows[0] as { n: number }
    console.log(
      `  rollups exact                  ${
        rolled.n === viaApi.stored ? "yes" : "NO"
      } (${rolled.n} records rolled up, ${viaApi.stored} stored via the API)`
    )

    if (RECORDS === 0) return
    // The summary workspace: RECORDS records generated with SQL over the last 34 days, in three projects with two
    // environments each plus workspace-level ones, and their rollups built from them with SQL.
    const other = await signIn(base)
    const projects: Array<{ projectId: string; environments: Array<string> }> = []
    for (let p = 0; p < 3; p++) {
      const projectId = String(field(
        "project",
        await call("POST", `${base}/v1/organizations/${other.orgId}/projects`, {
          token: other.token,
          body: { name: `Bench ${p}` }
        }),
        "data",
        "project",
        "id"
      ))
      const environments: Array<string> = []
      for (const env of ["prod", "stage"]) {
        environments.push(
          String(
            field(
              "environment",
              await call("POST", `${base}/v1/organizations/${other.orgId}/projects/${projectId}/environments`, {
                token: other.token,
                body: { name: env }
              }),
              "data",
              "environment",
              "id"
            )
          )
        )
      }
      projects.push({ projectId, environments })
    }
    const scopes = [
      { p: null, e: null },
      ...projects.flatMap((
        { environments, projectId }
      ) => [{ p: projectId, e: null }, ...environments.map((e) => ({ p: projectId, e }))])
    ]
    const generateStarted = performance.now()
    const client = await pool.connect()
    try {
      await client.query("create temporary table bench_scopes (n int, p text, e text)")
      for (const [n, scope] of scopes.entries()) {
        await client.query("insert into bench_scopes values ($1, $2, $3)", [n, scope.p, scope.e])
      }
      const chunk = 1_000_000
      for (let from = 1; from <= RECORDS; from += chunk) {
        const to = Math.min(RECORDS, from + chunk - 1)
        await client.query(
          `insert into usage_records (id, org_id, project_id, environment_id, resource_id, metric, quantity,
             idempotency_key, recorded_at, metadata, created_at)
           select gen_random_uuid()::text, $1, s.p, s.e, 'res-' || (i % 100), 'bench.calls', 1 + (i % 7), 'gen-' || i,
             now() - (i % 2937600) * interval '1 second', null, now()
           from generate_series($2::bigint, $3::bigint) as i join bench_scopes s on s.n = i % $4`,
          [other.orgId, from, to, scopes.length]
        )
      }
      for (const unit of ["hour", "day"]) {
        await client.query(
          `insert into usage_rollups (org_id, project_id, environment_id, metric, bucket_type, bucket_start, quantity,
             record_count, created_at, updated_at)
           select org_id, project_id, environment_id, metric, '${unit}', date_trunc('${unit}', recorded_at, 'UTC'),
             sum(quantity), count(*), now(), now()
           from usage_records where org_id = $1 group by 1, 2, 3, 4, 6`,
          [other.orgId]
        )
      }
      await client.query("analyze usage_records")
      await client.query("analyze usage_rollups")
    } finally {
      client.release()
    }
    const generated = (performance.now() - generateStarted) / 1000
    const queries = [
      "metric=bench.calls",
      "metric=bench.calls&bucketType=hour",
      `metric=bench.calls&projectId=${projects[0]?.projectId ?? ""}`,
      `metric=bench.calls&bucketType=hour&projectId=${projects[1]?.projectId ?? ""}&environmentId=${
        projects[1]?.environments[0] ?? ""
      }`
    ]
    for (const query of queries) {
      field(
        "summary",
        await call("GET", `${base}/v1/organizations/${other.orgId}/usage/summary?${query}`, { token: other.token }),
        "data"
      )
    }
    const latencies: Record<string, Array<number>> = {}
    for (let i = 0; i < SUMMARY_REQUESTS; i++) {
      const query = queries[i % queries.length] ?? ""
      const started = performance.now()
      const answer = await call("GET", `${base}/v1/organizations/${other.orgId}/usage/summary?${query}`, {
        token: other.token
      })
      if (answer.status !== 200) throw new Error(`summary: HTTP ${answer.status}`)
      ;(latencies[query] ??= []).push(performance.now() - started)
    }
    const all = Object.values(latencies).flat()
    console.log(
      `\nGET /usage/summary over ${RECORDS.toLocaleString("en")} records (generated and rolled up in ${
        generated.toFixed(0)
      } s), ${SUMMARY_REQUESTS} sequential requests`
    )
    for (const [query, values] of Object.entries(latencies)) {
      console.log(
        `  ${query.replace(/prj_\w+|env_\w+/g, "…").padEnd(70)} p50 ${percentile(values, 50).toFixed(1)} ms  p99 ${
          percentile(values, 99).toFixed(1)
        } ms`
      )
    }
    console.log(
      `  all                                                                    p50 ${
        percentile(all, 50).toFixed(1)
      } ms  p99 ${percentile(all, 99).toFixed(1)} ms  (goal p99 < 20 ms)`
    )
  } finally {
    child.kill("SIGTERM")
    await pool.end()
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await admin.query(`drop database if exists ${name} with (force)`)
    await admin.end()
  }
}

await main()
