/** Fixed-window request counters shared by every replica through the database. */
import { Array as Arr, Context, Data, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { atomically } from "../Memory.ts"
import { chargeBucketSql } from "../signInStatements.ts"
import { retryUntilAnswered } from "./retryUntilAnswered.ts"

/** One counter to charge: at most `limit` requests per `windowSeconds` window, opening at its first request. */
export interface RateLimitBucket {
  readonly key: string
  readonly limit: number
  readonly windowSeconds: number
}

/** Whether the request may proceed; if not, which bucket refused it and in how many whole seconds its window closes. */
export type RateLimitDecision =
  | { readonly allowed: true; readonly retryAfterSeconds: 0 }
  | { readonly allowed: false; readonly retryAfterSeconds: number; readonly blockedKey: string }

type Rejection = Extract<RateLimitDecision, { readonly allowed: false }>

/** Charges requests against rate-limit buckets; a rejected request is not counted. */
export class RateLimitRepo extends Context.Service<RateLimitRepo, {
  /** Counts a request at `now` against one bucket, unless the bucket is full. */
  readonly hit: (request: RateLimitBucket & { readonly now: Date }) => Effect.Effect<RateLimitDecision>
  /** Counts a request against every bucket only if all allow it; otherwise reports the strictest rejection. */
  readonly hitAll: (request: {
    readonly buckets: ReadonlyArray<RateLimitBucket>
    readonly now: Date
  }) => Effect.Effect<RateLimitDecision>
}>()("@cp/persistence/platform/RateLimitRepo") {
  /** In-process counters. */
  static readonly memory = Layer.sync(RateLimitRepo, () => {
    const windows = new Map<string, BucketWindow>()
    // Decide every bucket first, then charge them all or none: the memory twin of the SQL rollback.
    const hitAll = ({ buckets, now }: { readonly buckets: ReadonlyArray<RateLimitBucket>; readonly now: Date }) =>
      atomically((changes) => {
        const decided = buckets.map((bucket) => ({ bucket, ...decide(windows.get(bucket.key), bucket, now) }))
        const rejected = decided.flatMap(({ decision }) => decision.allowed ? [] : [decision])
        if (Arr.isArrayNonEmpty(rejected)) return Effect.succeed(strictest(rejected))
        for (const { bucket, next } of decided) changes.set(windows, bucket.key, next)
        return Effect.succeed(allowed)
      })
    return RateLimitRepo.of({ hit: (request) => hitAll({ buckets: [request], now: request.now }), hitAll })
  })

  /** Counters in `rate_limit_buckets`, each charge one conditional upsert. */
  static readonly sql = Layer.effect(
    RateLimitRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      // Every sign-in start charges a bucket: constant statement text with positional parameters and no per-row name
      // transform (see `chargeBucketSql`), like the other hot statements. The typed request goes out as it is (no
      // per-call schema encode); the row that comes back is decoded.
      const charge = (r: ChargeRequest) =>
        Effect.flatMap(
          sql.unsafe(chargeBucketSql, [r.key, r.now, r.openedBefore, r.limit]).withoutTransform,
          decodeChargeRows
        )
      const hit = (request: RateLimitBucket & { readonly now: Date }) =>
        Effect.map(
          retryUntilAnswered(
            charge({ ...request, openedBefore: windowOpenedBefore(request, request.now) }),
            "RateLimitRepo.hit"
          ),
          (row) => row.allowed ? allowed : rejection(row.windowStart, request, request.now)
        )

      // Charges in key order (so concurrent callers lock rows alike); a rejection rolls every charge back. One bucket
      // is one statement, atomic by itself: it needs no transaction (and so no second round trip each side of it).
      const hitAll = ({ buckets, now }: { readonly buckets: ReadonlyArray<RateLimitBucket>; readonly now: Date }) =>
        buckets.length === 1 && buckets[0] !== undefined ?
          hit({ ...buckets[0], now }) :
          sql.withTransaction(Effect.gen(function*() {
            const sorted = [...buckets].sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
            const decisions = yield* Effect.forEach(sorted, (bucket) => hit({ ...bucket, now }))
            const rejected = decisions.flatMap((decision) => decision.allowed ? [] : [decision])
            if (Arr.isArrayNonEmpty(rejected)) return yield* new Rejected({ decision: strictest(rejected) })
            return allowed
          })).pipe(Effect.catchTag("Rejected", ({ decision }) => Effect.succeed(decision)))

      return RateLimitRepo.of({
        hit: (request) => hit(request).pipe(Effect.orDie, Effect.withSpan("RateLimitRepo.hit")),
        // A single bucket is its one statement (which has its span): no span of its own, like any one-statement method.
        hitAll: (request) =>
          request.buckets.length === 1
            ? Effect.orDie(hitAll(request))
            : hitAll(request).pipe(Effect.orDie, Effect.withSpan("RateLimitRepo.hitAll"))
      })
    })
  )
}

/** One charge: the bucket's key and limit, the request's instant, and the instant a window has closed at or before. */
interface ChargeRequest {
  readonly key: string
  readonly limit: number
  readonly now: Date
  readonly openedBefore: Date
}

const ChargeRow = Schema.Struct({ allowed: Schema.Boolean, windowStart: Schema.Date })
const decodeChargeRows = Schema.decodeUnknownEffect(Schema.Array(ChargeRow))

/** Carries the strictest rejection out of the transaction so the charges of the other buckets roll back. */
class Rejected extends Data.TaggedError("Rejected")<{ readonly decision: Rejection }> {}

interface BucketWindow {
  readonly windowStart: Date
  readonly count: number
}

const allowed: RateLimitDecision = { allowed: true, retryAfterSeconds: 0 }

/** A window that opened at or before this instant has closed by `now`. */
const windowOpenedBefore = (bucket: RateLimitBucket, now: Date) => new Date(now.getTime() - bucket.windowSeconds * 1000)

const rejection = (windowStart: Date, bucket: RateLimitBucket, now: Date): Rejection => ({
  allowed: false,
  retryAfterSeconds: Math.max(
    1,
    Math.ceil((windowStart.getTime() + bucket.windowSeconds * 1000 - now.getTime()) / 1000)
  ),
  blockedKey: bucket.key
})

/** The rejection that keeps the caller waiting longest. */
const strictest = ([first, ...others]: readonly [Rejection, ...Array<Rejection>]): Rejection =>
  others.reduce((worst, next) => next.retryAfterSeconds > worst.retryAfterSeconds ? next : worst, first)

const decide = (current: BucketWindow | undefined, bucket: RateLimitBucket, now: Date) => {
  if (current === undefined || current.windowStart <= windowOpenedBefore(bucket, now)) {
    return { decision: allowed, next: { windowStart: now, count: 1 } }
  }
  if (current.count < bucket.limit) {
    return { decision: allowed, next: { windowStart: current.windowStart, count: current.count + 1 } }
  }
  return { decision: rejection(current.windowStart, bucket, now), next: current }
}
