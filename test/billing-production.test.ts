/**
 * Billing in production without a provider (metering-billing.md §4: production without `BILLPROV_API_URL` answers
 * 412 `billing_not_configured` on writes), at the route level. Production has no dev outbox to sign in through, so
 * two servers share one scratch PostgreSQL database and the same keys: a `test` one signs the user in and makes the
 * workspace, and the `production` one (no `BILLPROV_API_URL`) answers that session's billing calls. Skipped without
 * `DATABASE_URL`.
 */
import { BillingSummary, PaymentMethod } from "@cp/domain"
import { Database } from "@cp/persistence"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { failed, ok } from "./support/envelope.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

const keys = { SECRETS_KEK: Buffer.alloc(32, 9).toString("base64"), TOKEN_SIGNING_KEY: "a-production-signing-key" }

class Local extends Context.Service<Local, { readonly baseUrl: string }>()("test/Local") {}
class Production extends Context.Service<Production, { readonly baseUrl: string }>()("test/Production") {}

const servers = Layer.unwrap(Effect.gen(function*() {
  const url = yield* scratchDatabaseUrl("cp_billing_prod")
  const over = (env: Readonly<Record<string, string>>) => testServerOver(Database.layerPostgres(url), env)
  return Layer.mergeAll(
    Layer.effect(Local, TestServer.useSync((server) => server)).pipe(Layer.provide(over(keys))),
    Layer.effect(Production, TestServer.useSync((server) => server)).pipe(
      Layer.provide(over({ ...keys, APP_ENV: "production" }))
    )
  )
}))

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("billing in production", () => {
  layer(servers, { excludeTestServices: true, timeout: 60_000 })("without BILLPROV_API_URL", (it) => {
    it.effect("checkout is 412 billing_not_configured; reads answer free, no customer, no payment methods", () =>
      Effect.gen(function*() {
        const local = yield* Local
        const production = yield* Production
        const session = yield* signInWithPersonal(local.baseUrl, "billing-prod")
        const route = (method: string, path: string, body?: unknown) =>
          call(
            production.baseUrl,
            method,
            `/v1/organizations/${session.personal.id}/billing${path}`,
            body === undefined ? { token: session.token } : { token: session.token, body }
          )
        // production really is production: no simulator, no dev outbox
        failed(yield* call(production.baseUrl, "GET", "/v1/dev/outbox"), 404, "not_found")
        const error = failed(yield* route("POST", "/checkout", { planCode: "team" }), 412, "precondition_failed")
        assert.deepStrictEqual(error.details, { reason: "billing_not_configured" })
        // the workspace's own preconditions are checked first: nothing stored, nothing to open or change
        for (
          const [path, body, reason] of [
            ["/portal", undefined, "no_customer"],
            ["/subscription/change", { planCode: "business" }, "no_active_subscription"],
            ["/subscription/cancel", undefined, "no_active_subscription"]
          ] as const
        ) {
          const refused = failed(yield* route("POST", path, body), 412, "precondition_failed")
          assert.deepStrictEqual(refused.details, { reason }, path)
        }
        const summary = ok(yield* route("GET", "/summary"), BillingSummary.fields)
        assert.strictEqual(summary.plan.code, "free")
        assert.isNull(summary.customer)
        const methods = ok(yield* route("GET", "/payment-methods"), { paymentMethods: Schema.Array(PaymentMethod) })
        assert.deepStrictEqual(methods.paymentMethods, [])
      }))
  })
})
