/**
 * The billing simulator's checkout page as a person uses it (metering-billing.md §4: "the checkout page is a real HTML
 * page a person can click through"), in headless Chromium (Debian's `chromium`, driven by playwright-core): the page
 * names the plan, "Pay" completes the checkout, and the workspace is on the plan once the page says so.
 */
import { BillingSummary } from "@cp/domain"
import { assert, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { launch } from "./support/browser.ts"
import { ok } from "./support/envelope.ts"
import { TestServer, testServer, workspaceApi } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

layer(testServer("memory"), { excludeTestServices: true, timeout: 60_000 })("billing checkout page", (it) => {
  it.effect("a person clicks Pay on the simulator's checkout page and the workspace is on team", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const session = yield* signInWithPersonal(baseUrl, "checkout-page")
      const api = workspaceApi(session.token, session.personal.id)
      const { checkoutUrl } = ok(yield* api("POST", "/billing/checkout", { planCode: "team" }), {
        checkoutUrl: Schema.String
      })
      const browser = yield* launch
      const page = yield* Effect.promise(() => browser.newPage())
      yield* Effect.promise(() => page.goto(`${baseUrl}${new URL(checkoutUrl).pathname}`))
      assert.include(yield* Effect.promise(() => page.locator("h1").innerText()), "prod_team")
      yield* Effect.promise(() => page.getByRole("button", { name: "Pay" }).click())
      yield* Effect.promise(() => page.getByRole("heading", { name: "Payment complete" }).waitFor())
      const summary = ok(yield* api("GET", "/billing/summary"), BillingSummary.fields)
      assert.strictEqual(summary.plan.code, "team")
      assert.strictEqual(summary.activeSubscription?.status, "active")
    }).pipe(Effect.scoped))
})
