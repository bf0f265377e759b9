/**
 * The usage repository's contract on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: one statement stores the
 * records whose keys the workspace lacks (keys are per workspace) and queues exactly those for roll-up; `rollUp`
 * folds the queue into hourly and daily rollups, a claim at a time; windowed sums by nested scope count every stored
 * record once, folded or not; and the reads (keys, rollups in summary order) agree on every backend.
 */
import { UsageRecordId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { ProjectsRepo } from "../../src/projects/ProjectsRepo.ts"
import type { UsageRecordRow } from "../../src/usage/rows.ts"
import { UsageRepo } from "../../src/usage/UsageRepo.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { at, storedProjectScope } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const implementations = {
  memory: Layer.mergeAll(UsageRepo.memory, OrganizationsRepo.memory, ProjectsRepo.memory),
  sql: Layer.mergeAll(UsageRepo.sql, OrganizationsRepo.sql, ProjectsRepo.sql)
}

const setup = storedProjectScope("Usage")

const recordRow = (
  org: OrganizationRow,
  minutes: number,
  overrides: Partial<UsageRecordRow> = {}
): UsageRecordRow => ({
  id: UsageRecordId.make(randomUUID()),
  orgId: org.id,
  projectId: null,
  environmentId: null,
  resourceId: null,
  metric: "calls",
  quantity: 1,
  idempotencyKey: randomUUID(),
  recordedAt: at(minutes),
  metadata: null,
  createdAt: at(minutes),
  ...overrides
})

/** Folds every pending sum, of this suite or another (the queue is the database's): how many. */
const drain = (usage: UsageRepo["Service"]) =>
  Effect.gen(function*() {
    let total = 0
    while (true) {
      const folded = yield* usage.rollUp(100)
      total += folded
      if (folded < 100) return total
    }
  })

describeContract("UsageRepo", implementations, (it) => {
  it.effect("ingest stores new keys only (per workspace) and answers the stored rows as given", () =>
    Effect.gen(function*() {
      const usage = yield* UsageRepo
      const { org } = yield* setup
      const { org: other } = yield* setup
      const first = recordRow(org, 1, { quantity: Number.MAX_SAFE_INTEGER, metadata: { a: "b" }, resourceId: "r" })
      assert.deepStrictEqual(yield* usage.ingest({ records: [first], at: at(1) }), [first])
      const again = recordRow(org, 2, { idempotencyKey: first.idempotencyKey })
      const fresh = recordRow(org, 2)
      const elsewhere = recordRow(other, 2, { idempotencyKey: first.idempotencyKey })
      const stored = yield* usage.ingest({ records: [again, fresh, elsewhere], at: at(2) })
      assert.sameMembers(stored.map((row) => row.id), [fresh.id, elsewhere.id])
      assert.deepStrictEqual(yield* usage.findByKeys({ orgId: org.id, keys: [first.idempotencyKey, "none"] }), [first])
      assert.deepStrictEqual(yield* usage.ingest({ records: [], at: at(3) }), [])
    }))

  it.effect("rollups add exactly the stored records, per scope and UTC bucket, in summary order", () =>
    Effect.gen(function*() {
      const usage = yield* UsageRepo
      const { org, projectId } = yield* setup
      const a = recordRow(org, 10, { quantity: 2 })
      const b = recordRow(org, 20, { quantity: 3, projectId })
      const c = recordRow(org, 70, { quantity: 4 })
      yield* usage.ingest({ records: [a, b, c], at: at(70) })
      yield* usage.ingest({
        records: [recordRow(org, 75, { idempotencyKey: a.idempotencyKey, quantity: 100 })],
        at: at(75)
      })
      yield* drain(usage)
      const query = { orgId: org.id, metric: "calls", start: at(-60 * 24), end: at(60 * 24), environmentId: null }
      const hours = yield* usage.rollups({ ...query, bucketType: "hour", projectId: null })
      assert.deepStrictEqual(
        hours.map((r) => [r.bucketStart.toISOString(), r.projectId, r.quantity, r.recordCount]),
        [
          [at(0).toISOString(), null, 2, 1],
          [at(0).toISOString(), projectId, 3, 1],
          [at(60).toISOString(), null, 4, 1]
        ]
      )
      const days = yield* usage.rollups({ ...query, bucketType: "day", projectId })
      assert.deepStrictEqual(days.map((r) => [r.quantity, r.recordCount]), [[3, 1]])
      assert.strictEqual(yield* usage.usedInWindow({ ...query, start: at(0), end: at(60), projectId: null }), 5)
      assert.strictEqual(yield* usage.usedInWindow({ ...query, start: at(0), end: at(120), projectId }), 3)
      assert.strictEqual(yield* usage.usedInWindow({ ...query, start: at(60), end: at(120), projectId: null }), 4)
    }))

  it.effect("usage counts a record once before and after its roll-up; rollUp claims at most its limit per call", () =>
    Effect.gen(function*() {
      const usage = yield* UsageRepo
      const { org, projectId } = yield* setup
      yield* drain(usage)
      // Three ingests: three pending sums for the workspace-level hour 0, one for the project's hour 1.
      for (const minutes of [5, 6, 7]) yield* usage.ingest({ records: [recordRow(org, minutes)], at: at(minutes) })
      yield* usage.ingest({
        records: [recordRow(org, 61, { quantity: 5, projectId }), recordRow(org, 62, { quantity: 6, projectId })],
        at: at(62)
      })
      const window = { orgId: org.id, metric: "calls", start: at(0), end: at(120), environmentId: null }
      const query = { ...window, start: at(-60 * 24), end: at(60 * 24) }
      const used = Effect.all([
        usage.usedInWindow({ ...window, projectId: null }),
        usage.usedInWindow({ ...window, projectId }),
        usage.usedInWindow({ ...window, start: at(60), projectId: null })
      ])
      assert.deepStrictEqual(yield* used, [14, 11, 11])
      assert.deepStrictEqual(yield* usage.rollups({ ...query, bucketType: "hour", projectId: null }), [])
      assert.strictEqual(yield* usage.rollUp(2), 2)
      assert.deepStrictEqual(yield* used, [14, 11, 11])
      assert.strictEqual(yield* drain(usage), 2)
      assert.deepStrictEqual(yield* used, [14, 11, 11])
      const hours = yield* usage.rollups({ ...query, bucketType: "hour", projectId: null })
      assert.deepStrictEqual(hours.map((r) => [r.bucketStart.toISOString(), r.projectId, r.quantity, r.recordCount]), [
        [at(0).toISOString(), null, 3, 3],
        [at(60).toISOString(), projectId, 11, 2]
      ])
      // The rollup was created by the first ingest it holds and updated by the last.
      assert.deepStrictEqual([hours[0]?.createdAt, hours[0]?.updatedAt], [at(5), at(7)])
      const days = yield* usage.rollups({ ...query, bucketType: "day", projectId: null })
      assert.deepStrictEqual(days.map((r) => [r.projectId, r.quantity, r.recordCount]), [[null, 3, 3], [
        projectId,
        11,
        2
      ]])
    }))
})
