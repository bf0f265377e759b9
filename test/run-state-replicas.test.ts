/**
 * Two server processes on one PostgreSQL with 16 runners on a 1,000-job run (run-state.md §9, issue 17 "Bad input and
 * faults"): zero double claims, every job claimed and completed exactly once, and the runs' own logs agree. A run holds
 * at most 500 jobs (run-state.md §2), so the 1,000 jobs are two runs of 500, driven at once. Runs only
 * when `DATABASE_URL` names a server. The figures (claims + completes per second, p99 claim latency) are printed, never
 * asserted; `npm run bench:run-state` measures them properly.
 */
import { Run, RunEvent } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { monotonicFactory } from "ulid"
import { driveRun, layeredJobs, percentile } from "../bench/runStateLoad.ts"
import { metaOf, ok } from "./support/envelope.ts"
import { startReplicaProcesses } from "./support/processes.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"
import { call } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const DATABASE_URL = process.env["DATABASE_URL"]
const JOBS = 1000
const RUNNERS = 16

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("run-state replicas", () => {
  it.live(
    "two processes, 16 runners, a 1,000-job run: zero double claims, every job finishes once",
    () =>
      Effect.gen(function*() {
        const [a, b] = yield* startReplicaProcesses(yield* scratchDatabaseUrl("cp_runs"), 2)
        if (a === undefined || b === undefined) return assert.fail("two replicas")
        const user = yield* signInWithPersonal(a.baseUrl, "load")
        const orgId = user.personal.id
        const projectId = yield* createProject(a.baseUrl, user.token, orgId)
        const nextRunId = monotonicFactory()
        const runIds = [nextRunId(), nextRunId()]
        const runPath = `/v1/organizations/${orgId}/projects/${projectId}/state/runs`
        for (const runId of runIds) {
          const body = { runId, jobs: layeredJobs(JOBS / runIds.length, 50) }
          ok(yield* call(a.baseUrl, "POST", runPath, { token: user.token, body }), { run: Run })
        }
        const stats = yield* Effect.promise(() =>
          driveRun({ baseUrls: [a.baseUrl, b.baseUrl], token: user.token, orgId, projectId, runIds, runners: RUNNERS })
        )
        assert.strictEqual(stats.doubleClaims, 0)
        assert.strictEqual(stats.claims, JOBS)
        assert.strictEqual(stats.completes, JOBS)
        assert.strictEqual(stats.claimsPerJob.size, JOBS)
        // The runs' own logs: one claim and one success per job, one finish per run.
        const counts = new Map<string, number>()
        for (const runId of runIds) {
          const run = ok(yield* call(b.baseUrl, "GET", `${runPath}/${runId}`, { token: user.token }), { run: Run }).run
          assert.strictEqual(run.status, "succeeded")
          assert.strictEqual(run.jobCounts.succeeded, JOBS / runIds.length)
          let cursor: string | null = null
          do {
            const query: string = cursor === null ? "?limit=100" : `?limit=100&cursor=${encodeURIComponent(cursor)}`
            const res = yield* call(a.baseUrl, "GET", `${runPath}/${runId}/log${query}`, { token: user.token })
            for (const event of ok(res, { events: Schema.Array(RunEvent) }).events) {
              counts.set(event.type, (counts.get(event.type) ?? 0) + 1)
            }
            cursor = metaOf(res).cursor
          } while (cursor !== null)
        }
        assert.strictEqual(counts.get("state.job.claimed"), JOBS)
        assert.strictEqual(counts.get("state.job.succeeded"), JOBS)
        assert.strictEqual(counts.get("state.run.finished"), runIds.length)
        const operations = stats.claims + stats.completes
        yield* Effect.log(
          `run-state: ${operations} claims+completes in ${stats.wallMs.toFixed(0)} ms = ` +
            `${(operations / (stats.wallMs / 1000)).toFixed(0)}/s; p99 claim ${
              percentile(stats.claimLatenciesMs, 99).toFixed(1)
            } ms; ${stats.lostRaces} lost races`
        )
      }).pipe(Effect.scoped),
    600_000
  )
})
