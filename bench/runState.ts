/**
 * `npm run bench:run-state` (run-state.md §9): claims + completes per second on 1,000 jobs with 16 concurrent runners
 * over two server processes on one PostgreSQL, with zero double claims, and the p99 claim latency. A run holds at most
 * 500 jobs (§2), so the 1,000 jobs are two runs of 500 driven at once. Prints figures; fails only on a double claim.
 *
 * Environment: `BENCH_DATABASE_URL` or `DATABASE_URL` (default postgres://postgres@127.0.0.1:5432/test) for the scratch
 * database; `BENCH_JOBS` (default 1000), `BENCH_RUNNERS` (default 16), `BENCH_WIDTH` (jobs runnable at once, 100).
 */
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { loadavg } from "node:os"
import { monotonicFactory } from "ulid"
import { startReplicaProcesses } from "../test/support/processes.ts"
import { scratchDatabaseUrl } from "../test/support/scratch.ts"
import { call } from "../test/support/server.ts"
import { createProject, signInWithPersonal } from "../test/support/session.ts"
import { driveRun, layeredJobs, percentile } from "./runStateLoad.ts"

const number = (name: string, fallback: number) => Number(process.env[name] || fallback)
const JOBS = number("BENCH_JOBS", 1000)
const RUNNERS = number("BENCH_RUNNERS", 16)
const WIDTH = number("BENCH_WIDTH", 50)
const RUNS = Math.ceil(JOBS / 500)
process.env["DATABASE_URL"] = process.env["BENCH_DATABASE_URL"] || process.env["DATABASE_URL"] ||
  "postgres://postgres@127.0.0.1:5432/test"

/** CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat` (0 where that is not readable). */
const cpuSeconds = (pid: number | undefined): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return 0
  }
}

const program = Effect.gen(function*() {
  const [a, b] = yield* startReplicaProcesses(yield* scratchDatabaseUrl("cp_bench_runs"), 2)
  if (a === undefined || b === undefined) return yield* Effect.die(new Error("two replicas"))
  const user = yield* signInWithPersonal(a.baseUrl, "bench")
  const orgId = user.personal.id
  const projectId = yield* createProject(a.baseUrl, user.token, orgId)
  const nextRunId = monotonicFactory()
  const runIds = Array.from({ length: RUNS }, () => nextRunId())
  for (const runId of runIds) {
    const created = yield* call(a.baseUrl, "POST", `/v1/organizations/${orgId}/projects/${projectId}/state/runs`, {
      token: user.token,
      body: { runId, jobs: layeredJobs(Math.ceil(JOBS / RUNS), WIDTH) }
    })
    if (created.status !== 200) return yield* Effect.die(new Error(`create run: ${created.status} ${created.text}`))
  }
  const cpuBefore = cpuSeconds(a.pid) + cpuSeconds(b.pid)
  const stats = yield* Effect.promise(() =>
    driveRun({ baseUrls: [a.baseUrl, b.baseUrl], token: user.token, orgId, projectId, runIds, runners: RUNNERS })
  )
  const serverCpu = cpuSeconds(a.pid) + cpuSeconds(b.pid) - cpuBefore
  const operations = stats.claims + stats.completes
  console.log(
    `run-state bench: ${JOBS} jobs in ${RUNS} runs (${WIDTH} runnable at a time each), ${RUNNERS} runners, 2 processes`
  )
  console.log(
    `  claims + completes: ${operations} in ${(stats.wallMs / 1000).toFixed(2)} s = ${
      (operations / (stats.wallMs / 1000)).toFixed(0)
    }/s`
  )
  console.log(
    `  claim latency: p50 ${percentile(stats.claimLatenciesMs, 50).toFixed(1)} ms, p99 ${
      percentile(stats.claimLatenciesMs, 99).toFixed(1)
    } ms over ${stats.claimLatenciesMs.length} claim requests (${stats.lostRaces} lost races)`
  )
  console.log(
    `  server CPU (both processes): ${serverCpu.toFixed(1)} s = ${
      (serverCpu * 1000 / operations).toFixed(2)
    } ms per claim or complete; load average ${loadavg().map((value) => value.toFixed(2)).join(" ")}`
  )
  console.log(
    `  double claims: ${stats.doubleClaims}; jobs claimed: ${stats.claimsPerJob.size}; ` +
      `503s retried: ${stats.unavailableRetries}`
  )
  if (stats.doubleClaims !== 0) process.exitCode = 1
}).pipe(Effect.scoped)

await Effect.runPromise(program)
