import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { RateLimitRepo } from "../../src/platform/RateLimitRepo.ts"
import { describeContract, unique } from "../harness.ts"

const t0 = new Date("2030-01-01T00:00:00.000Z")
const at = (ms: number) => new Date(t0.getTime() + ms)

describeContract("RateLimitRepo", RateLimitRepo, (it) => {
  it.effect("allows `limit` requests per window and says when the window closes", () =>
    Effect.gen(function*() {
      const repo = yield* RateLimitRepo
      const bucket = { key: unique("ip"), limit: 2, windowSeconds: 60 }
      assert.deepStrictEqual(yield* repo.hit({ ...bucket, now: t0 }), { allowed: true, retryAfterSeconds: 0 })
      assert.deepStrictEqual(yield* repo.hit({ ...bucket, now: at(1_000) }), { allowed: true, retryAfterSeconds: 0 })
      const blockedKey = bucket.key
      assert.deepStrictEqual(yield* repo.hit({ ...bucket, now: at(10_500) }), {
        allowed: false,
        retryAfterSeconds: 50,
        blockedKey
      })
      assert.deepStrictEqual(yield* repo.hit({ ...bucket, now: at(59_999) }), {
        allowed: false,
        retryAfterSeconds: 1,
        blockedKey
      })
    }))

  it.effect("a new window opens at the first request after the old one closed, and rejections never count", () =>
    Effect.gen(function*() {
      const repo = yield* RateLimitRepo
      const bucket = { key: unique("ip"), limit: 2, windowSeconds: 60 }
      yield* repo.hit({ ...bucket, now: t0 })
      yield* repo.hit({ ...bucket, now: at(1) })
      for (let i = 0; i < 5; i++) assert.isFalse((yield* repo.hit({ ...bucket, now: at(2 + i) })).allowed)
      // The first window closes at t0+60s; the next opens at t0+90s, so it lasts until t0+150s.
      assert.isTrue((yield* repo.hit({ ...bucket, now: at(90_000) })).allowed)
      assert.isTrue((yield* repo.hit({ ...bucket, now: at(140_000) })).allowed)
      assert.deepStrictEqual(yield* repo.hit({ ...bucket, now: at(145_000) }), {
        allowed: false,
        retryAfterSeconds: 5,
        blockedKey: bucket.key
      })
      assert.isTrue((yield* repo.hit({ ...bucket, now: at(150_000) })).allowed)
    }))

  it.effect("concurrent hits never exceed the limit", () =>
    Effect.gen(function*() {
      const repo = yield* RateLimitRepo
      const bucket = { key: unique("ip"), limit: 5, windowSeconds: 60 }
      const decisions = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, i) => at(i)),
        (now) => repo.hit({ ...bucket, now }),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(decisions.filter((decision) => decision.allowed).length, 5)
    }))

  it.effect("hitAll charges every bucket only when all allow, and the strictest rejection wins", () =>
    Effect.gen(function*() {
      const repo = yield* RateLimitRepo
      const perMinute = { key: unique("user"), limit: 1, windowSeconds: 60 }
      const perTenSeconds = { key: unique("ip"), limit: 3, windowSeconds: 10 }
      const both = [perTenSeconds, perMinute]
      assert.deepStrictEqual(yield* repo.hitAll({ buckets: both, now: t0 }), { allowed: true, retryAfterSeconds: 0 })
      assert.deepStrictEqual(
        yield* repo.hitAll({ buckets: both, now: at(1_000) }),
        { allowed: false, retryAfterSeconds: 59, blockedKey: perMinute.key }
      )
      // The rejected call above did not charge perTenSeconds: two more fit in its window.
      assert.isTrue((yield* repo.hit({ ...perTenSeconds, now: at(2_000) })).allowed)
      assert.isTrue((yield* repo.hit({ ...perTenSeconds, now: at(3_000) })).allowed)
      // Both refuse now (perTenSeconds for 6 s more); the longer wait wins.
      assert.deepStrictEqual(
        yield* repo.hitAll({ buckets: [perMinute, perTenSeconds], now: at(4_000) }),
        { allowed: false, retryAfterSeconds: 56, blockedKey: perMinute.key }
      )
      assert.deepStrictEqual(yield* repo.hitAll({ buckets: [], now: t0 }), { allowed: true, retryAfterSeconds: 0 })
    }))
})
