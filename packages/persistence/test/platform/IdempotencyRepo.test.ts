import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { IdempotencyRepo, type IdempotencySlot } from "../../src/platform/IdempotencyRepo.ts"
import { describeContract, unique } from "../harness.ts"

const t0 = new Date("2030-01-01T00:00:00.000Z")
const at = (ms: number) => new Date(t0.getTime() + ms)
const staleAfter = "60 seconds"

const newSlot = (): IdempotencySlot => ({
  principal: unique("usr"),
  method: "POST",
  path: "/v1/things",
  key: unique("k")
})

describeContract("IdempotencyRepo", IdempotencyRepo, (it) => {
  it.effect("claims a free slot once, then reports it in flight", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      assert.deepStrictEqual(yield* repo.begin({ ...slot, bodyHash: "h1", now: t0, staleAfter }), { _tag: "Started" })
      assert.deepStrictEqual(
        yield* repo.begin({ ...slot, bodyHash: "h2", now: at(1_000), staleAfter }),
        { _tag: "InFlight", bodyHash: "h1" }
      )
    }))

  it.effect("replays the stored answer, headers and body verbatim", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      yield* repo.begin({ ...slot, bodyHash: "h1", now: t0, staleAfter })
      const headers = { "content-type": "application/json", "x_odd_header": "A_b" }
      yield* repo.complete({ ...slot, status: 201, headers, body: "{\"snake_key\":1}", now: at(500) })
      assert.deepStrictEqual(
        yield* repo.begin({ ...slot, bodyHash: "h1", now: at(120_000), staleAfter }),
        { _tag: "Completed", bodyHash: "h1", status: 201, headers, body: "{\"snake_key\":1}" }
      )
    }))

  it.effect("keys slots by principal, method, path and key", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      yield* repo.begin({ ...slot, bodyHash: "h", now: t0, staleAfter })
      for (
        const other of [{ principal: unique("usr") }, { method: "PUT" }, { path: "/v1/other" }, { key: unique("k") }]
      ) {
        const outcome = yield* repo.begin({ ...slot, ...other, bodyHash: "h", now: t0, staleAfter })
        assert.strictEqual(outcome._tag, "Started")
      }
    }))

  it.effect("release frees an in-flight slot but never a stored answer", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const released = newSlot()
      yield* repo.begin({ ...released, bodyHash: "h1", now: t0, staleAfter })
      yield* repo.release(released)
      assert.deepStrictEqual(yield* repo.begin({ ...released, bodyHash: "h2", now: at(1), staleAfter }), {
        _tag: "Started"
      })

      const answered = newSlot()
      yield* repo.begin({ ...answered, bodyHash: "h1", now: t0, staleAfter })
      yield* repo.complete({ ...answered, status: 200, headers: {}, body: "ok", now: at(1) })
      yield* repo.release(answered)
      const outcome = yield* repo.begin({ ...answered, bodyHash: "h1", now: at(2), staleAfter })
      assert.strictEqual(outcome._tag, "Completed")
    }))

  it.effect("two racing begins: exactly one starts", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      const outcomes = yield* Effect.all(
        [
          repo.begin({ ...slot, bodyHash: "a", now: t0, staleAfter }),
          repo.begin({ ...slot, bodyHash: "b", now: t0, staleAfter })
        ],
        { concurrency: "unbounded" }
      )
      const tags = outcomes.map((outcome) => outcome._tag).sort()
      assert.deepStrictEqual(tags, ["InFlight", "Started"])
    }))

  it.effect("an in-flight claim older than staleAfter is taken over", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      yield* repo.begin({ ...slot, bodyHash: "h1", now: t0, staleAfter })
      const early = yield* repo.begin({ ...slot, bodyHash: "h2", now: at(60_000), staleAfter })
      assert.deepStrictEqual(early, { _tag: "InFlight", bodyHash: "h1" })
      assert.deepStrictEqual(yield* repo.begin({ ...slot, bodyHash: "h2", now: at(60_001), staleAfter }), {
        _tag: "Started"
      })
      assert.deepStrictEqual(
        yield* repo.begin({ ...slot, bodyHash: "h3", now: at(60_002), staleAfter }),
        { _tag: "InFlight", bodyHash: "h2" }
      )
    }))

  it.effect("a stored answer lives 24 hours, then the key starts afresh", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      const day = 24 * 60 * 60 * 1000
      yield* repo.begin({ ...slot, bodyHash: "h1", now: t0, staleAfter })
      yield* repo.complete({ ...slot, status: 200, headers: {}, body: "first", now: at(10) })
      const withinDay = yield* repo.begin({ ...slot, bodyHash: "h1", now: at(day), staleAfter })
      assert.strictEqual(withinDay._tag, "Completed")
      assert.deepStrictEqual(yield* repo.begin({ ...slot, bodyHash: "h9", now: at(day + 1), staleAfter }), {
        _tag: "Started"
      })
      assert.deepStrictEqual(
        yield* repo.begin({ ...slot, bodyHash: "h1", now: at(day + 2), staleAfter }),
        { _tag: "InFlight", bodyHash: "h9" }
      )
    }))

  it.effect("a second complete does not overwrite the stored answer", () =>
    Effect.gen(function*() {
      const repo = yield* IdempotencyRepo
      const slot = newSlot()
      yield* repo.begin({ ...slot, bodyHash: "h1", now: t0, staleAfter })
      yield* repo.complete({ ...slot, status: 200, headers: {}, body: "first", now: at(1) })
      yield* repo.complete({ ...slot, status: 500, headers: {}, body: "late duplicate", now: at(2) })
      const outcome = yield* repo.begin({ ...slot, bodyHash: "h1", now: at(3), staleAfter })
      assert.deepStrictEqual(outcome, { _tag: "Completed", bodyHash: "h1", status: 200, headers: {}, body: "first" })
    }))
})
