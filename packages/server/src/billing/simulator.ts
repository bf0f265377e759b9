/**
 * The billing provider's simulator (metering-billing.md §4; contract §3), served under `/dev/billprov` in development
 * and test only (production has no such route). It answers the provider API the client speaks, serves a checkout page
 * a person can click through, and announces every state change it makes by a Standard-Webhooks-signed POST to this
 * server's own ingress, as the real provider would. Its records live in this process's memory, like any outside
 * provider's, and are gone on restart.
 */
import { Clock, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import {
  FetchHttpClient,
  HttpClient,
  HttpClientRequest,
  HttpRouter,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { Webhook } from "standardwebhooks"
import { AppConfig } from "../platform/config.ts"
import { newId } from "../platform/ids.ts"
import { selfUrls } from "../platform/selfUrl.ts"
import {
  CheckoutRequest,
  CustomerInput,
  type ProviderCustomer,
  type ProviderInvoice,
  type ProviderPaymentMethod,
  type ProviderSubscription,
  SessionRequest,
  SubscriptionPatch
} from "./providerApi.ts"

/** The simulator's catalogue: the price of each product it sells. */
export const SIMULATED_PRODUCTS: Readonly<Record<string, number>> = { prod_team: 2900, prod_business: 9900 }

interface CheckoutSession {
  readonly id: string
  readonly customerId: string
  readonly productId: string
  readonly successUrl: string
  completed: boolean
}

/** What the simulator holds: the provider's side of every record. */
interface SimulatorState {
  readonly customers: Map<string, ProviderCustomer>
  readonly checkouts: Map<string, CheckoutSession>
  readonly subscriptions: Map<string, ProviderSubscription>
  readonly invoices: Map<string, ProviderInvoice>
  readonly paymentMethods: Map<string, ReadonlyArray<ProviderPaymentMethod>>
}

const iso = (millis: number) => new Date(millis).toISOString()
const addMonth = (millis: number) => {
  const date = new Date(millis)
  return Date.UTC(
    date.getUTCFullYear(),
    date.getUTCMonth() + 1,
    date.getUTCDate(),
    date.getUTCHours(),
    date.getUTCMinutes(),
    date.getUTCSeconds(),
    date.getUTCMilliseconds()
  )
}

const json = (body: unknown, status = 200) => HttpServerResponse.jsonUnsafe(body, { status })
const notFound = () => json({ error: { type: "not_found", message: "No such object" } }, 404)
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const page = (title: string, body: string) =>
  HttpServerResponse.html(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
      `<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto}button{font-size:1.1rem;` +
      `padding:.5rem 1.5rem}</style></head><body>${body}</body></html>`
  )

/** The simulator's state and its webhook sender, one per server process. */
export class BillingSimulator extends Context.Service<BillingSimulator, {
  readonly state: SimulatorState
  /** Signs and POSTs one event to the server's ingress; a refused delivery is logged (the simulator does not retry). */
  readonly send: (type: string, data: unknown) => Effect.Effect<void>
}>()("@cp/server/billing/BillingSimulator") {
  static readonly layer = Layer.effect(
    BillingSimulator,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const http = yield* HttpClient.HttpClient
      const webhook = Option.map(config.billprovWebhookSecret, (secret) => new Webhook(Redacted.value(secret)))
      const ingress = `${(yield* selfUrls).own}/v1/billing/webhooks/billprov`
      const state: SimulatorState = {
        customers: new Map(),
        checkouts: new Map(),
        subscriptions: new Map(),
        invoices: new Map(),
        paymentMethods: new Map()
      }
      const send = Effect.fnUntraced(function*(type: string, data: unknown) {
        if (Option.isNone(webhook)) return
        const now = yield* Clock.currentTimeMillis
        const body = JSON.stringify({ type, timestamp: iso(now), data })
        const id = newId("msg_", now)
        const signature = webhook.value.sign(id, new Date(now), body)
        const status = yield* HttpClientRequest.post(ingress).pipe(
          HttpClientRequest.setHeaders({
            "webhook-id": id,
            "webhook-timestamp": String(Math.floor(now / 1000)),
            "webhook-signature": signature
          }),
          HttpClientRequest.bodyText(body, "application/json"),
          http.execute,
          Effect.map((response) => response.status),
          Effect.orElseSucceed(() => 0)
        )
        if (status < 200 || status > 299) {
          yield* Effect.logWarning("Billing simulator webhook was not accepted").pipe(
            Effect.annotateLogs({ type, status })
          )
        }
      })
      return BillingSimulator.of({ state, send })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}

const bearer = (request: HttpServerRequest.HttpServerRequest) =>
  /^Bearer\s+\S+\s*$/i.test(request.headers.authorization ?? "")

/** The provider's state changes the dev extras and the API make, each announced by its webhooks. */
const simulatorActions = Effect.gen(function*() {
  const { send, state } = yield* BillingSimulator
  const config = yield* AppConfig

  const subscriptionChanged = Effect.fnUntraced(function*(
    id: string,
    change: (subscription: ProviderSubscription, now: number) => ProviderSubscription
  ) {
    const current = state.subscriptions.get(id)
    if (current === undefined) return Option.none<ProviderSubscription>()
    const now = yield* Clock.currentTimeMillis
    const next = { ...change(current, now), modifiedAt: iso(now) }
    state.subscriptions.set(id, next)
    return Option.some(next)
  })

  const invoiceFor = Effect.fnUntraced(function*(subscription: ProviderSubscription, status: "open" | "paid") {
    const now = yield* Clock.currentTimeMillis
    const amount = SIMULATED_PRODUCTS[subscription.productId] ?? 0
    const id = newId("in_", now)
    const invoice: ProviderInvoice = {
      id,
      customerId: subscription.customerId,
      subscriptionId: subscription.id,
      number: `SIM-${String(state.invoices.size + 1).padStart(4, "0")}`,
      status,
      amountDueCents: amount,
      amountPaidCents: status === "paid" ? amount : 0,
      currency: "usd",
      periodStart: subscription.currentPeriodStart,
      periodEnd: subscription.currentPeriodEnd,
      hostedUrl: `${config.publicBaseUrl}/dev/billprov/invoices/${id}`,
      createdAt: iso(now)
    }
    state.invoices.set(id, invoice)
    return invoice
  })

  const pay = (invoice: ProviderInvoice): ProviderInvoice => {
    const paid = { ...invoice, status: "paid" as const, amountPaidCents: invoice.amountDueCents }
    state.invoices.set(invoice.id, paid)
    return paid
  }

  return {
    /** Completes a checkout: the subscription, an open then paid invoice, a card 4242, and their webhooks. */
    complete: Effect.fnUntraced(function*(checkoutId: string) {
      const checkout = state.checkouts.get(checkoutId)
      if (checkout === undefined) return Option.none<ProviderSubscription>()
      const customer = state.customers.get(checkout.customerId)
      if (checkout.completed || customer === undefined) return Option.none<ProviderSubscription>()
      checkout.completed = true
      const now = yield* Clock.currentTimeMillis
      const subscription: ProviderSubscription = {
        id: newId("sub_", now),
        customerId: checkout.customerId,
        productId: checkout.productId,
        status: "active",
        currentPeriodStart: iso(now),
        currentPeriodEnd: iso(addMonth(now)),
        trialEnd: null,
        cancelAtPeriodEnd: false,
        canceledAt: null,
        modifiedAt: iso(now),
        metadata: { orgId: customer.externalId }
      }
      state.subscriptions.set(subscription.id, subscription)
      state.paymentMethods.set(checkout.customerId, [{
        id: newId("pm_", now),
        brand: "visa",
        last4: "4242",
        expMonth: 12,
        expYear: new Date(now).getUTCFullYear() + 3,
        isDefault: true
      }])
      const invoice = pay(yield* invoiceFor(subscription, "open"))
      yield* send("subscription.created", subscription)
      yield* send("invoice.paid", invoice)
      return Option.some(subscription)
    }),
    /** Ends the current period: a scheduled cancellation takes effect, otherwise the subscription renews. */
    advance: Effect.fnUntraced(function*(id: string) {
      const next = yield* subscriptionChanged(id, (subscription, now) =>
        subscription.cancelAtPeriodEnd
          ? { ...subscription, status: "canceled", canceledAt: iso(now) }
          : {
            ...subscription,
            currentPeriodStart: subscription.currentPeriodEnd,
            currentPeriodEnd: iso(addMonth(Date.parse(subscription.currentPeriodEnd ?? iso(now))))
          })
      if (Option.isNone(next)) return next
      if (next.value.status === "canceled") {
        yield* send("subscription.canceled", next.value)
      } else {
        yield* send("subscription.updated", next.value)
        yield* send("invoice.paid", pay(yield* invoiceFor(next.value, "open")))
      }
      return next
    }),
    /** The renewal payment fails: the subscription is `past_due` with an open invoice. */
    failPayment: Effect.fnUntraced(function*(id: string) {
      const next = yield* subscriptionChanged(id, (subscription) => ({ ...subscription, status: "past_due" }))
      if (Option.isNone(next)) return next
      yield* send("subscription.updated", next.value)
      yield* send("invoice.payment_failed", yield* invoiceFor(next.value, "open"))
      return next
    }),
    /** The API's PATCH: a product change or a cancellation at period end, announced by `subscription.updated`. */
    patch: Effect.fnUntraced(function*(id: string, patch: SubscriptionPatch) {
      const next = yield* subscriptionChanged(id, (subscription) =>
        "productId" in patch
          ? { ...subscription, productId: patch.productId }
          : { ...subscription, cancelAtPeriodEnd: true })
      if (Option.isSome(next)) yield* send("subscription.updated", next.value)
      return next
    })
  }
})

/** The simulator's routes, added to the router only outside production. */
export const BillingSimulatorRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  if (!AppConfig.isLocal(config)) return Layer.empty
  return HttpRouter.use(Effect.fnUntraced(function*(router) {
    const { state } = yield* BillingSimulator
    const actions = yield* simulatorActions
    const base = "/dev/billprov"
    const param = (name: string) => Effect.map(HttpRouter.params, (params) => params[name] ?? "")
    /** A provider API route: bearer key required, JSON in and out. */
    const api = (
      method: "GET" | "POST" | "PATCH",
      path: string,
      handler: (
        request: HttpServerRequest.HttpServerRequest
      ) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpRouter.RouteContext>
    ) =>
      router.add(method, `${base}${path}`, (request) =>
        bearer(request)
          ? handler(request)
          : Effect.succeed(json({ error: { type: "unauthorized", message: "Bearer key required" } }, 401)))
    const body = <S extends Schema.Top>(schema: S, request: HttpServerRequest.HttpServerRequest) =>
      Effect.flatMap(request.json, Schema.decodeUnknownEffect(schema)).pipe(Effect.option)
    const customerOf = (request: HttpServerRequest.HttpServerRequest) =>
      new URL(request.url, "http://simulator").searchParams.get("customerId") ?? ""
    const invalid = () => json({ error: { type: "invalid_request", message: "Invalid request body" } }, 400)

    yield* api("POST", "/v1/customers", (request) =>
      Effect.gen(function*() {
        const input = yield* body(CustomerInput, request)
        if (Option.isNone(input)) return invalid()
        const customer = { id: newId("cus_", yield* Clock.currentTimeMillis), ...input.value }
        state.customers.set(customer.id, customer)
        return json(customer)
      }))
    yield* api("POST", "/v1/checkouts", (request) =>
      Effect.gen(function*() {
        const input = yield* body(CheckoutRequest, request)
        if (Option.isNone(input)) return invalid()
        if (!state.customers.has(input.value.customerId) || SIMULATED_PRODUCTS[input.value.productId] === undefined) {
          return notFound()
        }
        const id = newId("cs_", yield* Clock.currentTimeMillis)
        state.checkouts.set(id, { ...input.value, id, completed: false })
        return json({ id, url: `${config.publicBaseUrl}${base}/checkout/${id}` })
      }))
    yield* api("POST", "/v1/customer-sessions", (request) =>
      Effect.gen(function*() {
        const input = yield* body(SessionRequest, request)
        if (Option.isNone(input)) return invalid()
        if (!state.customers.has(input.value.customerId)) return notFound()
        return json({ url: `${config.publicBaseUrl}${base}/portal/${input.value.customerId}` })
      }))
    yield* api("GET", "/v1/subscriptions", (request) =>
      Effect.succeed(
        json({ items: [...state.subscriptions.values()].filter((s) => s.customerId === customerOf(request)) })
      ))
    yield* api("PATCH", "/v1/subscriptions/:id", (request) =>
      Effect.gen(function*() {
        const input = yield* body(SubscriptionPatch, request)
        if (Option.isNone(input)) return invalid()
        const id = yield* param("id")
        if (!state.subscriptions.has(id)) return notFound()
        const patched = state.subscriptions.get(id)
        // The webhook goes out after the answer, as a provider's does.
        yield* Effect.forkDetach(actions.patch(id, input.value))
        return json(
          patched === undefined ? {} : "productId" in input.value
            ? { ...patched, productId: input.value.productId }
            : { ...patched, cancelAtPeriodEnd: true }
        )
      }))
    yield* api("GET", "/v1/invoices", (request) =>
      Effect.succeed(
        json({ items: [...state.invoices.values()].filter((i) => i.customerId === customerOf(request)) })
      ))
    yield* api(
      "GET",
      "/v1/payment-methods",
      (request) => Effect.succeed(json({ items: state.paymentMethods.get(customerOf(request)) ?? [] }))
    )

    // The dev extras: no credentials, like the dev outbox.
    yield* router.add("GET", `${base}/checkout/:id`, () =>
      Effect.gen(function*() {
        const checkout = state.checkouts.get(yield* param("id"))
        if (checkout === undefined) return notFound()
        const price = ((SIMULATED_PRODUCTS[checkout.productId] ?? 0) / 100).toFixed(2)
        return page(
          "Checkout",
          checkout.completed
            ? `<h1>Checkout complete</h1><p><a href="${escapeHtml(checkout.successUrl)}">Return</a></p>`
            : `<h1>Subscribe to ${escapeHtml(checkout.productId)}</h1><p>$${price} per month, card 4242 4242 ` +
              `4242 4242 (simulated).</p><form method="post" action="${base}/checkout/${escapeHtml(checkout.id)}` +
              `/complete"><button type="submit">Pay</button></form>`
        )
      }))
    yield* router.add("POST", `${base}/checkout/:id/complete`, (request) =>
      Effect.gen(function*() {
        const id = yield* param("id")
        const subscription = yield* actions.complete(id)
        const fromForm = (request.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")
        if (Option.isNone(subscription)) {
          return fromForm ? page("Checkout", "<h1>This checkout cannot be completed</h1>") : notFound()
        }
        const successUrl = state.checkouts.get(id)?.successUrl ?? "/"
        return fromForm
          ? page(
            "Payment complete",
            `<h1>Payment complete</h1><p id="subscription">${escapeHtml(subscription.value.id)}</p>` +
              `<p><a href="${escapeHtml(successUrl)}">Return</a></p>`
          )
          : json({ subscription: subscription.value })
      }))
    yield* router.add("GET", `${base}/portal/:customerId`, () =>
      Effect.gen(function*() {
        const customerId = yield* param("customerId")
        const customer = state.customers.get(customerId)
        if (customer === undefined) return notFound()
        const rows = [...state.subscriptions.values()].filter((s) => s.customerId === customerId)
          .map((s) => `<li>${escapeHtml(s.id)}: ${escapeHtml(s.productId)} (${s.status})</li>`).join("")
        return page("Billing portal", `<h1>${escapeHtml(customer.name)}</h1><ul>${rows}</ul>`)
      }))
    for (
      const [path, action] of [["advance", actions.advance], ["fail-payment", actions.failPayment]] as const
    ) {
      yield* router.add("POST", `${base}/subscriptions/:id/${path}`, () =>
        Effect.gen(function*() {
          const subscription = yield* action(yield* param("id"))
          return Option.isNone(subscription) ? notFound() : json({ subscription: subscription.value })
        }))
    }
  }))
}))
