/**
 * `npm run bench`: a load benchmark run on demand. It prints figures and never asserts timings.
 *
 * For each database mode (embedded PGlite in a fresh temp DATA_DIR; a scratch database on a PostgreSQL server) it
 * starts our server as a child process (with the node flags `npm start` uses), signs a user in, and loads two routes
 * with autocannon (`GET /v1/organizations/{orgId}` authenticated, and `POST /v1/auth/login/start` with a new email per
 * request), and the same routes on `bench/baseline.ts`, a plain `node:http` + `pg` server doing the same database work
 * on the same data. Each is measured `BENCH_ROUNDS` times; on PostgreSQL both servers run at once and the rounds
 * alternate (ours, baseline, ours, …) so that drifting load on a shared machine hits both alike, and the ratio is the
 * median of the per-round ratios. PGlite lets one process open a data directory, so there ours runs all its rounds
 * first. Per run it reads the server process's CPU time and peak RSS from /proc.
 *
 * Environment:
 * - `BENCH_SECONDS` measured seconds per run (default 10), after an unmeasured 2 s warm-up (7 s before a server's
 *   first round, so the JIT has settled).
 * - `BENCH_ROUNDS` measured runs per server and route (default 5); the tables show their medians.
 * - `BENCH_DATABASE_URL` or else `DATABASE_URL`: the PostgreSQL admin connection on which a scratch database
 *   `cp_bench_<random>` is created and finally dropped (default postgres://postgres@127.0.0.1:5432/test).
 * - `BENCH_MODES`: `pglite`, `postgres` or both, comma-separated (default both).
 * - `BENCH_CPU_PROF`: a directory; our server then runs under `node --cpu-prof` writing there, and the top frames of
 *   each measured run are printed after the tables.
 * - `BENCH_BASELINE_REV`: a git revision; the baseline is then our own server as of that revision (checked out into a
 *   temporary worktree with its own `npm ci`, started with the same node flags) instead of `bench/baseline.ts`, so a
 *   change is measured against its starting point in one run, rounds alternating.
 */
import autocannon from "autocannon"
import { Schema } from "effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises"
import { createServer } from "node:net"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { CLK_TCK, cpuTicks } from "./proc.ts"
import { formatSummary, readProfile, summarize, type Window } from "./profile.ts"

// ---------------------------------------------------------------------------------------------------------------
// Settings.

