/**
 * The pure webhook rules: the retry schedule and its jitter, the subscription a delivery goes under, signatures, the
 * addresses never called, the subscription patterns accepted.
 */
import { isKnownEventPattern } from "@cp/domain"
import type { SubscriptionMatch } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { mint } from "../../src/platform/ids.ts"
import {
  BACKOFF_SECONDS,
  deliveriesFor,
  isPrivateAddress,
  retryDelayMs,
  signatureHeader,
  verifySignature
} from "../../src/webhooks/rules.ts"

describe("retryDelayMs", () => {
  it("is 30, 120, 480, 1920 s after attempts 1 to 4 at the middle of the jitter, and nothing after the fifth", () => {
    assert.deepStrictEqual([1, 2, 3, 4].map((n) => retryDelayMs(n, 0.5)), [30_000, 120_000, 480_000, 1_920_000])
    assert.isUndefined(retryDelayMs(5, 0.5))
  })

  it("stays within ± 10 % at the ends of the random range", () => {
    BACKOFF_SECONDS.forEach((seconds, index) => {
      const low = retryDelayMs(index + 1, 0)
      const high = retryDelayMs(index + 1, 0.999_999)
      assert.strictEqual(low, seconds * 900)
      assert.isAtMost(high ?? Infinity, seconds * 1100)
      assert.isAbove(high ?? 0, seconds * 1099)
    })
  })
})

describe("deliveriesFor", () => {
  const endpoints = { A: mint.webhookEndpoint(0), B: mint.webhookEndpoint(0), C: mint.webhookEndpoint(0) }
  const match = (endpoint: keyof typeof endpoints, eventType: string): SubscriptionMatch => ({
    endpointId: endpoints[endpoint],
    subscriptionId: mint.webhookSubscription(0),
    eventType
  })

  it("gives one delivery per endpoint under the most specific subscription", () => {
    const chosen = deliveriesFor([
      match("A", "*"),
      match("A", "team.*"),
      match("A", "team.member.*"),
      match("B", "*"),
      match("C", "team.member.added"),
      match("C", "team.*")
    ])
    assert.deepStrictEqual(
      chosen.map((m) => [m.endpointId, m.eventType]),
      [[endpoints.A, "team.member.*"], [endpoints.B, "*"], [endpoints.C, "team.member.added"]]
    )
  })
})

describe("signatures", () => {
  it("sign t.<body> with the secret string and verify only with the same secret and bytes", () => {
    const header = signatureHeader("whsec_0123", 1_700_000_000, "{\"a\":1}")
    assert.match(header, /^t=1700000000,v1=[0-9a-f]{64}$/)
    assert.isTrue(verifySignature(header, "whsec_0123", "{\"a\":1}"))
    assert.isFalse(verifySignature(header, "whsec_other", "{\"a\":1}"))
    assert.isFalse(verifySignature(header, "whsec_0123", "{\"a\":2}"))
    assert.isFalse(verifySignature("t=1,v1=zz", "whsec_0123", "{}"))
  })
})

describe("isPrivateAddress", () => {
  it("refuses loopback, private, link-local, CGNAT, multicast and unspecified addresses", () => {
    for (
      const address of [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "224.0.0.1",
        "0.0.0.0",
        "::1",
        "::",
        "fe80::1",
        "fd00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "not-an-ip"
      ]
    ) {
      assert.isTrue(isPrivateAddress(address), address)
    }
  })

  it("allows public unicast addresses", () => {
    for (const address of ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111"]) {
      assert.isFalse(isPrivateAddress(address), address)
    }
  })
})

describe("isKnownEventPattern", () => {
  it("takes catalog types, prefixes of catalog types with .* and *; nothing else", () => {
    for (const pattern of ["*", "project.created", "project.*", "team.member.*", "webhook_endpoint.*"]) {
      assert.isTrue(isKnownEventPattern(pattern), pattern)
    }
    for (const pattern of ["", "nope", "nope.*", "project", "proj*", ".*", "project.**", "*.created"]) {
      assert.isFalse(isKnownEventPattern(pattern), pattern)
    }
  })
})
