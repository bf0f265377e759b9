/**
 * The provider client's configuration (metering-billing.md §4): in production without `BILLPROV_API_URL` there is no
 * provider to call (billing answers 412 `billing_not_configured` on writes), and the inbound webhook secret is unset
 * unless configured (every delivery fails closed); development and test default to the simulator and its secret.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { BillingProvider } from "../../src/billing/provider.ts"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"

const production = {
  APP_ENV: "production",
  SECRETS_KEK: Buffer.alloc(32, 1).toString("base64"),
  TOKEN_SIGNING_KEY: "k".repeat(32)
}

const clientIn = (env: Record<string, string>) =>
  BillingProvider.layer.pipe(Layer.provide(Layer.effect(AppConfig, parseConfig(env))))

describe("billing provider configuration", () => {
  it.effect("production without BILLPROV_API_URL: every call fails as not configured, before any request", () =>
    Effect.gen(function*() {
      const provider = yield* BillingProvider
      const exit = yield* Effect.exit(provider.createCustomer({ email: "a@b.c", name: "A", externalId: "org_x" }))
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(provider.paymentMethods("cus_x"))
      assert.strictEqual(error._tag, "BillingNotConfigured")
    }).pipe(Effect.provide(clientIn(production))))

  it.effect("the webhook secret: the development default in test, none in production unless set", () =>
    Effect.gen(function*() {
      const test = yield* parseConfig({ APP_ENV: "test" })
      assert.isTrue(Option.isSome(test.billprovWebhookSecret))
      const prod = yield* parseConfig(production)
      assert.isTrue(Option.isNone(prod.billprovWebhookSecret))
      assert.isTrue(Option.isNone(prod.billprovApiUrl))
    }))
})
