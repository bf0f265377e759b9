/**
 * Summaries read rollups the roll-up fiber keeps (metering-billing.md §2: a record shows at most 10 s after its
 * ingest answered): `rolledUp` reads `GET /usage/summary` until it shows the expected totals, failing after 10 s.
 */
import { UsageSummary } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { ok } from "./envelope.ts"
import { call } from "./server.ts"

/** The freshness bound of the spec. */
const FRESHNESS_MS = 10_000

/** The summary at `query` (e.g. `metric=cpu&bucketType=hour`) once it totals `expected`; the test fails past 10 s. */
export const rolledUp = (
  baseUrl: string,
  token: string,
  orgId: string,
  query: string,
  expected: { readonly totalQuantity: number; readonly totalRecords: number }
) =>
  Effect.gen(function*() {
    const read = Effect.map(
      call(baseUrl, "GET", `/v1/organizations/${orgId}/usage/summary?${query}`, { token }),
      (res) => ok(res, UsageSummary.fields)
    )
    const deadline = Date.now() + FRESHNESS_MS
    while (true) {
      const summary = yield* read
      const totals = { totalQuantity: summary.totalQuantity, totalRecords: summary.totalRecords }
      if (totals.totalQuantity === expected.totalQuantity && totals.totalRecords === expected.totalRecords) {
        return summary
      }
      if (Date.now() > deadline) return assert.fail(`after 10 s the summary shows ${JSON.stringify(totals)}`)
      yield* Effect.sleep(Duration.millis(100))
    }
  })
