/**
 * The runs repository's contract on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: a run and its jobs in
 * declared order, a taken run id, saved job and run state, the memo lookup, the run log oldest first after a
 * sequence number, project-scoped lookups and lists, and the lapsed-lease claim that skips runs another transaction
 * holds.
 */
import { JobKey, RunId } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"
import { monotonicFactory } from "ulid"
import { UniqueViolation } from "../../src/errors.ts"
import { ProjectsRepo } from "../../src/projects/ProjectsRepo.ts"
import type { JobRow, RunEventEntry, RunRow } from "../../src/runs/rows.ts"
import { RunsRepo } from "../../src/runs/RunsRepo.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { at, storedProjectScope } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const ulid = monotonicFactory()
const jobKey = Schema.decodeSync(JobKey)

const Repos = {
  memory: Layer.mergeAll(RunsRepo.memory, ProjectsRepo.memory, OrganizationsRepo.memory),
  sql: Layer.mergeAll(RunsRepo.sql, ProjectsRepo.sql, OrganizationsRepo.sql)
}

/** A workspace and a project of it, stored. */
const scope = Effect.map(storedProjectScope("Root"), ({ org, projectId }) => ({ orgId: org.id, projectId }))

const runRow = (orgId: RunRow["orgId"], projectId: RunRow["projectId"], minutes: number): RunRow => ({
  id: Schema.decodeSync(RunId)(ulid()),
  orgId,
  projectId,
  environmentId: null,
  status: "queued",
  trigger: { kind: "manual" },
  metadata: { k: "v" },
  createdBy: { id: "usr_x", kind: "user" },
  jobCounts: { pending: 2, running: 0, succeeded: 0, failed: 0, timed_out: 0, memoized: 0, canceled: 0 },
  createdAt: at(minutes),
  startedAt: null,
  finishedAt: null,
  canceledAt: null,
  bodyHash: "h",
  nextSeq: 1
})

const jobRow = (run: RunRow, jobId: string, position: number, overrides: Partial<JobRow> = {}): JobRow => ({
  runId: run.id,
  jobId: jobKey(jobId),
  orgId: run.orgId,
  projectId: run.projectId,
  position,
  name: jobId,
  dependsOn: [],
  status: "pending",
  attempt: 0,
  leaseEpoch: 0,
  runnerId: null,
  leaseExpiresAt: null,
  leaseSeconds: null,
  timeoutSeconds: null,
  hermetic: false,
  jobInputHash: null,
  exitCode: null,
  outputs: {},
  errorMessage: null,
  startedAt: null,
  finishedAt: null,
  updatedAt: run.createdAt,
  ...overrides
})

/** A run-log entry about `jobId`, not numbered yet. */
const entry = (jobId: string, minutes: number): RunEventEntry => ({
  type: "state.job.claimed",
  jobId: jobKey(jobId),
  attempt: 1,
  runnerId: "r",
  at: at(minutes),
  data: { jobId, nested: { n: minutes } }
})