const positive = (name: string, fallback: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${raw}`)
  return value
}

const SECONDS = positive("BENCH_SECONDS", 10)
const ROUNDS = Math.round(positive("BENCH_ROUNDS", 5))
const WARMUP_SECONDS = 2
/** Once per server before its first round, every route: the JIT settles, so the rounds measure the steady state. */
const SERVER_WARMUP_SECONDS = 5
const CONNECTIONS = 10
const ADMIN_URL = process.env["BENCH_DATABASE_URL"] || process.env["DATABASE_URL"] ||
  "postgres://postgres@127.0.0.1:5432/test"
const MODES = (process.env["BENCH_MODES"] || "pglite,postgres").split(",").map((mode) => mode.trim())
const PROFILE_DIR = process.env["BENCH_CPU_PROF"] || undefined
const BASELINE_REV = process.env["BENCH_BASELINE_REV"] || undefined
const HOST = "127.0.0.1"
const STARTUP_TIMEOUT_MS = 120_000
const STOP_TIMEOUT_MS = 15_000

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const SERVER_MAIN = fileURLToPath(new URL("../packages/server/src/main.ts", import.meta.url))
const BASELINE_MAIN = fileURLToPath(new URL("./baseline.ts", import.meta.url))

/** The node flags `npm start` runs our server with (package.json's start script), so the bench measures the same. */
const SERVER_NODE_FLAGS: ReadonlyArray<string> = await (async () => {
  const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { scripts?: { start?: string } }
  const flags = /\bnode((?:\s+--\S+)*)\s+packages\/server\/src\/main\.ts/.exec(manifest.scripts?.start ?? "")?.[1]
  if (flags === undefined) {
    throw new Error("package.json: the start script does not run node packages/server/src/main.ts")
  }
  return flags.split(/\s+/).filter((flag) => flag !== "")
})()

/** Tells the runs of one invocation apart in emails and database names. */
const RUN_ID = randomBytes(4).toString("hex")

// ---------------------------------------------------------------------------------------------------------------
// Cleanup: everything acquired registers its release here, so a failure or Ctrl-C still stops the children, drops
// the scratch database and removes the temp directory.

const releases = new Set<() => Promise<void>>()

/** Registers `release`; the returned function runs it once (and unregisters it). */
const track = (label: string, release: () => Promise<void>): () => Promise<void> => {
  let done: Promise<void> | undefined
  const run = () => {
    releases.delete(run)
    done ??= release().catch((error: unknown) => console.error(`cleanup of ${label} failed:`, error))
    return done
  }
  releases.add(run)
  return run
}

const releaseAll = async () => {
  for (const release of [...releases].reverse()) await release()
}

/** autocannon runs in progress, stopped on Ctrl-C. */
const activeRuns = new Set<autocannon.Instance>()

let interrupted = false
for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    console.error(`\n${signal}: stopping servers and cleaning up…`)
    for (const run of activeRuns) run.stop()
    releaseAll().finally(() => process.exit(code))
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Child processes and /proc.

interface Child {
  readonly label: string
  readonly process: ChildProcess
  readonly pid: number
  readonly exited: Promise<number | null>
  readonly logTail: () => string
  /** How many lines the child logged at ERROR level (or with "unhandled failure"), and the first of them. */
  readonly errorLines: () => { readonly count: number; readonly first: string | undefined }
  readonly stop: () => Promise<void>
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, HOST, () => {
      const address = server.address()
      server.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))
      )
    })
  })

/** The environment of a server child: ours or the baseline's variables only, nothing inherited that changes them. */
const serverEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (
    const name of [
      "DATABASE_URL",
      "DATA_DIR",
      "PORT",
      "HOST",
      "PUBLIC_BASE_URL",
      "APP_ENV",
      "SMTP_URL",
      "OTEL_EXPORTER_OTLP_ENDPOINT"
    ]
  ) {
    delete env[name]
  }
  return { ...env, ...extra }
}

const spawnChild = (label: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Child => {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
  if (child.pid === undefined) throw new Error(`could not start ${label}`)
  const lines: Array<string> = []
  let errors = 0
  let firstError: string | undefined
  const keep = (chunk: Buffer) => {
    const fresh = chunk.toString("utf8").split("\n").filter((line) => line !== "")
    for (const line of fresh) {
      if (/\bERROR\b|unhandled failure/i.test(line)) {
        errors++
        firstError ??= line
      }
    }
    lines.push(...fresh)
    if (lines.length > 40) lines.splice(0, lines.length - 40)
  }
  child.stdout.on("data", keep)
  child.stderr.on("data", keep)
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const stop = track(label, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS)
    const code = await exited
    clearTimeout(timer)
    if (code !== 0) console.error(`note: ${label} exited with ${code ?? child.signalCode}`)
  })
  return {
    label,
    process: child,
    pid: child.pid,
    exited,
    logTail: () => lines.join("\n"),
    errorLines: () => ({ count: errors, first: firstError }),
    stop
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const waitForHealth = async (child: Child, base: string): Promise<void> => {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS
  let exitCode: number | null | undefined
  void child.exited.then((code) => {
    exitCode = code
  })
  while (Date.now() < deadline) {
    if (exitCode !== undefined) {
      throw new Error(`${child.label} exited (${exitCode}) before it was healthy:\n${child.logTail()}`)
    }
    try {
      const response = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) })
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    await sleep(100)
  }
  throw new Error(`${child.label} was not healthy after ${STARTUP_TIMEOUT_MS / 1000} s:\n${child.logTail()}`)
}

const statusKb = async (pid: number, key: "VmRSS" | "VmHWM"): Promise<number> => {
  const text = await readFile(`/proc/${pid}/status`, "utf8")
  const match = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)
  return match === null ? 0 : Number(match[1])
}

/** Resets VmHWM to the current RSS (Linux `clear_refs` 5); false when not permitted, so sampling alone counts. */
const resetPeakRss = (pid: number): Promise<boolean> =>
  writeFile(`/proc/${pid}/clear_refs`, "5").then(() => true, () => false)

/** Samples VmRSS every 100 ms until stopped; returns the largest value seen (kB). */
const sampleRss = (pid: number) => {
  let peak = 0
  const timer = setInterval(() => {
    statusKb(pid, "VmRSS").then((kb) => {
      peak = Math.max(peak, kb)
    }, () => undefined)
  }, 100)
  return () => {
    clearInterval(timer)
    return peak
  }
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP helpers for sign-in and the pre-flight checks.

interface Answer {
  readonly status: number
  readonly requestIdHeader: string | null
  readonly json: unknown
}

const call = async (method: string, url: string, options: { token?: string; body?: unknown } = {}): Promise<Answer> => {
  const headers: Record<string, string> = {}
  if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
  if (options.body !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(url, {
    method,
    headers,
    signal: AbortSignal.timeout(10_000),
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = text
  }
  return { status: response.status, requestIdHeader: response.headers.get("x-request-id"), json }
}

/**
 * The body of a 2xx answer, checked against the part of its shape the bench reads (the very value, so keys the
 * schema does not name stay visible to the shape comparison); throws otherwise.
 */
const expect2xx = <S extends Schema.Top>(what: string, answer: Answer, shape: S): S["Encoded"] => {
  if (answer.status < 200 || answer.status > 299) {
    throw new Error(`${what}: HTTP ${answer.status} ${JSON.stringify(answer.json)}`)
  }
  if (!Schema.is(Schema.toEncoded(shape))(answer.json)) {
    throw new Error(`${what}: unexpected body ${JSON.stringify(answer.json)}`)
  }
  return answer.json
}

/** The parts of the answers the sign-in and the pre-flight checks read (of our server and of the baseline alike). */
const LoginStartBody = Schema.Struct({
  data: Schema.Struct({
    challengeId: Schema.String,
    delivery: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
  })
})
const OutboxBody = Schema.Struct({
  data: Schema.Struct({ messages: Schema.Array(Schema.Struct({ data: Schema.Record(Schema.String, Schema.Unknown) })) })
})
const LoginCompleteBody = Schema.Struct({ data: Schema.Struct({ token: Schema.String }) })
const OrganizationsBody = Schema.Struct({
  data: Schema.Struct({ organizations: Schema.Array(Schema.Struct({ id: Schema.String })) })
})
const OrganizationBody = Schema.Struct({
  data: Schema.Struct({ organization: Schema.Struct({ id: Schema.String }) }),
  meta: Schema.Struct({ requestId: Schema.String })
})

interface Credentials {
  readonly token: string
  readonly orgId: string
}

/** Email sign-in through the dev outbox (contract §2), then the user's first workspace. */
const signIn = async (base: string, email: string): Promise<Credentials> => {
  const start = expect2xx(
    "login start",
    await call("POST", `${base}/v1/auth/login/start`, { body: { email } }),
    LoginStartBody
  )
  const outbox = expect2xx(
    "dev outbox",
    await call("GET", `${base}/v1/dev/outbox?to=${encodeURIComponent(email)}`),
    OutboxBody
  )
  const code = outbox.data.messages[0]?.data["code"]
  if (typeof code !== "string") throw new Error(`dev outbox: no login code for ${email}: ${JSON.stringify(outbox)}`)
  const { data: { token } } = expect2xx(
    "login complete",
    await call("POST", `${base}/v1/auth/login/complete`, { body: { challengeId: start.data.challengeId, code } }),
    LoginCompleteBody
  )
  const list = expect2xx(
    "list organizations",
    await call("GET", `${base}/v1/organizations`, { token }),
    OrganizationsBody
  )
  const orgId = list.data.organizations[0]?.id
  if (orgId === undefined) throw new Error(`list organizations: no workspace: ${JSON.stringify(list)}`)
  return { token, orgId }
}

/** One request of each route before loading, so a broken server is reported instead of measured. */
const preflight = async (base: string, credentials: Credentials, tag: string) => {
  const get = await call("GET", `${base}/v1/organizations/${credentials.orgId}`, { token: credentials.token })
  const data = expect2xx("GET organization", get, OrganizationBody)
  if (data.data.organization.id !== credentials.orgId) {
    throw new Error(`GET organization: wrong body ${JSON.stringify(data)}`)
  }
  if (get.requestIdHeader === null || get.requestIdHeader !== data.meta.requestId) {
    throw new Error(`GET organization: x-request-id ${get.requestIdHeader} does not match meta.requestId`)
  }
  const start = expect2xx(
    "login start",
    await call("POST", `${base}/v1/auth/login/start`, { body: { email: `bench-${tag}-preflight@example.com` } }),
    LoginStartBody
  )
  if (!start.data.challengeId.startsWith("chl_")) {
    throw new Error(`login start: wrong body ${JSON.stringify(start)}`)
  }
  return {
    organization: JSON.stringify(data.data.organization),
    loginShape: JSON.stringify(Object.keys(start.data).sort()) +
      JSON.stringify(Object.keys(start.data.delivery ?? {}).sort())
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Load.

/** The latency percentiles of every response (autocannon's own histogram keeps whole milliseconds only). */
interface Latencies {
  readonly p50: number
  readonly p99: number
}

const percentile = (sorted: Float64Array, p: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN

const cannon = (
  options: autocannon.Options
): Promise<{ readonly result: autocannon.Result; readonly latency: Latencies }> =>
  new Promise((resolve, reject) => {
    let times = new Float64Array(1 << 16)
    let count = 0
    const instance = autocannon(options, (error, result) => {
      activeRuns.delete(instance)
      if (error !== null && error !== undefined) return reject(error)
      const sorted = times.subarray(0, count).sort()
      resolve({ result, latency: { p50: percentile(sorted, 50), p99: percentile(sorted, 99) } })
    })
    instance.on("response", (_client, _status, _bytes, milliseconds) => {
      if (count === times.length) {
        const grown = new Float64Array(times.length * 2)
        grown.set(times)
        times = grown
      }
      times[count++] = milliseconds
    })
    activeRuns.add(instance)
  })

interface Route {
  readonly name: string
  readonly options: (base: string, credentials: Credentials, tag: string) => autocannon.Options
}

const ROUTES: ReadonlyArray<Route> = [
  {
    name: "GET /v1/organizations/{orgId}",
    options: (base, { token, orgId }) => ({
      url: `${base}/v1/organizations/${orgId}`,
      headers: { authorization: `Bearer ${token}` }
    })
  },
  {
    name: "POST /v1/auth/login/start",
    // A new email per request: the auth limit allows 10 per email per minute.
    options: (base, _credentials, tag) => {
      let n = 0
      return {
        url: base,
        requests: [{
          method: "POST",
          path: "/v1/auth/login/start",
          headers: { "content-type": "application/json" },
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({ email: `bench-${tag}-${n++}@example.com` })
          })
        }]
      }
    }
  }
]

type ServerKind = "ours" | "baseline"

interface Measurement {
  readonly round: number
  readonly mode: string
  readonly route: string
  readonly server: ServerKind
  readonly reqPerSec: number
  readonly p50: number
  readonly p99: number
  readonly cpuUsPerRequest: number
  readonly cpuCores: number
  readonly peakRssMb: number
  readonly non2xx: number
  readonly errors: number
  readonly window: Window
}

const measurements: Array<Measurement> = []
const notes: Array<string> = []
const profiles: Array<string> = []

const loadServer = async (
  mode: string,
  server: ServerKind,
  child: Child,
  base: string,
  credentials: Credentials,
  round: number
) => {
  for (const route of ROUTES) {
    const tag = `${RUN_ID}-${mode}-${server}-${round}-${ROUTES.indexOf(route)}`
    const warmup = round === 1 ? SERVER_WARMUP_SECONDS + WARMUP_SECONDS : WARMUP_SECONDS
    process.stderr.write(`  round ${round}, ${server}: ${route.name} (${warmup} s warm-up + ${SECONDS} s)\n`)
    await cannon({ ...route.options(base, credentials, `${tag}-w`), connections: CONNECTIONS, duration: warmup })
    if (interrupted) return

    const hwmReset = await resetPeakRss(child.pid)
    const stopSampling = sampleRss(child.pid)
    const ticksBefore = await cpuTicks(child.pid)
    const startedNs = process.hrtime.bigint()
    const { result, latency } = await cannon({
      ...route.options(base, credentials, `${tag}-m`),
      connections: CONNECTIONS,
      duration: SECONDS
    })
    const endedNs = process.hrtime.bigint()
    const ticksAfter = await cpuTicks(child.pid)
    const sampledPeak = stopSampling()
    const hwm = hwmReset ? await statusKb(child.pid, "VmHWM") : 0
    if (interrupted) return

    const requests = result.requests.total
    const wallSeconds = Number(endedNs - startedNs) / 1e9
    const cpuSeconds = (ticksAfter - ticksBefore) / CLK_TCK
    measurements.push({
      round,
      mode,
      route: route.name,
      server,
      reqPerSec: requests / result.duration,
      p50: latency.p50,
      p99: latency.p99,
      cpuUsPerRequest: requests === 0 ? NaN : (cpuSeconds * 1e6) / requests,
      cpuCores: cpuSeconds / wallSeconds,
      peakRssMb: Math.max(hwm, sampledPeak) / 1024,
      non2xx: result.non2xx,
      errors: result.errors,
      window: { fromUs: Number(startedNs / 1000n), toUs: Number(endedNs / 1000n) }
    })
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Scenarios.

interface Database {
  readonly label: string
  /** Our server's and the baseline's variables that select this database. */
  readonly env: Record<string, string>
}

const newestProfile = async (dir: string, since: number): Promise<string | undefined> => {
  const files = (await readdir(dir)).filter((name) => name.endsWith(".cpuprofile"))
  const dated = await Promise.all(files.map(async (name) => ({ name, at: (await stat(join(dir, name))).mtimeMs })))
  const fresh = dated.filter((file) => file.at >= since).sort((a, b) => b.at - a.at)[0]
  return fresh === undefined ? undefined : join(dir, fresh.name)
}

const noteErrorLines = (mode: string, child: Child) => {
  const { count, first } = child.errorLines()
  if (count > 0) notes.push(`${mode}: ${child.label} logged ${count} error line(s); the first: ${first ?? ""}`)
}

interface Started {
  readonly child: Child
  readonly base: string
}

const startServer = async (label: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<Started> => {
  const port = await freePort()
  const base = `http://${HOST}:${port}`
  const startedAt = Date.now()
  const child = spawnChild(label, args, { ...env, HOST, PORT: String(port) })
  await waitForHealth(child, base)
  console.error(`  ${label}: healthy after ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)
  return { child, base }
}

const stopServer = async (mode: string, server: Started | undefined) => {
  if (server === undefined) return
  await server.child.stop()
  noteErrorLines(mode, server.child)
}

const summarizeProfile = async (mode: string, label: string, since: number) => {
  if (PROFILE_DIR === undefined) return
  const file = await newestProfile(PROFILE_DIR, since)
  if (file === undefined) return void notes.push(`${mode}: no .cpuprofile was written to ${PROFILE_DIR}`)
  const profile = await readProfile(file)
  for (const measured of measurements.filter((m) => m.mode === mode && m.server === "ours")) {
    const summary = summarize(profile, measured.window, 12)
    profiles.push(
      `our server, ${label}, ${measured.route}, round ${measured.round} (${file}):\n${formatSummary(summary)}`
    )
  }
}

/**
 * Both servers on one database. Ours starts first: it migrates the database and creates the user and session the
 * baseline then reads too. With `concurrent` both run at once and the rounds alternate between them; otherwise (one
 * process per PGlite data directory) ours runs every round and stops before the baseline starts.
 */
const runMode = async (mode: string, database: Database, concurrent: boolean) => {
  console.error(`\n${database.label}`)
  const emailUser = `bench-${RUN_ID}-${mode}-user@example.com`
  const profileArgs = PROFILE_DIR === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`]
  const startedAt = Date.now()
  const rounds = Array.from({ length: ROUNDS }, (_, i) => i + 1)
  let ours: Started | undefined
  let baseline: Started | undefined
  try {
    ours = await startServer(
      `our server (${mode})`,
      [...SERVER_NODE_FLAGS, ...profileArgs, SERVER_MAIN],
      serverEnv({ ...database.env, APP_ENV: "development" })
    )
    const credentials = await signIn(ours.base, emailUser)
    const oursChecks = await preflight(ours.base, credentials, `${RUN_ID}-${mode}-ours`)
    const startBaseline = async () => {
      const started = await startServer(
        `baseline (${mode})`,
        BASELINE_ARGS,
        serverEnv(BASELINE_REV === undefined ? database.env : { ...database.env, APP_ENV: "development" })
      )
      const checks = await preflight(started.base, credentials, `${RUN_ID}-${mode}-baseline`)
      if (checks.organization !== oursChecks.organization) {
        notes.push(
          `${mode}: baseline GET organization differs from ours:\n` +
            `  ours     ${oursChecks.organization}\n  baseline ${checks.organization}`
        )
      }
      if (checks.loginShape !== oursChecks.loginShape) {
        notes.push(
          `${mode}: baseline login start body has other fields than ours: ` +
            `${checks.loginShape} vs ${oursChecks.loginShape}`
        )
      }
      return started
    }
    if (concurrent) baseline = await startBaseline()
    for (const round of rounds) {
      if (interrupted) return
      await loadServer(mode, "ours", ours.child, ours.base, credentials, round)
      if (baseline !== undefined) await loadServer(mode, "baseline", baseline.child, baseline.base, credentials, round)
    }
    if (concurrent) return
    await stopServer(mode, ours)
    ours = undefined
    baseline = await startBaseline()
    for (const round of rounds) {
      if (interrupted) return
      await loadServer(mode, "baseline", baseline.child, baseline.base, credentials, round)
    }
  } finally {
    await stopServer(mode, ours)
    await stopServer(mode, baseline)
    await summarizeProfile(mode, database.label, startedAt)
  }
}

