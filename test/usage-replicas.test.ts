/**
 * Usage ingest from two server processes on one PostgreSQL database (metering-billing.md §1–2): the same keys sent
 * to both at once are stored exactly once each (the unique index decides; the loser answers 409 or a per-item
 * `duplicate`), quota usage counts them at once, and the rollups both roll-up fibers fold are exact within 10 s.
 * Runs only when `DATABASE_URL` names a server.
 */
import { BatchItemResult, QuotaDecision, UsageRecord } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { ok } from "./support/envelope.ts"
import { startReplicaProcesses } from "./support/processes.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"
import { call } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"
import { rolledUp } from "./support/usage.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("usage ingest on two processes", () => {
  it.live(
    "the same keys sent to both processes at once are stored once each; rollups are exact",
    () =>
      Effect.gen(function*() {
        const [a, b] = yield* startReplicaProcesses(yield* scratchDatabaseUrl("cp_usage"), 2)
        if (a === undefined || b === undefined) return assert.fail("two replicas")
        const { personal, token } = yield* signInWithPersonal(a.baseUrl, "usage-race")
        const path = `/v1/organizations/${personal.id}`
        const keys = Array.from({ length: 30 }, () => randomUUID())
        // Singles: every key to both processes at the same time.
        const singles = yield* Effect.all(
          keys.flatMap((idempotencyKey, i) =>
            [a, b].map((replica) =>
              call(replica.baseUrl, "POST", `${path}/usage`, {
                token,
                body: { metric: "race", idempotencyKey, quantity: i + 1 }
              })
            )
          ),
          { concurrency: "unbounded" }
        )
        for (let i = 0; i < keys.length; i++) {
          const statuses = [singles[2 * i]?.status, singles[2 * i + 1]?.status].sort()
          assert.deepStrictEqual(statuses, [200, 409], `key ${i}`)
          const winner = singles[2 * i]?.status === 200 ? singles[2 * i] : singles[2 * i + 1]
          if (winner !== undefined) {
            assert.strictEqual(ok(winner, { usageRecord: UsageRecord }).usageRecord.quantity, i + 1)
          }
        }
        // Batches: two overlapping batches of 200 sent to both processes at once, three rounds.
        let expectedQuantity = keys.reduce((sum, _, i) => sum + i + 1, 0)
        let expectedRecords = keys.length
        for (let round = 0; round < 3; round++) {
          const shared = Array.from({ length: 150 }, () => randomUUID())
          const own = (n: number) => Array.from({ length: n }, () => randomUUID())
          const batchOf = (keys: ReadonlyArray<string>) =>
            keys.map((idempotencyKey) => ({ metric: "race", idempotencyKey, quantity: 2 }))
          // The shared keys in opposite orders: the two statements must not deadlock.
          const [resA, resB] = yield* Effect.all([
            call(a.baseUrl, "POST", `${path}/usage/batch`, {
              token,
              body: { records: batchOf([...shared, ...own(50)]) }
            }),
            call(b.baseUrl, "POST", `${path}/usage/batch`, {
              token,
              body: { records: batchOf([...own(50), ...[...shared].reverse()]) }
            })
          ], { concurrency: "unbounded" })
          const results = [resA, resB].flatMap((res) =>
            ok(res ?? assert.fail("answer"), { results: Schema.Array(BatchItemResult) }).results
          )
          const stored = results.filter((r) => r.ok).length
          const duplicates = results.filter((r) => !r.ok && r.error.kind === "duplicate").length
          assert.strictEqual(stored, 250)
          assert.strictEqual(duplicates, 150)
          expectedQuantity += 2 * 250
          expectedRecords += 250
        }
        // Quota usage counts every stored record at once, folded or not (a quota made now, on the other process).
        const quota = { metric: "race", limit: 1_000_000, period: "day", enforcement: "soft" }
        ok(yield* call(b.baseUrl, "POST", `${path}/quotas`, { token, body: quota }), { quota: Schema.Unknown })
        const decision = ok(
          yield* call(a.baseUrl, "POST", `${path}/quotas/check`, { token, body: { metric: "race" } }),
          QuotaDecision.fields
        )
        assert.strictEqual(decision.used, expectedQuantity)
        // Both processes' roll-up fibers fold the pending sums (skipping each other's claims): exact within 10 s.
        for (const replica of [a, b]) {
          for (const bucketType of ["hour", "day"]) {
            yield* rolledUp(replica.baseUrl, token, personal.id, `metric=race&bucketType=${bucketType}`, {
              totalQuantity: expectedQuantity,
              totalRecords: expectedRecords
            })
          }
        }
      }).pipe(Effect.scoped),
    180_000
  )
})