describeContract("RunsRepo", Repos, (it, backend) => {
  it.effect("stores a run with its jobs in declared order; a taken id is a UniqueViolation", () =>
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const { orgId, projectId } = yield* scope
      const run = runRow(orgId, projectId, 1)
      const jobs = [jobRow(run, "b", 0, { dependsOn: [jobKey("a")] }), jobRow(run, "a", 1)]
      yield* runs.insert(run, jobs)
      assert.deepStrictEqual(yield* runs.find({ orgId, projectId, runId: run.id }), Option.some(run))
      assert.deepStrictEqual(yield* runs.jobs(run.id), jobs)
      assert.deepStrictEqual(yield* runs.jobsNamed({ runId: run.id, jobIds: [jobKey("a")] }), jobs.slice(1))
      // Runnable: pending with every dependency done (`b` waits for `a`).
      assert.deepStrictEqual(yield* runs.runnable(run.id), jobs.slice(1))
      const a = jobs[1]
      if (a !== undefined) yield* runs.saveJobs([{ ...a, status: "memoized" }])
      assert.deepStrictEqual((yield* runs.runnable(run.id)).map((job) => job.jobId), ["b"])
      const again = yield* Effect.flip(runs.insert(run, []))
      assert.instanceOf(again, UniqueViolation)
      const other = yield* scope
      assert.isTrue(Option.isNone(yield* runs.find({ ...other, runId: run.id })))
    }))

  it.effect("saves job and run state; the memo lookup finds succeeded hermetic jobs of the project only", () =>
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const { orgId, projectId } = yield* scope
      const run = runRow(orgId, projectId, 2)
      const [job] = [jobRow(run, "build", 0)]
      yield* runs.insert(run, [job])
      const hash = "b".repeat(64)
      const done: JobRow = {
        ...job,
        status: "succeeded",
        attempt: 1,
        leaseEpoch: 1,
        runnerId: "r",
        hermetic: true,
        jobInputHash: hash,
        outputs: { o: "1" },
        exitCode: 0,
        startedAt: at(3),
        finishedAt: at(4),
        updatedAt: at(4)
      }
      yield* runs.saveJobs([done])
      assert.deepStrictEqual(yield* runs.jobs(run.id), [done])
      const saved: RunRow = { ...run, status: "succeeded", startedAt: at(3), finishedAt: at(4), nextSeq: 5 }
      yield* runs.save(saved)
      assert.deepStrictEqual(yield* runs.find({ orgId, projectId, runId: run.id }), Option.some(saved))
      assert.deepStrictEqual(
        yield* runs.findMemo({ projectId, jobId: jobKey("build"), jobInputHash: hash }),
        Option.some(done)
      )
      assert.isTrue(Option.isNone(yield* runs.findMemo({ projectId, jobId: jobKey("other"), jobInputHash: hash })))
      const elsewhere = yield* scope
      assert.isTrue(
        Option.isNone(
          yield* runs.findMemo({ projectId: elsewhere.projectId, jobId: jobKey("build"), jobInputHash: hash })
        )
      )
    }))

  it.effect("the run log reads oldest first after a sequence number; lists are newest first and filtered", () =>
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const { orgId, projectId } = yield* scope
      const first = runRow(orgId, projectId, 5)
      const second = { ...runRow(orgId, projectId, 6), status: "canceled" as const }
      yield* runs.insert(first, [])
      yield* runs.insert(second, [])
      const events = [1, 2, 3].map((seq) => ({
        runId: first.id,
        seq,
        type: "state.job.claimed" as const,
        jobId: jobKey("a"),
        attempt: seq,
        runnerId: "r",
        at: at(seq),
        data: { n: seq }
      }))
      yield* runs.appendEvents(events)
      assert.deepStrictEqual(yield* runs.events({ runId: first.id, after: 1, limit: 1 }), events.slice(1, 2))
      assert.deepStrictEqual(yield* runs.events({ runId: first.id, after: 0, limit: 10 }), events)
      const listed = yield* runs.list({ orgId, projectId, limit: 10 })
      assert.deepStrictEqual(listed.map((row) => row.id), [second.id, first.id])
      const canceled = yield* runs.list({ orgId, projectId, status: "canceled", limit: 10 })
      assert.deepStrictEqual(canceled.map((row) => row.id), [second.id])
    }))

  it.effect("lockJob finds a job of the run; advance moves counts, reserves event numbers, starts and cancels", () =>
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const tx = yield* Transactor
      const { orgId, projectId } = yield* scope
      const run = runRow(orgId, projectId, 12)
      const jobs = [jobRow(run, "a", 0), jobRow(run, "b", 1)]
      yield* runs.insert(run, jobs)
      assert.deepStrictEqual(
        yield* tx.withTransaction(runs.lockJob({ runId: run.id, jobId: jobKey("b") })),
        Option.some(jobs[1])
      )
      assert.isTrue(Option.isNone(yield* tx.withTransaction(runs.lockJob({ runId: run.id, jobId: jobKey("z") }))))
      assert.deepStrictEqual(yield* tx.withTransaction(runs.lockJobs(run.id)), jobs)
      const delta = { pending: -1, running: 1, succeeded: 0, failed: 0, timed_out: 0, memoized: 0, canceled: 0 }
      const entries = [entry("a", 13), entry("b", 13)]
      const started = yield* tx.withTransaction(
        runs.advance({ runId: run.id, delta, events: entries, startedAt: at(13), canceledAt: null })
      )
      const expected: RunRow = {
        ...run,
        jobCounts: { ...run.jobCounts, pending: 1, running: 1 },
        nextSeq: run.nextSeq + 2,
        startedAt: at(13)
      }
      assert.deepStrictEqual(started, Option.some(expected))
      // The entries are numbered from the run row: its next numbers before the update, in order.
      assert.deepStrictEqual(
        yield* runs.events({ runId: run.id, after: 0, limit: 10 }),
        entries.map((event, i) => ({ ...event, runId: run.id, seq: run.nextSeq + i }))
      )
      // A second start and a cancel: the start time stays, the cancel time is set once.
      const again = yield* tx.withTransaction(
        runs.advance({ runId: run.id, delta, events: [], startedAt: at(14), canceledAt: at(14) })
      )
      assert.deepStrictEqual(
        again,
        Option.some({ ...expected, jobCounts: { ...run.jobCounts, pending: 0, running: 2 }, canceledAt: at(14) })
      )
      assert.deepStrictEqual(yield* runs.find({ orgId, projectId, runId: run.id }), again)
      const ghost = Schema.decodeSync(RunId)(ulid())
      assert.isTrue(
        Option.isNone(
          yield* runs.advance({ runId: ghost, delta, events: [entry("a", 15)], startedAt: null, canceledAt: null })
        )
      )
      assert.deepStrictEqual(yield* runs.events({ runId: ghost, after: 0, limit: 10 }), [])
    }))

  it.effect("claimExpired finds jobs with a lapsed lease or timeout, by run and declared order", () =>
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const tx = yield* Transactor
      const { orgId, projectId } = yield* scope
      const run = runRow(orgId, projectId, 7)
      const running = { status: "running" as const, attempt: 1, leaseEpoch: 1, startedAt: at(7) }
      yield* runs.insert(run, [
        jobRow(run, "lease", 0, { ...running, leaseExpiresAt: at(8) }),
        jobRow(run, "live", 1, { ...running, leaseExpiresAt: at(100) })
      ])
      const timeout = runRow(orgId, projectId, 7)
      yield* runs.insert(timeout, [
        jobRow(timeout, "slow", 0, { ...running, leaseExpiresAt: at(100), timeoutSeconds: 60 })
      ])
      const mine = (rows: ReadonlyArray<JobRow>) =>
        rows.filter((row) => row.projectId === projectId).map((row) => `${row.runId}/${row.jobId}`)
      assert.deepStrictEqual(mine(yield* tx.withTransaction(runs.claimExpired({ now: at(7.5), limit: 100 }))), [])
      assert.deepStrictEqual(
        mine(yield* tx.withTransaction(runs.claimExpired({ now: at(8), limit: 100 }))),
        [`${run.id}/lease`, `${timeout.id}/slow`]
      )
    }))

  // Two connections are needed to hold a lock while another transaction looks: PostgreSQL only.
  if (backend === "postgres") {
    it.effect("claimExpired skips a job another transaction holds (for update skip locked)", () =>
      Effect.gen(function*() {
        const runs = yield* RunsRepo
        const tx = yield* Transactor
        const { orgId, projectId } = yield* scope
        const run = runRow(orgId, projectId, 9)
        yield* runs.insert(run, [
          jobRow(run, "a", 0, { status: "running", attempt: 1, leaseEpoch: 1, leaseExpiresAt: at(10) })
        ])
        const mine = (rows: ReadonlyArray<JobRow>) => rows.filter((row) => row.runId === run.id).map((row) => row.runId)
        const held = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* tx.withTransaction(Effect.gen(function*() {
          const claimed = mine(yield* runs.claimExpired({ now: at(11), limit: 100 }))
          yield* Deferred.succeed(held, undefined)
          yield* Deferred.await(release)
          return claimed
        })).pipe(Effect.forkChild)
        yield* Deferred.await(held)
        assert.deepStrictEqual(mine(yield* tx.withTransaction(runs.claimExpired({ now: at(11), limit: 100 }))), [])
        yield* Deferred.succeed(release, undefined)
        assert.deepStrictEqual(yield* Fiber.join(holder), [run.id])
      }))

    it.effect("advance waits for a run row another change holds and adds its delta to that change's", () =>
      Effect.gen(function*() {
        const runs = yield* RunsRepo
        const tx = yield* Transactor
        const { orgId, projectId } = yield* scope
        const run = runRow(orgId, projectId, 15)
        yield* runs.insert(run, [jobRow(run, "a", 0), jobRow(run, "b", 1)])
        const delta = { pending: -1, running: 1, succeeded: 0, failed: 0, timed_out: 0, memoized: 0, canceled: 0 }
        const held = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* tx.withTransaction(Effect.gen(function*() {
          const first = yield* runs.advance({
            runId: run.id,
            delta,
            events: [entry("a", 16)],
            startedAt: at(16),
            canceledAt: null
          })
          yield* Deferred.succeed(held, undefined)
          yield* Deferred.await(release)
          return first
        })).pipe(Effect.forkChild)
        yield* Deferred.await(held)
        const waiter = yield* tx.withTransaction(
          runs.advance({
            runId: run.id,
            delta,
            events: [entry("b", 17), entry("b", 17)],
            startedAt: at(17),
            canceledAt: null
          })
        ).pipe(Effect.forkChild)
        // Real time (not the test clock) for the waiter to reach the held row.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        const second = yield* Fiber.join(waiter)
        // The waiting update saw the holder's committed row: both deltas, three event numbers, the first start.
        assert.deepStrictEqual(
          Option.map(second, (row) => ({ counts: row.jobCounts, nextSeq: row.nextSeq, startedAt: row.startedAt })),
          Option.some({
            counts: { ...run.jobCounts, pending: 0, running: 2 },
            nextSeq: run.nextSeq + 3,
            startedAt: at(16)
          })
        )
        // Numbered in commit order, without a gap: the holder's entry, then the waiter's two.
        const log = yield* runs.events({ runId: run.id, after: 0, limit: 10 })
        assert.deepStrictEqual(
          log.map((event) => `${event.seq}:${event.jobId}`),
          [`${run.nextSeq}:a`, `${run.nextSeq + 1}:b`, `${run.nextSeq + 2}:b`]
        )
      }))
  }
})