const pgliteMode = async () => {
  const dir = await mkdtemp(join(tmpdir(), "cp-bench-"))
  const removeDir = track(`temp dir ${dir}`, () => rm(dir, { recursive: true, force: true }))
  try {
    await runMode(
      "PGlite",
      { label: `PGlite (fresh DATA_DIR ${dir}/data)`, env: { DATA_DIR: join(dir, "data") } },
      false
    )
  } finally {
    await removeDir()
  }
}

const postgresMode = async () => {
  const name = `cp_bench_${RUN_ID}`
  const admin = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5000 })
  await admin.connect()
  const dropDatabase = track(`scratch database ${name}`, async () => {
    await admin.query(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  try {
    await admin.query(`create database "${name}"`)
    const url = new URL(ADMIN_URL)
    url.pathname = `/${name}`
    const shown = new URL(url)
    shown.password = ""
    await runMode(
      "PostgreSQL",
      { label: `PostgreSQL (scratch database ${shown.toString()})`, env: { DATABASE_URL: url.toString() } },
      true
    )
  } finally {
    await dropDatabase()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Output.

const fixed = (value: number, digits: number) => Number.isFinite(value) ? value.toFixed(digits) : "n/a"

const table = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  rightFrom: number
): string => {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => (row[i] ?? "").length)))
  const format = (row: ReadonlyArray<string>) =>
    row.map((cell, i) => i >= rightFrom ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)).join("  ")
      .trimEnd()
  return [format(header), widths.map((width) => "-".repeat(width)).join("  "), ...rows.map(format)].join("\n")
}

