/**
 * The pure rules of webhook delivery (webhooks.md §1–§3): which subscription an event is delivered under, the retry
 * schedule with its jitter, the signature, the delivered body, and which addresses are never called.
 */
import type { EventRecord, JsonObject, SubscriptionMatch } from "@cp/persistence"
import { createHmac, timingSafeEqual } from "node:crypto"
import { isIP } from "node:net"

/** Tries in total (spec Limits: "Webhook attempts 5 in total"). */
export const MAX_ATTEMPTS = 5
/** Seconds before attempt 2, 3, 4, 5, each after the previous failure. */
export const BACKOFF_SECONDS = [30, 120, 480, 1920] as const
/** ± this fraction of the delay, so retries of many endpoints do not line up. */
export const JITTER = 0.1
/** Consecutive terminal failures that disable an endpoint. */
export const AUTO_DISABLE_THRESHOLD = 5
/** How long the previous secret still signs after a rotation. */
export const GRACE_PERIOD_SECONDS = 86_400
/** How long a worker's claim on a row lasts; a worker that dies leaves it to expire. */
export const CLAIM_SECONDS = 60
/** Connect to last byte. */
export const DELIVERY_TIMEOUT_MS = 10_000
/** Response bytes read at most, and kept at most. */
export const RESPONSE_READ_LIMIT = 64 * 1024
export const RESPONSE_KEEP_LIMIT = 1024
export const USER_AGENT = "Svc-Webhooks/1.0"

/**
 * Milliseconds until the next try after attempt `failedAttempt` failed, with `random` in [0, 1) placing it within
 * ± 10 %; undefined when that was the last try.
 */
export const retryDelayMs = (failedAttempt: number, random: number): number | undefined => {
  const base = BACKOFF_SECONDS[failedAttempt - 1]
  if (base === undefined) return undefined
  return Math.round(base * 1000 * (1 + JITTER * (2 * random - 1)))
}

/** How specific a pattern is: exact beats any prefix, a longer prefix beats a shorter one, `*` is last. */
const specificity = (pattern: string): number =>
  pattern === "*" ? 0 : pattern.endsWith(".*") ? pattern.length : Number.MAX_SAFE_INTEGER

/** One delivery per endpoint, under its most specific matching subscription (webhooks.md §2 Matching). */
export const deliveriesFor = (matches: ReadonlyArray<SubscriptionMatch>): ReadonlyArray<SubscriptionMatch> => {
  const best = new Map<string, SubscriptionMatch>()
  for (const match of matches) {
    const current = best.get(match.endpointId)
    if (current === undefined || specificity(match.eventType) > specificity(current.eventType)) {
      best.set(match.endpointId, match)
    }
  }
  return [...best.values()]
}

/** The HMAC-SHA256 hex of `<t>.<body>` keyed with the secret string (contract §4). */
const hmacHex = (secret: string, timestamp: number, body: string): string =>
  createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")

/** `t=<unix seconds>,v1=<hex>` (contract §4). */
export const signatureHeader = (secret: string, timestamp: number, body: string): string =>
  `t=${timestamp},v1=${hmacHex(secret, timestamp, body)}`

/** A receiver's check of a signature header against one secret, compared in constant time. */
export const verifySignature = (header: string, secret: string, body: string): boolean => {
  const parts = Object.fromEntries(header.split(",").map((part) => part.split("=", 2) as [string, string]))
  const timestamp = Number(parts["t"])
  const given = parts["v1"]
  if (!Number.isInteger(timestamp) || given === undefined || !/^[0-9a-f]{64}$/.test(given)) return false
  return timingSafeEqual(Buffer.from(hmacHex(secret, timestamp, body), "hex"), Buffer.from(given, "hex"))
}

/**
 * The delivered body (webhooks.md §1), fixed when the event is written so every retry and replay sends the same
 * bytes: the event id and type, when it happened, and `data` with the scope and the actor beside the event's fields.
 */
export const deliveredBody = (event: EventRecord): string =>
  JSON.stringify({
    id: event.id,
    type: event.type,
    occurred_at: event.occurredAt.toISOString(),
    data: {
      orgId: event.orgId,
      projectId: event.projectId,
      environmentId: event.environmentId,
      actor: { type: event.actorType, id: event.actorId },
      ...event.data
    } satisfies JsonObject
  })

const ipv4Octets = (address: string): ReadonlyArray<number> => address.split(".").map(Number)

const privateIpv4 = (address: string): boolean => {
  const [a = 0, b = 0] = ipv4Octets(address)
  return a === 0 || a === 10 || a === 127 || a >= 224 || // this network, private, loopback, multicast and reserved
    (a === 100 && b >= 64 && b <= 127) || // CGNAT
    (a === 169 && b === 254) || // link-local
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168)
}

/**
 * Whether an IP address is loopback, private, link-local, CGNAT, multicast or otherwise not a public unicast
 * destination (webhooks.md §2 URL). IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
 */
export const isPrivateAddress = (address: string): boolean => {
  const family = isIP(address)
  if (family === 4) return privateIpv4(address)
  if (family !== 6) return true
  const lower = address.toLowerCase()
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (mapped?.[1] !== undefined) return privateIpv4(mapped[1])
  return lower === "::" || lower === "::1" || /^f[cd]/.test(lower) || /^fe[89ab]/.test(lower) || /^ff/.test(lower)
}
