/**
 * The roll-up fiber under `TestClock`, on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: ingest queues its
 * records' sums and answers; quota usage counts them at once; the summary shows them after the next pass (one at
 * start, then every `ROLLUP_INTERVAL` of the clock), exactly once however many replicas fold at the same time; and
 * two concurrent ingests crossing a limit together record one violation that counts both.
 */
import type { Actor, ResolvedWorkspace } from "@cp/domain"
import { Migrations } from "@cp/persistence"
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { backends, databaseLayer } from "../../../persistence/test/harness.ts"
import { Entitlements } from "../../src/platform/entitlements.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { QuotasService } from "../../src/quotas/service.ts"
import { RepositoriesMemory, RepositoriesSql } from "../../src/repositories.ts"
import { ROLLUP_INTERVAL, UsageRollup } from "../../src/usage/rollup.ts"
import { UsageService } from "../../src/usage/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesOver, userActor } from "../support/services.ts"

const repositoriesOf = (backend: (typeof backends)[number]) =>
  backend === "memory"
    ? RepositoriesMemory
    : RepositoriesSql.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(databaseLayer(backend)))

const servicesOver = (backend: (typeof backends)[number]) =>
  Layer.mergeAll(UsageService.layer, UsageRollup.layer).pipe(
    Layer.provideMerge(QuotasService.layer),
    Layer.provideMerge(Entitlements.layer),
    Layer.provideMerge(areaServicesOver(repositoriesOf(backend)))
  )

/** 2030-01-01T10:00:00Z: every record of a test falls in one UTC hour and day. */
const START = Date.UTC(2030, 0, 1, 10)

const newOwner = Effect.gen(function*() {
  const actor: Actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: "Rolled" })
  const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
  return { actor, workspace }
})

let keys = 0
const batchOf = (actor: Actor, workspace: ResolvedWorkspace, quantities: ReadonlyArray<number>) =>
  Effect.flatMap(UsageService, (usage) =>
    usage.batch(
      actor,
      workspace,
      quantities.map((quantity) => ({ metric: "calls", idempotencyKey: `k${++keys}`, quantity }))
    ))

const totals = (workspace: ResolvedWorkspace) =>
  Effect.flatMap(UsageService, (usage) =>
    Effect.map(
      usage.summary(workspace, { metric: "calls", bucketType: "hour" }),
      ({ totalQuantity, totalRecords }) => [totalQuantity, totalRecords]
    ))

/** Waits (on live time: a pass over SQL is real I/O) until the summary shows `expected`, for at most 10 s. */
const reflects = (workspace: ResolvedWorkspace, expected: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 200; attempt++) {
      const seen = yield* totals(workspace)
      if (seen[0] === expected[0] && seen[1] === expected[1]) return
      yield* TestClock.withLive(Effect.sleep(Duration.millis(50)))
    }
    assert.deepStrictEqual(yield* totals(workspace), expected)
  })

for (const backend of backends) {
  describe(`usage roll-up [${backend}]`, () => {
    // The layer is built on live time (the database drivers' own timers); each test runs under a `TestClock`.
    layer(servicesOver(backend), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("quota usage counts a record at once; the summary shows it after the next pass of the fiber", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(START)
          const { actor, workspace } = yield* newOwner
          const quotas = yield* QuotasService
          yield* quotas.create(actor, workspace, { metric: "calls", limit: 100, period: "hour", enforcement: "hard" })
          yield* batchOf(actor, workspace, [1, 2, 3])
          const used = Effect.map(quotas.check(workspace, { metric: "calls" }), (decision) => decision.used)
          assert.strictEqual(yield* used, 6)
          assert.deepStrictEqual(yield* totals(workspace), [0, 0])
          yield* Effect.gen(function*() {
            // The pass at start folds what was ingested before.
            yield* reflects(workspace, [6, 3])
            yield* batchOf(actor, workspace, [10, 20])
            assert.strictEqual(yield* used, 36)
            // The clock has not moved: no pass yet, whatever the wall clock does meanwhile.
            yield* TestClock.withLive(Effect.sleep(Duration.millis(300)))
            assert.deepStrictEqual(yield* totals(workspace), [6, 3])
            yield* TestClock.adjust(ROLLUP_INTERVAL)
            yield* reflects(workspace, [36, 5])
            assert.strictEqual(yield* used, 36)
          }).pipe(Effect.provide(UsageRollup.background), Effect.scoped)
          assert.isAtMost(Duration.toMillis(ROLLUP_INTERVAL), 10_000)
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("passes of several replicas at once fold every pending sum exactly once", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(START)
          const { actor, workspace } = yield* newOwner
          const rollup = yield* UsageRollup
          yield* rollup.runOnce
          // 120 ingests: more pending sums than one claim takes, so the passes take turns and skip each other's.
          for (let i = 0; i < 120; i++) yield* batchOf(actor, workspace, [i, 1])
          const replicas = yield* Effect.all([rollup.runOnce, rollup.runOnce, rollup.runOnce], {
            concurrency: "unbounded"
          })
          assert.strictEqual(replicas.reduce((a, b) => a + b, 0), 120)
          const expected = Array.from({ length: 120 }, (_, i) => i + 1).reduce((a, b) => a + b, 0)
          assert.deepStrictEqual(yield* totals(workspace), [expected, 240])
          const days = yield* (yield* UsageService).summary(workspace, { metric: "calls" })
          assert.deepStrictEqual([days.totalQuantity, days.totalRecords, days.rollups.length], [expected, 240, 1])
        }).pipe(Effect.provide(TestClock.layer())))

      it.effect("two concurrent ingests crossing a limit together record one violation counting both", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(START)
          const quotas = yield* QuotasService
          for (let round = 0; round < 3; round++) {
            const { actor, workspace } = yield* newOwner
            yield* quotas.create(actor, workspace, { metric: "calls", limit: 10, period: "day", enforcement: "soft" })
            yield* Effect.all([batchOf(actor, workspace, [3, 3]), batchOf(actor, workspace, [3, 3])], {
              concurrency: "unbounded"
            })
            const { violations } = (yield* quotas.violations(workspace, {})).data
            assert.deepStrictEqual(violations.map((v) => v.used), [12], `round ${round}`)
          }
        }).pipe(Effect.provide(TestClock.layer())))
    })
  })
}
