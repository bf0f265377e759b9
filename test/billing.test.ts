/**
 * Billing end to end over real HTTP (spec: Billing, Authentication §8, "subscription (billing)" rows;
 * metering-billing.md §4–6): checkout through the provider simulator, its signed webhooks to the server's own ingress,
 * summary, entitlements (`limit.projects` 50), invoices and audit; cancel then `advance` back to free; the Standard
 * Webhooks rules (bad, missing, stale signatures; aliases; replay; order; unknown workspace or product); faults of the
 * provider (502 `provider_unavailable`), and the preconditions of checkout, portal, change and cancel.
 */
import { BillingSummary, Entitlement, Invoice, PaymentMethod, Plan } from "@cp/domain"
import { DEV_BILLPROV_WEBHOOK_SECRET } from "@cp/server/platform/config"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { cpctlAs, printedAs } from "./support/cli.ts"
import { failed, invalidFields, ok, type Res } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServer, workspaceApi } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

const Checkout = { checkoutUrl: Schema.String, mode: Schema.Literals(["checkout", "portal"]) }
const summaryOf = (res: Res) => ok(res, BillingSummary.fields)

/** A signed-in user with a Personal workspace and a caller of its billing routes. */
const newWorld = Effect.gen(function*() {
  const { baseUrl } = yield* TestServer
  const session = yield* signInWithPersonal(baseUrl, "billing")
  const api = workspaceApi(session.token, session.personal.id)
  return { baseUrl, session, orgId: session.personal.id, api }
})

/** Where a simulator URL points on this test server (the server hands out PUBLIC_BASE_URL links). */
const pathOf = (url: string) => new URL(url).pathname

/** Checks out `planCode` and completes the simulator's checkout: the provider subscription's id. */
const subscribe = (planCode: string) =>
  Effect.gen(function*() {
    const { api, baseUrl, orgId, session } = yield* newWorld
    const checkout = ok(yield* api("POST", "/billing/checkout", { planCode }), Checkout)
    assert.strictEqual(checkout.mode, "checkout")
    const completed = yield* call(baseUrl, "POST", `${pathOf(checkout.checkoutUrl)}/complete`)
    assert.strictEqual(completed.status, 200)
    // The simulator is the provider: its answers are the provider's JSON, not this API's envelope.
    const { subscription } = Schema.decodeUnknownSync(
      Schema.Struct({ subscription: Schema.Struct({ id: Schema.String }) })
    )(
      completed.json
    )
    return { api, baseUrl, orgId, session, providerSubscriptionId: subscription.id }
  })

const secretKey = new Webhook(DEV_BILLPROV_WEBHOOK_SECRET)

/** A webhook delivery signed as the provider signs it (or with `overrides` to break it). */
const deliver = (
  body: unknown,
  options: { readonly id?: string; readonly at?: Date; readonly headers?: Record<string, string> } = {}
) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const id = options.id ?? `msg_${crypto.randomUUID()}`
    const at = options.at ?? new Date()
    const text = JSON.stringify(body)
    const headers = options.headers ?? {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": secretKey.sign(id, at, text)
    }
    return yield* call(baseUrl, "POST", "/v1/billing/webhooks/billprov", {
      body: text,
      headers: { "content-type": "application/json", ...headers }
    })
  })

/** A local HTTP server standing in for a provider that fails (500) or never answers. */
const fakeProvider = (behaviour: "hang" | "fail") =>
  new Promise<{ readonly server: Server; readonly url: string }>((resolve) => {
    const server = createServer((_request, response) => {
      if (behaviour === "fail") {
        response.writeHead(500, { "content-type": "application/json" })
        response.end(JSON.stringify({ error: "boom" }))
      }
    })
    server.listen(
      0,
      "127.0.0.1",
      () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
    )
  })
const failing = await fakeProvider("fail")
const hanging = await fakeProvider("hang")