/** The 1-minute load average at the start: other work on the machine skews every figure. */
const LOAD_AT_START = loadavg()[0] ?? 0

const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.filter(Number.isFinite).sort((x, y) => x - y)
  if (sorted.length === 0) return NaN
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] ?? NaN : ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2
}

/** The rounds of one server on one route: medians of the figures, the largest RSS, every non-2xx and error. */
const combine = (runs: ReadonlyArray<Measurement>) => ({
  reqPerSec: median(runs.map((m) => m.reqPerSec)),
  p50: median(runs.map((m) => m.p50)),
  p99: median(runs.map((m) => m.p99)),
  cpuUsPerRequest: median(runs.map((m) => m.cpuUsPerRequest)),
  cpuCores: median(runs.map((m) => m.cpuCores)),
  peakRssMb: Math.max(...runs.map((m) => m.peakRssMb)),
  non2xx: runs.reduce((sum, m) => sum + m.non2xx, 0),
  errors: runs.reduce((sum, m) => sum + m.errors, 0)
})

const report = () => {
  console.log(
    `\ncontrol-plane bench: node ${process.version} (server flags: ${SERVER_NODE_FLAGS.join(" ") || "none"}), ` +
      `${cpus().length} CPUs, ${CONNECTIONS} connections, ${ROUNDS} round(s) of ${SECONDS} s measured after ` +
      `${WARMUP_SECONDS} s warm-up (${
        SERVER_WARMUP_SECONDS + WARMUP_SECONDS
      } s before a server's first), CLK_TCK ${CLK_TCK}, 1-min load average ${LOAD_AT_START.toFixed(2)} at start\n`
  )
  const groups = measurements.filter((m) => m.round === 1).map((first) => ({
    mode: first.mode,
    route: first.route,
    server: first.server,
    runs: measurements.filter((m) => m.mode === first.mode && m.route === first.route && m.server === first.server)
  }))
  console.log(table(
    [
      "mode",
      "route",
      "server",
      "req/s",
      "p50 ms",
      "p99 ms",
      "CPU µs/req",
      "CPU cores",
      "peak RSS MB",
      "non-2xx",
      "errors"
    ],
    groups.map(({ mode, route, server, runs }) => {
      const m = combine(runs)
      return [
        mode,
        route,
        server,
        fixed(m.reqPerSec, 0),
        fixed(m.p50, 2),
        fixed(m.p99, 2),
        fixed(m.cpuUsPerRequest, 0),
        fixed(m.cpuCores, 2),
        fixed(m.peakRssMb, 0),
        String(m.non2xx),
        String(m.errors)
      ]
    }),
    3
  ))

  const pairs = groups.filter((group) => group.server === "ours").flatMap((ours) => {
    const base = groups.find((g) => g.server === "baseline" && g.mode === ours.mode && g.route === ours.route)
    if (base === undefined) return []
    const ratios = ours.runs.flatMap((run) => {
      const paired = base.runs.find((b) => b.round === run.round)
      return paired === undefined ? [] : [{
        reqPerSec: run.reqPerSec / paired.reqPerSec,
        cpu: run.cpuUsPerRequest / paired.cpuUsPerRequest,
        p50: run.p50 / paired.p50
      }]
    })
    return [[
      ours.mode,
      ours.route,
      fixed(median(ratios.map((r) => r.reqPerSec)), 2),
      fixed(median(ratios.map((r) => r.cpu)), 2),
      fixed(median(ratios.map((r) => r.p50)), 2),
      ratios.map((r) => fixed(r.reqPerSec, 2)).join(" ")
    ]]
  })
  if (pairs.length > 0) {
    console.log(
      "\nours / baseline, median of the per-round ratios (req/s: higher is better; CPU per request and p50: lower is " +
        "better)\n"
    )
    console.log(table(["mode", "route", "req/s", "CPU µs/req", "p50", "req/s per round"], pairs, 2))
  }
  console.log(
    "\nCPU and RSS are the server process's own (/proc utime+stime, VmHWM/VmRSS); in PGlite mode the database runs " +
      "inside that process, on PostgreSQL it does not. autocannon runs in this process on the same machine."
  )
  for (const note of notes) console.log(`\nnote: ${note}`)
  for (const profile of profiles) console.log(`\n${profile}`)
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * The baseline's entry point: `bench/baseline.ts`, or our server's `main.ts` in a worktree of `BENCH_BASELINE_REV`
 * (removed when the run ends), run with our node flags.
 */
const baselineArgs = async (): Promise<ReadonlyArray<string>> => {
  if (BASELINE_REV === undefined) return [BASELINE_MAIN]
  const dir = await mkdtemp(join(tmpdir(), "cp-bench-rev-"))
  const git = (...args: ReadonlyArray<string>) => execFileSync("git", args, { cwd: ROOT, stdio: "inherit" })
  console.error(`baseline: our server at ${BASELINE_REV}, checked out into ${dir}`)
  git("worktree", "add", "--detach", dir, BASELINE_REV)
  track(`worktree ${dir}`, async () => void git("worktree", "remove", "--force", dir))
  execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: dir, stdio: "inherit" })
  return [...SERVER_NODE_FLAGS, join(dir, "packages/server/src/main.ts")]
}
const BASELINE_ARGS = await baselineArgs()

const scenarios: ReadonlyArray<readonly [string, () => Promise<void>]> = [
  ["pglite", pgliteMode],
  ["postgres", postgresMode]
]

const unknown = MODES.filter((mode) => !scenarios.some(([name]) => name === mode))
if (unknown.length > 0) throw new Error(`BENCH_MODES: unknown mode(s) ${unknown.join(", ")}; use pglite, postgres`)
if (PROFILE_DIR !== undefined) await mkdir(PROFILE_DIR, { recursive: true })

let failed = false
for (const [name, scenario] of scenarios) {
  if (!MODES.includes(name) || interrupted) continue
  try {
    await scenario()
  } catch (error) {
    failed = true
    const message = error instanceof Error ? error.message : String(error)
    notes.push(`${name} scenario failed: ${message}`)
    console.error(`${name} scenario failed: ${message}`)
  }
}
await releaseAll()
if (!interrupted) {
  report()
  process.exitCode = failed ? 1 : 0
}
