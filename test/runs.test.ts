/**
 * Runs and jobs end to end over real HTTP (run-state.md §2; spec: Run-state plane, Versioning, States and
 * transitions job rows): idempotent create by the client's run ULID, graph validation, claims answering in the spec's
 * order, epoch fencing, retries, memoization, cancel, runnable and frontier, the run log, the workspace events, the
 * contract-version gate, claims racing from many runners, claims and completes of different jobs racing (the run
 * finishes once, its log gap-free), and claims racing a cancel. On PGlite, and PostgreSQL when `DATABASE_URL` is set.
 */
import { ClaimResult, Frontier, Job, Run, RunEvent } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { monotonicFactory } from "ulid"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, invalidFields, metaOf, ok, type Res } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const ulid = monotonicFactory()

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `runs [${backend}]`,
    (it) => {
      type Api = (
        method: string,
        path: string,
        body?: unknown,
        headers?: Record<string, string>
      ) => Effect.Effect<Res, never, TestServer>

      /** A fresh owner with a fresh project; `as` calls `…/projects/{projectId}/state{path}`. */
      const owner = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "run")
        const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
        const as: Api = (method, path, body, headers) =>
          call(baseUrl, method, `/v1/organizations/${user.personal.id}/projects/${projectId}/state${path}`, {
            token: user.token,
            ...(body === undefined ? {} : { body }),
            ...(headers === undefined ? {} : { headers })
          })
        return { ...user, projectId, as }
      })

      const runOf = (res: Res, status = 200) => ok(res, { run: Run }, status).run
      const jobsOf = (res: Res) => ok(res, { jobs: Schema.Array(Job) }).jobs
      const claimOf = (res: Res) => wireClaim(ok(res))
      const wireClaim = (data: unknown) => Schema.decodeUnknownSync(Schema.toEncoded(ClaimResult))(data)

      const graph = (runId = ulid()) => ({
        runId,
        trigger: { kind: "ci" as const, ref: "refs/heads/main", sha: "abc123" },
        metadata: { k: "v" },
        jobs: [
          { jobId: "build", name: "Build", dependsOn: [], timeoutSeconds: 3600 },
          { jobId: "test", dependsOn: ["build"] },
          { jobId: "deploy", dependsOn: ["test"] }
        ]
      })

      const claim = (as: Api, runId: string, jobId: string, body: Record<string, unknown> = {}) =>
        as("POST", `/runs/${runId}/jobs/${jobId}:claim`, { runnerId: "r1", ...body })
      const complete = (as: Api, runId: string, jobId: string, body: Record<string, unknown>) =>
        as("POST", `/runs/${runId}/jobs/${jobId}:complete`, { runnerId: "r1", outcome: "succeeded", ...body })

      it.effect("create answers the run; the same body again the stored run; another body with that runId 409", () =>
        Effect.gen(function*() {
          const { as, personal, projectId } = yield* owner
          const body = graph()
          const run = runOf(yield* as("POST", "/runs", body))
          assert.strictEqual(run.id, body.runId)
          assert.strictEqual(run.orgId, personal.id)
          assert.strictEqual(run.projectId, projectId)
          assert.strictEqual(run.status, "queued")
          assert.deepStrictEqual(run.jobCounts, {
            pending: 3,
            running: 0,
            succeeded: 0,
            failed: 0,
            timed_out: 0,
            memoized: 0,
            canceled: 0
          })
          assert.deepStrictEqual(run.trigger, body.trigger)
          assert.strictEqual(run.createdBy.kind, "user")
          assert.isNull(run.startedAt)
          assert.deepStrictEqual(runOf(yield* as("POST", "/runs", body)), run)
          const other = failed(
            yield* as("POST", "/runs", { ...body, metadata: { k: "other" } }),
            409,
            "conflict"
          )
          assert.strictEqual(other.details["runId"], body.runId)
          assert.deepStrictEqual(runOf(yield* as("GET", `/runs/${body.runId}`)), run)
          const jobs = jobsOf(yield* as("GET", `/runs/${body.runId}/jobs`))
          assert.deepStrictEqual(jobs.map((job) => job.jobId), ["build", "test", "deploy"])
          assert.deepStrictEqual(jobs.map((job) => job.name), ["Build", "test", "deploy"])
          assert.deepStrictEqual(jobs.map((job) => job.status), ["pending", "pending", "pending"])
          assert.deepStrictEqual(jobs.map((job) => job.attempt), [0, 0, 0])
        }))

      it.effect("bad graphs are 422: a cycle (named), unknown and self dependencies, duplicates, 501 jobs", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const cycle = invalidFields(
            yield* as("POST", "/runs", {
              runId: ulid(),
              jobs: [
                { jobId: "a", dependsOn: ["c"] },
                { jobId: "b", dependsOn: ["a"] },
                { jobId: "c", dependsOn: ["b"] }
              ]
            })
          )
          assert.match(cycle["jobs"]?.[0] ?? "", /cycle: (a -> c -> b -> a|b -> a -> c -> b|c -> b -> a -> c)/)
          const unknown = invalidFields(
            yield* as("POST", "/runs", { runId: ulid(), jobs: [{ jobId: "a", dependsOn: ["nope"] }] })
          )
          assert.match(unknown["jobs.0.dependsOn"]?.[0] ?? "", /nope/)
          const self = invalidFields(
            yield* as("POST", "/runs", { runId: ulid(), jobs: [{ jobId: "a", dependsOn: ["a"] }] })
          )
          assert.match(self["jobs.0.dependsOn"]?.[0] ?? "", /itself/)
          const dup = invalidFields(
            yield* as("POST", "/runs", { runId: ulid(), jobs: [{ jobId: "a" }, { jobId: "a" }] })
          )
          assert.property(dup, "jobs.1.jobId")
          const many = Array.from({ length: 501 }, (_, i) => ({ jobId: `j${i}` }))
          assert.property(invalidFields(yield* as("POST", "/runs", { runId: ulid(), jobs: many })), "jobs")
          assert.property(invalidFields(yield* as("POST", "/runs", { runId: ulid(), jobs: [] })), "jobs")
          assert.property(
            invalidFields(yield* as("POST", "/runs", { runId: "not-a-ulid", jobs: [{ jobId: "a" }] })),
            "runId"
          )
          assert.property(
            invalidFields(yield* as("POST", "/runs", { runId: ulid(), jobs: [{ jobId: "Upper Case" }] })),
            "jobs.0.jobId"
          )
          const missingEnv = invalidFields(
            yield* as("POST", "/runs", {
              runId: ulid(),
              environmentId: "env_01JD000000000000000000000A",
              jobs: [{ jobId: "a" }]
            })
          )
          assert.property(missingEnv, "environmentId")
          // 500 jobs is the ceiling, and accepted.
          const most = Array.from(
            { length: 500 },
            (_, i) => ({ jobId: `j${i}`, dependsOn: i === 0 ? [] : [`j${i - 1}`] })
          )
          assert.strictEqual(runOf(yield* as("POST", "/runs", { runId: ulid(), jobs: most })).jobCounts.pending, 500)
        }))

      it.effect("claims answer in order: deps_not_ready, lease, already_claimed, terminal; the run finishes", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const { runId } = graph()
          runOf(yield* as("POST", "/runs", graph(runId)))
          const waiting = failed(yield* claim(as, runId, "test"), 409, "deps_not_ready")
          assert.deepStrictEqual(waiting.details["waitingOn"], ["build"])
          failed(yield* claim(as, runId, "nope"), 404, "not_found")
          const first = claimOf(yield* claim(as, runId, "build", { leaseSeconds: 30 }))
          assert.isTrue(first.ok)
          if (!first.ok) return
          assert.strictEqual(first.lease.epoch, 1)
          assert.strictEqual(first.lease.leaseSeconds, 30)
          assert.strictEqual(first.job.status, "running")
          assert.strictEqual(first.job.attempt, 1)
          assert.strictEqual(first.job.leaseEpoch, 1)
          assert.strictEqual(first.job.runnerId, "r1")
          assert.strictEqual(runOf(yield* as("GET", `/runs/${runId}`)).status, "running")
          const held = failed(yield* claim(as, runId, "build", { runnerId: "r2" }), 409, "already_claimed")
          assert.strictEqual(held.details["runnerId"], "r1")
          assert.strictEqual(held.details["leaseExpiresAt"], first.lease.expiresAt)
          const beat = ok(
            yield* as("POST", `/runs/${runId}/jobs/build:heartbeat`, { runnerId: "r1", leaseEpoch: 1 }),
            { lease: Schema.Struct({ epoch: Schema.Int, expiresAt: Schema.String, leaseSeconds: Schema.Int }) }
          )
          assert.strictEqual(beat.lease.epoch, 1)
          assert.strictEqual(beat.lease.leaseSeconds, 30)
          failed(
            yield* as("POST", `/runs/${runId}/jobs/build:heartbeat`, { runnerId: "r2", leaseEpoch: 1 }),
            409,
            "lease_lost"
          )
          const done = ok(
            yield* complete(as, runId, "build", { leaseEpoch: 1, exitCode: 0, outputs: { digest: "sha256:1" } }),
            { job: Job }
          ).job
          assert.strictEqual(done.status, "succeeded")
          assert.deepStrictEqual(done.outputs, { digest: "sha256:1" })
          const again = claimOf(yield* claim(as, runId, "build", { retry: true }))
          assert.deepStrictEqual([again.ok, again.ok ? "" : again.reason], [false, "terminal"])
          failed(yield* complete(as, runId, "build", { leaseEpoch: 1 }), 409, "lease_lost")
          for (const jobId of ["test", "deploy"]) {
            const claimed = claimOf(yield* claim(as, runId, jobId))
            assert.isTrue(claimed.ok)
            ok(yield* complete(as, runId, jobId, { leaseEpoch: 1 }))
          }
          const run = runOf(yield* as("GET", `/runs/${runId}`))
          assert.strictEqual(run.status, "succeeded")
          assert.strictEqual(run.jobCounts.succeeded, 3)
          assert.isString(run.finishedAt)
          assert.isString(run.startedAt)
          failed(yield* as("POST", `/runs/${runId}:cancel`, {}), 409, "run_terminal")
        }))

      it.effect("a retry re-claims a failed job at the next epoch; the stale epoch is fenced, nothing changes", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const runId = ulid()
          runOf(yield* as("POST", "/runs", { runId, jobs: [{ jobId: "a" }, { jobId: "b", dependsOn: ["a"] }] }))
          assert.isTrue(claimOf(yield* claim(as, runId, "a")).ok)
          ok(yield* complete(as, runId, "a", { leaseEpoch: 1, outcome: "failed", exitCode: 2, errorMessage: "boom" }))
          const failedRun = runOf(yield* as("GET", `/runs/${runId}`))
          assert.strictEqual(failedRun.status, "failed")
          const frontier = ok(yield* as("GET", `/runs/${runId}/frontier`), { frontier: Frontier }).frontier
          assert.deepStrictEqual(frontier, { running: [], runnable: [], blocked: ["b"] })
          const noRetry = claimOf(yield* claim(as, runId, "a"))
          assert.deepStrictEqual([noRetry.ok, noRetry.ok ? "" : noRetry.reason], [false, "terminal"])
          const retried = claimOf(yield* claim(as, runId, "a", { retry: true, runnerId: "r2" }))
          assert.isTrue(retried.ok)
          if (!retried.ok) return
          assert.strictEqual(retried.lease.epoch, 2)
          assert.strictEqual(retried.job.attempt, 2)
          assert.isNull(retried.job.exitCode)
          assert.strictEqual(runOf(yield* as("GET", `/runs/${runId}`)).status, "running")
          const before = jobsOf(yield* as("GET", `/runs/${runId}/jobs`))
          failed(yield* complete(as, runId, "a", { leaseEpoch: 1 }), 409, "lease_lost")
          failed(yield* complete(as, runId, "a", { runnerId: "r2", leaseEpoch: 1 }), 409, "lease_lost")
          assert.deepStrictEqual(jobsOf(yield* as("GET", `/runs/${runId}/jobs`)), before)
          ok(yield* complete(as, runId, "a", { runnerId: "r2", leaseEpoch: 2 }))
          const runnable = jobsOf(yield* as("GET", `/runs/${runId}/runnable`))
          assert.deepStrictEqual(runnable.map((job) => job.jobId), ["b"])
          const log = ok(yield* as("GET", `/runs/${runId}/log`), { events: Schema.Array(RunEvent) }).events
          assert.deepStrictEqual(log.map((event) => event.type), [
            "state.run.created",
            "state.job.claimed",
            "state.job.failed",
            "state.run.finished",
            "state.job.retried",
            "state.job.claimed",
            "state.job.succeeded"
          ])
          assert.deepStrictEqual(log.map((event) => event.seq), [1, 2, 3, 4, 5, 6, 7])
          assert.deepStrictEqual(log[5]?.attempt, 2)
          assert.deepStrictEqual(log[5]?.runnerId, "r2")
          // Paged: oldest first, the cursor continues after the last shown.
          const page1 = yield* as("GET", `/runs/${runId}/log?limit=3`)
          const firstPage = ok(page1, { events: Schema.Array(RunEvent) }).events
          assert.deepStrictEqual(firstPage.map((event) => event.seq), [1, 2, 3])
          const cursor = metaOf(page1).cursor ?? ""
          const page2 = ok(yield* as("GET", `/runs/${runId}/log?limit=3&cursor=${encodeURIComponent(cursor)}`), {
            events: Schema.Array(RunEvent)
          }).events
          assert.deepStrictEqual(page2.map((event) => event.seq), [4, 5, 6])
          const after = ok(yield* as("GET", `/runs/${runId}/log?after=6`), { events: Schema.Array(RunEvent) }).events
          assert.deepStrictEqual(after.map((event) => event.seq), [7])
        }))

      it.effect("a hermetic claim whose input hash a succeeded job produced is memoized with its outputs", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const hash = "a".repeat(64)
          const first = ulid()
          runOf(yield* as("POST", "/runs", { runId: first, jobs: [{ jobId: "build" }] }))
          const miss = claimOf(yield* claim(as, first, "build", { hermetic: true, jobInputHash: hash }))
          assert.isTrue(miss.ok)
          ok(yield* complete(as, first, "build", { leaseEpoch: 1, outputs: { out: "x" } }))
          const second = ulid()
          runOf(
            yield* as("POST", "/runs", {
              runId: second,
              jobs: [{ jobId: "build" }, { jobId: "next", dependsOn: ["build"] }]
            })
          )
          const hit = claimOf(yield* claim(as, second, "build", { hermetic: true, jobInputHash: hash }))
          assert.deepStrictEqual([hit.ok, hit.ok ? "" : hit.reason], [false, "memoized"])
          assert.strictEqual(hit.job.status, "memoized")
          assert.deepStrictEqual(hit.job.outputs, { out: "x" })
          assert.isTrue(claimOf(yield* claim(as, second, "next")).ok)
          // Not hermetic, or another hash: claimed as usual.
          const third = ulid()
          runOf(yield* as("POST", "/runs", { runId: third, jobs: [{ jobId: "build" }] }))
          assert.isTrue(claimOf(yield* claim(as, third, "build", { jobInputHash: hash })).ok)
          assert.property(invalidFields(yield* claim(as, third, "build", { jobInputHash: "XYZ" })), "jobInputHash")
        }))

      it.effect("cancel cancels pending and running jobs and kills their leases; the run is terminal", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const { runId } = graph()
          runOf(yield* as("POST", "/runs", graph(runId)))
          assert.isTrue(claimOf(yield* claim(as, runId, "build")).ok)
          const run = runOf(yield* as("POST", `/runs/${runId}:cancel`, { reason: "enough" }))
          assert.strictEqual(run.status, "canceled")
          assert.strictEqual(run.jobCounts.canceled, 3)
          assert.isString(run.canceledAt)
          failed(
            yield* as("POST", `/runs/${runId}/jobs/build:heartbeat`, { runnerId: "r1", leaseEpoch: 1 }),
            409,
            "lease_lost"
          )
          failed(yield* claim(as, runId, "test"), 409, "run_terminal")
          failed(yield* as("POST", `/runs/${runId}:cancel`, {}), 409, "run_terminal")
          const sql = yield* SqlClient.SqlClient
          const types = yield* sql<{ type: string }>`
            select type from events where org_id = ${personal.id} and subject_id = ${runId} order by occurred_at, id`
          assert.deepStrictEqual(types.map((row) => row.type), ["run.created", "run.canceled"])
          const listed = ok(yield* as("GET", "/runs?status=canceled"), { runs: Schema.Array(Run) }).runs
          assert.deepStrictEqual(listed.map((r) => r.id), [runId])
        }).pipe(Effect.orDie))

      it.effect("runs list newest first with a cursor; unknown runs are 404", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const ids = [ulid(), ulid(), ulid()]
          for (const runId of ids) runOf(yield* as("POST", "/runs", { runId, jobs: [{ jobId: "a" }] }))
          const page1 = yield* as("GET", "/runs?limit=2")
          assert.deepStrictEqual(ok(page1, { runs: Schema.Array(Run) }).runs.map((run) => run.id), [ids[2], ids[1]])
          const cursor = metaOf(page1).cursor ?? ""
          const page2 = yield* as("GET", `/runs?limit=2&cursor=${encodeURIComponent(cursor)}`)
          assert.deepStrictEqual(ok(page2, { runs: Schema.Array(Run) }).runs.map((run) => run.id), [ids[0]])
          failed(yield* as("GET", `/runs/${ulid()}`), 404, "not_found")
          failed(yield* as("GET", `/runs/${ulid()}/jobs`), 404, "not_found")
          failed(yield* as("GET", "/runs/not-a-ulid"), 404, "not_found")
        }))

      it.effect("the contract-version gate: absent, 1 and 2 served; another major or a non-integer 409 first", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const runId = ulid()
          runOf(yield* as("POST", "/runs", { runId, jobs: [{ jobId: "a" }] }, { "svc-contract-version": "1" }))
          runOf(yield* as("GET", `/runs/${runId}`, undefined, { "svc-contract-version": "2" }))
          for (const requested of ["3", "0", "abc", "2.0"]) {
            const refused = failed(
              yield* as("GET", `/runs/${runId}`, undefined, { "svc-contract-version": requested }),
              409,
              "contract_version_unsupported"
            )
            assert.deepStrictEqual(refused.details, { supported: { min: 1, max: 2 }, requested })
          }
          // Before validation and before lookups: a bad body or an unknown run still answers the gate's 409.
          failed(
            yield* as("POST", "/runs", { runId: "bad" }, { "svc-contract-version": "9" }),
            409,
            "contract_version_unsupported"
          )
          failed(
            yield* as("GET", `/runs/${ulid()}`, undefined, { "svc-contract-version": "9" }),
            409,
            "contract_version_unsupported"
          )
          // Authentication comes first.
          const { baseUrl } = yield* TestServer
          const anonymous = yield* call(baseUrl, "GET", `/v1/organizations/org_x/projects/prj_x/state/runs`, {
            headers: { "svc-contract-version": "9" }
          })
          failed(anonymous, 401, "unauthenticated")
        }))

      it.effect("logs: lease-fenced chunks, retry-safe by seq, assembled in seq order, text/plain, offset", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const runId = ulid()
          runOf(yield* as("POST", "/runs", { runId, jobs: [{ jobId: "a" }, { jobId: "b" }] }))
          const append = (seq: number, content: string, fence: Record<string, unknown> = {}) =>
            as("POST", `/runs/${runId}/logs/a`, { runnerId: "r1", leaseEpoch: 1, seq, content, ...fence })
          failed(yield* append(0, "early"), 409, "lease_lost")
          assert.isTrue(claimOf(yield* claim(as, runId, "a")).ok)
          const Chunk = Schema.Struct({
            jobId: Schema.String,
            attempt: Schema.Int,
            seq: Schema.Int,
            bytes: Schema.Int,
            totalBytes: Schema.Int
          })
          ok(yield* append(1, "wörld\n"), { chunk: Chunk })
          const first = ok(yield* append(0, "hello "), { chunk: Chunk }).chunk
          assert.deepStrictEqual(first, { jobId: "a", attempt: 1, seq: 0, bytes: 6, totalBytes: 13 })
          // The same seq and content again is accepted (a retried request); other content is refused.
          ok(yield* append(0, "hello "), { chunk: Chunk })
          failed(yield* append(0, "other"), 409, "conflict")
          failed(yield* append(2, "x", { leaseEpoch: 2 }), 409, "lease_lost")
          failed(yield* append(2, "x", { runnerId: "r2" }), 409, "lease_lost")
          failed(
            yield* as("POST", `/runs/${runId}/logs/b`, { runnerId: "r1", leaseEpoch: 1, seq: 0, content: "x" }),
            409,
            "lease_lost"
          )
          const Log = Schema.Struct({
            jobId: Schema.String,
            attempt: Schema.Int,
            bytes: Schema.Int,
            chunks: Schema.Int,
            complete: Schema.Boolean,
            content: Schema.String
          })
          const log = ok(yield* as("GET", `/runs/${runId}/logs/a`), { log: Log }).log
          assert.deepStrictEqual(log, {
            jobId: "a",
            attempt: 1,
            bytes: 13,
            chunks: 2,
            complete: false,
            content: "hello wörld\n"
          })
          const tail = ok(yield* as("GET", `/runs/${runId}/logs/a?offset=6`), { log: Log }).log
          assert.strictEqual(tail.content, "wörld\n")
          const raw = yield* as("GET", `/runs/${runId}/logs/a?offset=6`, undefined, { accept: "text/plain" })
          assert.strictEqual(raw.status, 200)
          assert.match(raw.headers.get("content-type") ?? "", /^text\/plain/)
          assert.strictEqual(raw.text, "wörld\n")
          ok(yield* complete(as, runId, "a", { leaseEpoch: 1 }))
          assert.isTrue(ok(yield* as("GET", `/runs/${runId}/logs/a`), { log: Log }).log.complete)
          failed(yield* as("GET", `/runs/${runId}/logs/nope`), 404, "not_found")
          assert.property(invalidFields(yield* append(-1, "x")), "seq")
          // A chunk over 1 MiB of UTF-8 (2-byte characters under the UTF-16 bound) is 413.
          assert.isTrue(claimOf(yield* claim(as, runId, "b")).ok)
          const big = yield* as("POST", `/runs/${runId}/logs/b`, {
            runnerId: "r1",
            leaseEpoch: 1,
            seq: 0,
            content: "é".repeat(600 * 1024)
          })
          failed(big, 413, "payload_too_large")
        }))

      it.effect("claims racing from many runners: exactly one wins, the others see already_claimed", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const runId = ulid()
          runOf(yield* as("POST", "/runs", { runId, jobs: [{ jobId: "a" }] }))
          const answers = yield* Effect.forEach(
            Array.from({ length: 12 }, (_, i) => `runner-${i}`),
            (runnerId) => claim(as, runId, "a", { runnerId }),
            { concurrency: "unbounded" }
          )
          const winners = answers.filter((res) => res.status === 200)
          assert.strictEqual(winners.length, 1)
          for (const res of answers) if (res.status !== 200) failed(res, 409, "already_claimed")
          const [job] = jobsOf(yield* as("GET", `/runs/${runId}/jobs`))
          assert.strictEqual(job?.attempt, 1)
          const claims = ok(yield* as("GET", `/runs/${runId}/log`), { events: Schema.Array(RunEvent) }).events
            .filter((event) => event.type === "state.job.claimed")
          assert.strictEqual(claims.length, 1)
        }))

      const logOf = (res: Res) => ok(res, { events: Schema.Array(RunEvent) }).events

      it.effect("claims and completes of different jobs racing: counts add up, the run finishes exactly once", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const runId = ulid()
          const ids = Array.from({ length: 12 }, (_, i) => `j${i}`)
          runOf(yield* as("POST", "/runs", { runId, jobs: ids.map((jobId) => ({ jobId })) }))
          const claims = yield* Effect.forEach(ids, (jobId) => claim(as, runId, jobId, { runnerId: jobId }), {
            concurrency: "unbounded"
          })
          for (const res of claims) assert.isTrue(claimOf(res).ok)
          const running = runOf(yield* as("GET", `/runs/${runId}`))
          assert.strictEqual(running.status, "running")
          assert.strictEqual(running.jobCounts.running, ids.length)
          // The last two (or more) completes race for the finish: only one of them may record it.
          yield* Effect.forEach(ids, (jobId) =>
            Effect.map(
              complete(as, runId, jobId, { runnerId: jobId, leaseEpoch: 1 }),
              (res) => ok(res)
            ), { concurrency: "unbounded" })
          const run = runOf(yield* as("GET", `/runs/${runId}`))
          assert.strictEqual(run.status, "succeeded")
          assert.deepStrictEqual(run.jobCounts, {
            pending: 0,
            running: 0,
            succeeded: ids.length,
            failed: 0,
            timed_out: 0,
            memoized: 0,
            canceled: 0
          })
          const log = logOf(yield* as("GET", `/runs/${runId}/log?limit=100`))
          assert.deepStrictEqual(log.map((event) => event.seq), Array.from({ length: log.length }, (_, i) => i + 1))
          assert.strictEqual(log.filter((event) => event.type === "state.run.finished").length, 1)
          assert.strictEqual(log[log.length - 1]?.type, "state.run.finished")
        }))

      it.effect("claims racing a cancel: every job ends canceled or was claimed before it, none runs after", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const runId = ulid()
          const ids = Array.from({ length: 10 }, (_, i) => `j${i}`)
          runOf(yield* as("POST", "/runs", { runId, jobs: ids.map((jobId) => ({ jobId })) }))
          const [answers, canceled] = yield* Effect.all([
            Effect.forEach(ids, (jobId) => claim(as, runId, jobId, { runnerId: jobId }), { concurrency: "unbounded" }),
            as("POST", `/runs/${runId}:cancel`, {})
          ], { concurrency: "unbounded" })
          assert.strictEqual(runOf(canceled).status, "canceled")
          for (const res of answers) {
            // Before the cancel: a lease; after it: run_terminal, or the canceled job as terminal.
            if (res.status === 409) failed(res, 409, "run_terminal")
            else assert.include(["running", "canceled"], claimOf(res).job.status)
          }
          const jobs = jobsOf(yield* as("GET", `/runs/${runId}/jobs`))
          assert.deepStrictEqual(jobs.map((job) => job.status), ids.map(() => "canceled"))
          const run = runOf(yield* as("GET", `/runs/${runId}`))
          assert.strictEqual(run.jobCounts.canceled, ids.length)
          assert.strictEqual(run.jobCounts.running + run.jobCounts.pending, 0)
          const log = logOf(yield* as("GET", `/runs/${runId}/log?limit=100`))
          assert.deepStrictEqual(log.map((event) => event.seq), Array.from({ length: log.length }, (_, i) => i + 1))
          const claimed = answers.filter((res) => res.status === 200 && claimOf(res).ok).length
          assert.strictEqual(log.filter((event) => event.type === "state.job.claimed").length, claimed)
          assert.strictEqual(log.filter((event) => event.type === "state.job.canceled").length, ids.length)
        }))
    }
  )
}
