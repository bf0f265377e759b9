/**
 * Provider ingress limits (spec Authentication §8: provider ingress is "rate limited per source"): every inbound
 * provider route counts its requests per source address in a family of its own, before anything verifies or parses
 * the body, through the one `RateLimiter` (contract §4). A provider retries on 429 after `Retry-After`.
 */
import type { RateLimited } from "@cp/domain"
import type { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { RateLimiter, RateLimitFamily } from "./rateLimit.ts"

/** A per-source ingress family: `limit` requests a minute from one source address. */
export const ingressFamily = (name: string, limit: number): RateLimitFamily => ({
  name,
  windowSeconds: 60,
  identityLimit: limit,
  orgLimit: limit
})

/** The source a request is counted against: its remote address, `unknown` when the socket gives none. */
export const sourceOf = (request: HttpServerRequest.HttpServerRequest): string =>
  request.remoteAddress._tag === "Some" ? request.remoteAddress.value : "unknown"

/** Counts one request of `request`'s source against `family`; a 429 with `Retry-After` when it is full. */
export const consumeIngress = (
  limiter: RateLimiter["Service"],
  family: RateLimitFamily,
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<void, RateLimited> => limiter.consume(family, sourceOf(request), undefined)