for (const backend of sqlBackends) {
  layer(Layer.merge(testServer(backend), NodeServices.layer), { excludeTestServices: true, timeout: 60_000 })(
    `billing [${backend}]`,
    (it) => {
      it.effect("plans are seeded in price order; a new workspace is on free with no customer", () =>
        Effect.gen(function*() {
          const { api } = yield* newWorld
          const { plans } = ok(yield* api("GET", "/billing/plans"), { plans: Schema.Array(Plan) })
          assert.deepStrictEqual(plans.map((plan) => [plan.code, plan.priceAmountCents]), [
            ["free", 0],
            ["team", 2900],
            ["business", 9900]
          ])
          assert.deepStrictEqual(plans.map((plan) => plan.metadata["providerProductId"]), [
            undefined,
            "prod_team",
            "prod_business"
          ])
          failed(yield* api("GET", "/billing/customer"), 404, "not_found")
          const summary = summaryOf(yield* api("GET", "/billing/summary"))
          assert.strictEqual(summary.customer, null)
          assert.strictEqual(summary.activeSubscription, null)
          assert.strictEqual(summary.plan.code, "free")
          const projects = summary.entitlements.find((e) => e.entitlementKey === "limit.projects")
          assert.strictEqual(projects?.limitValue, 5)
          assert.deepStrictEqual(ok(yield* api("GET", "/billing/payment-methods")), { paymentMethods: [] })
          assert.deepStrictEqual(ok(yield* api("POST", "/billing/reconcile")), {
            reconciled: false,
            reason: "no_customer"
          })
        }))

      it.effect("checkout, simulator, webhooks: team, entitlements, paid invoice, audit; cancel + advance: free", () =>
        Effect.gen(function*() {
          const { api, baseUrl, providerSubscriptionId } = yield* subscribe("team")
          const summary = summaryOf(yield* api("GET", "/billing/summary"))
          assert.strictEqual(summary.plan.code, "team")
          assert.strictEqual(summary.activeSubscription?.status, "active")
          assert.strictEqual(summary.activeSubscription?.providerSubscriptionId, providerSubscriptionId)
          assert.strictEqual(summary.activeSubscription?.planId, summary.plan.id)
          assert.strictEqual(summary.customer?.provider, "billprov")
          const limit = (entitlements: ReadonlyArray<typeof Entitlement.Encoded>) =>
            entitlements.find((e) => e.entitlementKey === "limit.projects")
          assert.strictEqual(limit(summary.entitlements)?.limitValue, 50)
          assert.strictEqual(limit(summary.entitlements)?.subscriptionId, summary.activeSubscription?.id)
          const { entitlements } = ok(yield* api("GET", "/billing/entitlements"), {
            entitlements: Schema.Array(Entitlement)
          })
          assert.strictEqual(limit(entitlements)?.limitValue, 50)

          // limit.projects now allows 50: the sixth project (over free's 5) is created.
          for (let i = 0; i < 6; i++) ok(yield* api("POST", "/projects", { name: `Billing ${i}` }))

          const { invoices } = ok(yield* api("GET", "/billing/invoices"), { invoices: Schema.Array(Invoice) })
          assert.strictEqual(invoices.length, 1)
          assert.strictEqual(invoices[0]?.status, "paid")
          assert.strictEqual(invoices[0]?.amountPaidCents, 2900)
          const { paymentMethods } = ok(yield* api("GET", "/billing/payment-methods"), {
            paymentMethods: Schema.Array(PaymentMethod)
          })
          assert.strictEqual(paymentMethods[0]?.last4, "4242")

          const audit = ok(yield* api("GET", "/audit?category=billing"), {
            auditEntries: Schema.Array(Schema.Struct({ eventType: Schema.String }))
          })
          const types = audit.auditEntries.map((entry) => entry.eventType)
          for (const type of ["subscription.activated", "entitlements.updated", "invoice.paid"]) {
            assert.include(types, type)
          }

          // A second checkout while subscribed is the portal.
          const again = ok(yield* api("POST", "/billing/checkout", { planCode: "business" }), Checkout)
          assert.strictEqual(again.mode, "portal")
          assert.include(again.checkoutUrl, "/dev/billprov/portal/")

          assert.deepStrictEqual(ok(yield* api("POST", "/billing/subscription/cancel")), { cancelAtPeriodEnd: true })
          // The provider's subscription.updated follows the answer; wait for it.
          let cancelAt: string | null | undefined = null
          for (let i = 0; i < 50 && cancelAt === null; i++) {
            cancelAt = summaryOf(yield* api("GET", "/billing/summary")).activeSubscription?.cancelAt
            if (cancelAt === null) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
          }
          assert.isString(cancelAt)
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "team")

          assert.strictEqual(
            (yield* call(baseUrl, "POST", `/dev/billprov/subscriptions/${providerSubscriptionId}/advance`)).status,
            200
          )
          const after = summaryOf(yield* api("GET", "/billing/summary"))
          assert.strictEqual(after.plan.code, "free")
          assert.strictEqual(after.activeSubscription, null)
          assert.strictEqual(limit(after.entitlements)?.limitValue, 5)
          const later = ok(yield* api("GET", "/audit?category=billing"), {
            auditEntries: Schema.Array(Schema.Struct({ eventType: Schema.String }))
          })
          assert.include(later.auditEntries.map((entry) => entry.eventType), "subscription.canceled")
        }))

      it.effect("change moves the subscription to another plan; fail-payment keeps it past_due on its plan", () =>
        Effect.gen(function*() {
          const { api, baseUrl, providerSubscriptionId } = yield* subscribe("team")
          failed(yield* api("POST", "/billing/subscription/change", { planCode: "team" }), 412, "precondition_failed")
          assert.deepStrictEqual(ok(yield* api("POST", "/billing/subscription/change", { planCode: "business" })), {
            changed: true
          })
          let plan = "team"
          for (let i = 0; i < 50 && plan === "team"; i++) {
            plan = summaryOf(yield* api("GET", "/billing/summary")).plan.code
            if (plan === "team") yield* Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
          }
          assert.strictEqual(plan, "business")
          const failing = yield* call(
            baseUrl,
            "POST",
            `/dev/billprov/subscriptions/${providerSubscriptionId}/fail-payment`
          )
          assert.strictEqual(failing.status, 200)
          const summary = summaryOf(yield* api("GET", "/billing/summary"))
          assert.strictEqual(summary.activeSubscription?.status, "past_due")
          assert.strictEqual(summary.plan.code, "business")
          const audit = ok(yield* api("GET", "/audit?category=billing"), {
            auditEntries: Schema.Array(Schema.Struct({ eventType: Schema.String }))
          })
          assert.include(audit.auditEntries.map((entry) => entry.eventType), "payment.failed")
          // Reconcile finds the provider and this server in step.
          const reconciled = ok(yield* api("POST", "/billing/reconcile"))
          assert.deepStrictEqual(reconciled, { reconciled: false, reason: "in_sync" }, JSON.stringify(reconciled))
        }))

      it.effect("cpctl billing: checkout prints the URL; summary and invoices after paying; cancel", () =>
        Effect.gen(function*() {
          const { baseUrl, orgId, session } = yield* newWorld
          const cli = (...args: ReadonlyArray<string>) => cpctlAs(baseUrl, session.token, ...args, "-w", orgId)
          const checkout = yield* cli("billing", "checkout", "team")
          assert.strictEqual(checkout.exitCode, 0, checkout.stderr)
          const url = checkout.stdout.trim()
          assert.match(url, /\/dev\/billprov\/checkout\/cs_/)
          assert.strictEqual((yield* call(baseUrl, "POST", `${pathOf(url)}/complete`)).status, 200)
          const summary = yield* cli("billing", "summary")
          assert.include(summary.stdout, "plan: team")
          const invoices = yield* cli("billing", "invoices", "--json")
          assert.strictEqual(printedAs(invoices, Schema.Array(Invoice))[0]?.status, "paid")
          assert.include((yield* cli("billing", "payment-methods")).stdout, "4242")
          assert.include((yield* cli("billing", "plans")).stdout, "business")
          const cancel = yield* cli("billing", "cancel")
          assert.strictEqual(cancel.exitCode, 2)
          assert.strictEqual((yield* cli("billing", "cancel", "--yes")).exitCode, 0)
          assert.include((yield* cli("billing", "reconcile")).stdout, "")
        }))

      it.effect("checkout needs a purchasable plan; change and cancel a subscription; portal a customer", () =>
        Effect.gen(function*() {
          const { api } = yield* newWorld
          for (const planCode of ["free", "enterprise"]) {
            const res = yield* api("POST", "/billing/checkout", { planCode })
            failed(res, 422, "validation_failed")
            assert.property(invalidFields(res), "planCode")
          }
          const portal = failed(yield* api("POST", "/billing/portal"), 412, "precondition_failed")
          assert.deepStrictEqual(portal.details, { reason: "no_customer" })
          const change = failed(
            yield* api("POST", "/billing/subscription/change", { planCode: "business" }),
            412,
            "precondition_failed"
          )
          assert.deepStrictEqual(change.details, { reason: "no_active_subscription" })
          failed(yield* api("POST", "/billing/subscription/cancel"), 412, "precondition_failed")
          // Malformed optional values are ignored.
          const checkout = ok(
            yield* api("POST", "/billing/checkout", {
              planCode: "team",
              embedOrigin: "http://x",
              returnPath: "//evil"
            }),
            Checkout
          )
          assert.strictEqual(checkout.mode, "checkout")
        }))

      it.effect("webhook: bad, missing and stale signatures are 401 and change nothing; aliases are accepted", () =>
        Effect.gen(function*() {
          const { api, orgId, providerSubscriptionId } = yield* subscribe("team")
          const { activeSubscription } = summaryOf(yield* api("GET", "/billing/summary"))
          assert.isNotNull(activeSubscription)
          const customerId = summaryOf(yield* api("GET", "/billing/summary")).customer?.providerCustomerId ?? ""
          const canceled = {
            type: "subscription.canceled",
            timestamp: new Date().toISOString(),
            data: {
              id: providerSubscriptionId,
              customerId,
              productId: "prod_team",
              status: "canceled",
              currentPeriodStart: null,
              currentPeriodEnd: null,
              trialEnd: null,
              cancelAtPeriodEnd: false,
              canceledAt: new Date().toISOString(),
              modifiedAt: new Date(Date.now() + 60_000).toISOString(),
              metadata: { orgId }
            }
          }
          failed(yield* deliver(canceled, { headers: {} }), 401, "unauthenticated")
          failed(
            yield* deliver(canceled, {
              headers: {
                "webhook-id": "msg_x",
                "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
                "webhook-signature": "v1,AAAA"
              }
            }),
            401,
            "unauthenticated"
          )
          failed(yield* deliver(canceled, { at: new Date(Date.now() - 10 * 60_000) }), 401, "unauthenticated")
          // Signed with another secret.
          const other = new Webhook("whsec_" + Buffer.from("another-secret-another-secret-00").toString("base64"))
          const text = JSON.stringify(canceled)
          const now = new Date()
          failed(
            yield* deliver(canceled, {
              headers: {
                "webhook-id": "msg_y",
                "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
                "webhook-signature": other.sign("msg_y", now, text)
              }
            }),
            401,
            "unauthenticated"
          )
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "team")

          // The alias headers, with a good signature among several: applied.
          const id = `msg_${crypto.randomUUID()}`
          const signature = `v1,AAAA ${secretKey.sign(id, now, text)}`
          ok(
            yield* deliver(canceled, {
              headers: {
                "x-billprov-id": id,
                "x-billprov-timestamp": String(Math.floor(now.getTime() / 1000)),
                "x-billprov-signature": signature
              }
            })
          )
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "free")
        }))

      it.effect("the same invoice paid by concurrent deliveries records invoice.paid exactly once", () =>
        Effect.gen(function*() {
          const { api } = yield* subscribe("team")
          const customerId = summaryOf(yield* api("GET", "/billing/summary")).customer?.providerCustomerId ?? ""
          const invoiceEvent = (type: string, id: string, status: string) => ({
            type,
            timestamp: new Date().toISOString(),
            data: {
              id,
              customerId,
              subscriptionId: null,
              number: null,
              status,
              amountDueCents: 2900,
              amountPaidCents: status === "paid" ? 2900 : 0,
              currency: "usd",
              periodStart: null,
              periodEnd: null,
              hostedUrl: null,
              createdAt: new Date().toISOString()
            }
          })
          /** Six deliveries of one paid invoice at once, each under a webhook id of its own (not replays). */
          const payConcurrently = (id: string) =>
            Effect.forEach(
              Array.from({ length: 6 }, () => invoiceEvent("invoice.paid", id, "paid")),
              (event) => Effect.map(deliver(event), (res) => ok(res)),
              { concurrency: "unbounded" }
            )
          const paidCount = Effect.map(
            api("GET", "/audit?category=billing&limit=100"),
            (res) =>
              ok(res, { auditEntries: Schema.Array(Schema.Struct({ eventType: Schema.String })) }).auditEntries
                .filter((entry) => entry.eventType === "invoice.paid").length
          )
          const before = yield* paidCount
          // an invoice first seen paid: the concurrent inserts agree on one status change
          yield* payConcurrently(`in_race_new_${crypto.randomUUID()}`)
          assert.strictEqual(yield* paidCount, before + 1)
          // a stored open invoice paid: the concurrent updates agree on one status change
          const open = `in_race_open_${crypto.randomUUID()}`
          ok(yield* deliver(invoiceEvent("invoice.payment_failed", open, "open")))
          yield* payConcurrently(open)
          assert.strictEqual(yield* paidCount, before + 2)
        }))

      it.effect("webhook: a replayed id, an older event, an unknown workspace or product change nothing", () =>
        Effect.gen(function*() {
          const { api, orgId, providerSubscriptionId } = yield* subscribe("team")
          const customerId = summaryOf(yield* api("GET", "/billing/summary")).customer?.providerCustomerId ?? ""
          const event = (status: string, modifiedAt: Date, extra: Record<string, unknown> = {}) => ({
            type: "subscription.updated",
            timestamp: new Date().toISOString(),
            data: {
              id: providerSubscriptionId,
              customerId,
              productId: "prod_business",
              status,
              currentPeriodStart: null,
              currentPeriodEnd: null,
              trialEnd: null,
              cancelAtPeriodEnd: false,
              canceledAt: null,
              modifiedAt: modifiedAt.toISOString(),
              metadata: { orgId },
              ...extra
            }
          })
          // Older than the stored state: acknowledged, ignored.
          ok(yield* deliver(event("active", new Date(Date.now() - 3_600_000))))
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "team")
          // Unknown workspace and unknown customer.
          ok(yield* deliver(event("active", new Date(Date.now() + 1000), { metadata: { orgId: "org_unknown" } })))
          ok(yield* deliver(event("active", new Date(Date.now() + 1000), { customerId: "cus_unknown", metadata: {} })))
          // Unmapped product.
          ok(yield* deliver(event("active", new Date(Date.now() + 1000), { productId: "prod_unknown" })))
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "team")
          // Another type: acknowledged.
          ok(yield* deliver({ type: "customer.updated", timestamp: new Date().toISOString(), data: {} }))

          // Applied once; its replay (same webhook id) changes nothing although the state moved on meanwhile.
          const id = `msg_${crypto.randomUUID()}`
          const upgrade = event("active", new Date(Date.now() + 2000))
          ok(yield* deliver(upgrade, { id }))
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "business")
          ok(yield* deliver(event("active", new Date(Date.now() + 3000), { productId: "prod_team" })))
          ok(yield* deliver(upgrade, { id }))
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "team")
        }))
    }
  )

  // A server of its own: filling the source's bucket must not refuse the other tests' deliveries.
  layer(testServer(backend), { excludeTestServices: true, timeout: 120_000 })(
    `billing webhook rate limit [${backend}]`,
    (it) => {
      it.effect("the 301st delivery from one source in a minute is 429 rate_limited with Retry-After", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          // Counted before the signature is checked: unsigned deliveries fill the bucket too, and change nothing.
          const unsigned = { type: "customer.updated", timestamp: new Date().toISOString(), data: {} }
          const statuses = yield* Effect.forEach(
            Array.from({ length: 300 }, (_, i) => i),
            () => Effect.map(deliver(unsigned, { headers: {} }), (res) => res.status),
            { concurrency: 8 }
          )
          assert.deepStrictEqual([...new Set(statuses)], [401])
          // a correctly signed delivery is refused too, before it is verified or applied
          const res = yield* deliver(unsigned)
          const error = failed(res, 429, "rate_limited")
          assert.strictEqual(error.details["scope"], "identity")
          const retryAfter = Schema.decodeUnknownSync(Schema.Number)(error.details["retryAfterSeconds"])
          assert.isTrue(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, String(retryAfter))
          assert.strictEqual(res.headers.get("retry-after"), String(retryAfter))
          // billing has a family of its own: the source-control ingress from the same source is not limited
          const scm = yield* call(baseUrl, "POST", "/ingress/scmhost/webhook", {
            body: "{}",
            headers: { "content-type": "application/json" }
          })
          failed(scm, 401, "unauthenticated")
        }))
    }
  )

  for (const [name, url] of [["answers 500", failing.url], ["times out", hanging.url]] as const) {
    layer(testServer(backend, { BILLPROV_API_URL: url, BILLPROV_TIMEOUT_MS: "300" }), {
      excludeTestServices: true,
      timeout: 60_000
    })(`billing provider that ${name} [${backend}]`, (it) => {
      it.effect("the calling route answers 502 provider_unavailable; the webhook path is unaffected", () =>
        Effect.gen(function*() {
          const { api } = yield* newWorld
          failed(yield* api("POST", "/billing/checkout", { planCode: "team" }), 502, "provider_unavailable")
          failed(
            yield* deliver({ type: "subscription.updated", timestamp: "", data: {} }, { headers: {} }),
            401,
            "unauthenticated"
          )
          ok(yield* deliver({ type: "customer.updated", timestamp: new Date().toISOString(), data: {} }))
          assert.strictEqual(summaryOf(yield* api("GET", "/billing/summary")).plan.code, "free")
        }))
    })
  }
}
