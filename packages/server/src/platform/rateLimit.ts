/**
 * Rate limiting as one mechanism (contract §4): fixed windows per bucket, counters in the database so
 * every replica shares them, the strictest bucket wins, rejected requests do not count.
 */
import { RateLimited, wireError } from "@cp/domain"
import { RateLimitRepo } from "@cp/persistence"
import { Clock, Context, Effect, Layer } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"

export interface Bucket {
  readonly scope: "identity" | "org"
  readonly key: string
  readonly limit: number
}

/** A family of limits that share a window: auth (login start and complete), audit, … */
export interface RateLimitFamily {
  readonly name: string
  readonly windowSeconds: number
  readonly identityLimit: number
  readonly orgLimit: number
}

export const authFamily: RateLimitFamily = { name: "auth", windowSeconds: 60, identityLimit: 10, orgLimit: 60 }
export const auditFamily: RateLimitFamily = { name: "audit", windowSeconds: 60, identityLimit: 120, orgLimit: 600 }

/**
 * The 429 this trip becomes carries `Retry-After`, the seconds of its `details.retryAfterSeconds`; outside an HTTP
 * request (a service test) there is no answer to mark.
 */
const retryAfter = (seconds: number) =>
  Effect.withFiber((fiber) => {
    HttpEffect.appendPreResponseHandlerUnsafe(fiber.context, (_request, response) =>
      Effect.succeed(
        response.status === 429 ? HttpServerResponse.setHeader(response, "retry-after", String(seconds)) : response
      ))
    return Effect.void
  })

export class RateLimiter extends Context.Service<RateLimiter, {
  /** Counts one request against the family's identity bucket and, when known, its workspace bucket. */
  readonly consume: (
    family: RateLimitFamily,
    identity: string,
    org: string | undefined
  ) => Effect.Effect<void, RateLimited>
}>()("@cp/server/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const repo = yield* RateLimitRepo
      return RateLimiter.of({
        // Untraced: it runs on every sign-in start and complete; its statement has a span of its own.
        consume: Effect.fnUntraced(function*(family, identity, org) {
          const now = yield* Clock.currentTimeMillis
          const buckets: Array<Bucket> = [
            { scope: "identity", key: `${family.name}:identity:${identity}`, limit: family.identityLimit },
            ...(org === undefined
              ? []
              : [{ scope: "org" as const, key: `${family.name}:org:${org}`, limit: family.orgLimit }])
          ]
          const verdict = yield* repo.hitAll({
            buckets: buckets.map(({ key, limit }) => ({ key, limit, windowSeconds: family.windowSeconds })),
            now: new Date(now)
          })
          if (verdict.allowed) return
          const blocked = buckets.find((bucket) => bucket.key === verdict.blockedKey) ?? buckets[0]
          yield* retryAfter(verdict.retryAfterSeconds)
          return yield* wireError(RateLimited, "Too many requests; retry later", {
            scope: blocked?.scope ?? "identity",
            retryAfterSeconds: verdict.retryAfterSeconds
          })
        })
      })
    })
  )
}
