/**
 * The runs service and the lease sweep on memory repositories under `TestClock`: a lease that passes its expiry is
 * timed out by the sweep (the server's scoped fiber on a `Schedule`) or by the first request that meets it; heartbeats
 * after expiry are `lease_lost`; a job running past `timeoutSeconds` is timed out even with a live lease; a timed-out
 * job can be retried with the next epoch.
 */
import { JobKey, LeaseLost, MAX_LOG_CHUNK_BYTES, PayloadTooLarge, RunId } from "@cp/domain"
import { EventLogRepo, RunsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import { monotonicFactory } from "ulid"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { JobLogsService } from "../../src/runs/logs.ts"
import { RunsService } from "../../src/runs/service.ts"
import { LeaseSweep } from "../../src/runs/sweep.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesLayer, seedProject, userActor } from "../support/services.ts"

const TestLayer = Layer.mergeAll(LeaseSweep.layer, JobLogsService.layer).pipe(
  Layer.provideMerge(RunsService.layer),
  Layer.provideMerge(areaServicesLayer)
)

const ulid = monotonicFactory()
const job = Schema.decodeSync(JobKey)

const setup = Effect.gen(function*() {
  const actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: `Root ${actor.userId.slice(-6)}` })
  const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
  const projectId = yield* seedProject(organization.id)
  const runs = yield* RunsService
  const runId = Schema.decodeSync(RunId)(ulid())
  yield* runs.create(actor, workspace, projectId, {
    runId,
    jobs: [{ jobId: job("a") }, { jobId: job("slow"), timeoutSeconds: 30 }]
  })
  return { actor, runs, key: { orgId: organization.id, projectId, runId } }
})

describe("runs service", () => {
  it.effect("the sweep times out an expired lease once; a heartbeat after expiry is lease_lost; retry re-claims", () =>
    Effect.gen(function*() {
      const { actor, key, runs } = yield* setup
      const claimed = yield* runs.claim(actor, key, job("a"), { runnerId: "r1", leaseSeconds: 10 })
      assert.isTrue(claimed.ok)
      const sweep = yield* LeaseSweep
      yield* TestClock.adjust(Duration.seconds(9))
      assert.strictEqual(yield* sweep.runOnce, 0)
      yield* runs.heartbeat(key, job("a"), { runnerId: "r1", leaseEpoch: 1 })
      yield* TestClock.adjust(Duration.seconds(10))
      assert.strictEqual(yield* sweep.runOnce, 1)
      assert.strictEqual(yield* sweep.runOnce, 0)
      const error = yield* Effect.flip(runs.heartbeat(key, job("a"), { runnerId: "r1", leaseEpoch: 1 }))
      assert.instanceOf(error, LeaseLost)
      const { jobs } = yield* runs.jobs(key)
      assert.strictEqual(jobs[0]?.status, "timed_out")
      const { run } = yield* runs.get(key)
      assert.strictEqual(run.jobCounts.timed_out, 1)
      assert.strictEqual(run.status, "running")
      const retried = yield* runs.claim(actor, key, job("a"), { runnerId: "r2", retry: true })
      assert.isTrue(retried.ok)
      if (retried.ok) assert.strictEqual(retried.lease.epoch, 2)
      const { events } = (yield* runs.log(key, {})).data
      assert.deepStrictEqual(events.map((event) => event.type), [
        "state.run.created",
        "state.job.claimed",
        "state.job.timed_out",
        "state.job.retried",
        "state.job.claimed"
      ])
      assert.deepStrictEqual(events[2]?.data, { reason: "lease_expired" })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a request meeting an expired lease before the sweep settles it the same way", () =>
    Effect.gen(function*() {
      const { actor, key, runs } = yield* setup
      yield* runs.claim(actor, key, job("a"), { runnerId: "r1", leaseSeconds: 10 })
      yield* TestClock.adjust(Duration.seconds(11))
      const error = yield* Effect.flip(
        runs.complete(actor, key, job("a"), { runnerId: "r1", leaseEpoch: 1, outcome: "succeeded" })
      )
      assert.instanceOf(error, LeaseLost)
      // The settle committed although the complete failed: the sweep finds nothing left.
      assert.strictEqual(yield* (yield* LeaseSweep).runOnce, 0)
      assert.strictEqual((yield* runs.jobs(key)).jobs[0]?.status, "timed_out")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a job running past timeoutSeconds is timed out although its lease is kept alive", () =>
    Effect.gen(function*() {
      const { actor, key, runs } = yield* setup
      yield* runs.claim(actor, key, job("slow"), { runnerId: "r1", leaseSeconds: 20 })
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(Duration.seconds(10))
        yield* Effect.ignore(runs.heartbeat(key, job("slow"), { runnerId: "r1", leaseEpoch: 1 }))
      }
      const slow = (yield* runs.jobs(key)).jobs[1]
      assert.strictEqual(slow?.status, "timed_out")
      assert.match(slow?.errorMessage ?? "", /timeout of 30 seconds/)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the background layer sweeps on its schedule; a finish goes to the workspace event log", () =>
    Effect.gen(function*() {
      const { actor, key, runs } = yield* setup
      yield* runs.claim(actor, key, job("a"), { runnerId: "r1", leaseSeconds: 10 })
      yield* runs.claim(actor, key, job("slow"), { runnerId: "r1", leaseSeconds: 10 })
      yield* Effect.gen(function*() {
        yield* TestClock.adjust(Duration.seconds(16))
        const { jobs } = yield* runs.jobs(key)
        assert.deepStrictEqual(jobs.map((j) => j.status), ["timed_out", "timed_out"])
        const { run } = yield* runs.get(key)
        assert.strictEqual(run.status, "failed")
        const stored = yield* (yield* RunsRepo).find(key)
        assert.isTrue(Option.isSome(stored))
        const events = yield* (yield* EventLogRepo).listEvents({ orgId: key.orgId })
        assert.include(events.map((event) => event.type), "run.finished")
      }).pipe(Effect.provide(LeaseSweep.background), Effect.scoped)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an attempt's log is capped at 64 MiB: the chunk that would pass it is 413, nothing stored", () =>
    Effect.gen(function*() {
      const { actor, key, runs } = yield* setup
      yield* runs.claim(actor, key, job("a"), { runnerId: "r1", leaseSeconds: 600 })
      const logs = yield* JobLogsService
      const mebibyte = "x".repeat(MAX_LOG_CHUNK_BYTES)
      const fence = { runnerId: "r1", leaseEpoch: 1 }
      for (let seq = 0; seq < 64; seq++) yield* logs.append(key, job("a"), { ...fence, seq, content: mebibyte })
      const over = yield* Effect.flip(logs.append(key, job("a"), { ...fence, seq: 64, content: "x" }))
      assert.instanceOf(over, PayloadTooLarge)
      const { log } = yield* logs.read(key, job("a"), { offset: 64 * MAX_LOG_CHUNK_BYTES - 3 })
      assert.deepStrictEqual([log.bytes, log.chunks, log.content], [64 * MAX_LOG_CHUNK_BYTES, 64, "xxx"])
    }).pipe(Effect.provide(TestLayer)))
})
