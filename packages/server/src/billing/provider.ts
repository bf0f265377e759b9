/**
 * `BillingProvider` (metering-billing.md §4): the one way billing talks to the provider, an HTTP client of its API at
 * `BILLPROV_API_URL` with bearer `BILLPROV_API_KEY`. In development and test without a URL it talks to this server's
 * own simulator under `/dev/billprov`, over real HTTP; in production without one, billing is not configured. Each call
 * times out after `BILLPROV_TIMEOUT_MS` (10 s) and is retried twice with backoff; any fault is `ProviderFailure`.
 */
import { Context, Data, Duration, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { AppConfig } from "../platform/config.ts"
import { selfUrls } from "../platform/selfUrl.ts"
import {
  CheckoutAnswer,
  type CheckoutRequest,
  ItemsOf,
  ProviderCustomer,
  ProviderInvoice,
  ProviderPaymentMethod,
  ProviderSubscription,
  SessionAnswer,
  type SubscriptionPatch
} from "./providerApi.ts"

/** The provider timed out, was unreachable, or answered something other than a 2xx of its shape. */
export class ProviderFailure extends Data.TaggedError("ProviderFailure")<{ readonly reason: string }> {}

/** Production without `BILLPROV_API_URL`: there is no provider to call. */
export class BillingNotConfigured extends Data.TaggedError("BillingNotConfigured")<{}> {}

export type ProviderError = ProviderFailure | BillingNotConfigured

/** Retries after the first attempt (§6: "retried twice with backoff"). */
const RETRIES = 2
const RETRY_BASE = Duration.millis(200)

export class BillingProvider extends Context.Service<BillingProvider, {
  readonly createCustomer: (
    input: { readonly email: string; readonly name: string; readonly externalId: string }
  ) => Effect.Effect<ProviderCustomer, ProviderError>
  readonly createCheckout: (
    input: CheckoutRequest
  ) => Effect.Effect<{ readonly id: string; readonly url: string }, ProviderError>
  readonly createCustomerSession: (
    input: { readonly customerId: string; readonly returnUrl: string }
  ) => Effect.Effect<{ readonly url: string }, ProviderError>
  readonly subscriptions: (customerId: string) => Effect.Effect<ReadonlyArray<ProviderSubscription>, ProviderError>
  readonly updateSubscription: (
    id: string,
    patch: SubscriptionPatch
  ) => Effect.Effect<ProviderSubscription, ProviderError>
  readonly invoices: (customerId: string) => Effect.Effect<ReadonlyArray<ProviderInvoice>, ProviderError>
  readonly paymentMethods: (customerId: string) => Effect.Effect<ReadonlyArray<ProviderPaymentMethod>, ProviderError>
}>()("@cp/server/billing/BillingProvider") {
  static readonly layer = Layer.effect(
    BillingProvider,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const ownUrl = (yield* selfUrls).own
      const baseUrl: Option.Option<string> = Option.orElse(
        config.billprovApiUrl,
        () => AppConfig.isLocal(config) ? Option.some(`${ownUrl}/dev/billprov`) : Option.none()
      )
      const http = (yield* HttpClient.HttpClient).pipe(
        HttpClient.mapRequest((request) =>
          request.pipe(
            HttpClientRequest.acceptJson,
            HttpClientRequest.bearerToken(Redacted.value(config.billprovApiKey))
          )
        )
      )
      const timeout = Duration.millis(config.billprovTimeoutMs)

      /** One call: the request, its answer decoded, within the timeout, retried; never logs a key or a body. */
      const call = <S extends Schema.Top>(
        name: string,
        build: (base: string) => Effect.Effect<HttpClientRequest.HttpClientRequest, unknown>,
        answer: S
      ): Effect.Effect<S["Type"], ProviderError, S["DecodingServices"]> =>
        Option.match(baseUrl, {
          onNone: () => Effect.fail(new BillingNotConfigured()),
          onSome: (base) =>
            build(base).pipe(
              Effect.flatMap(http.execute),
              Effect.flatMap((response): Effect.Effect<S["Type"], unknown, S["DecodingServices"]> =>
                response.status >= 200 && response.status < 300
                  ? HttpClientResponse.schemaBodyJson(answer)(response)
                  : Effect.fail(new ProviderFailure({ reason: `status ${response.status}` }))
              ),
              Effect.timeoutOrElse({
                duration: timeout,
                orElse: () => Effect.fail(new ProviderFailure({ reason: "timed out" }))
              }),
              Effect.mapError((error) =>
                error instanceof ProviderFailure ? error : new ProviderFailure({ reason: "unreachable or malformed" })
              ),
              Effect.retry({ schedule: Schedule.exponential(RETRY_BASE), times: RETRIES }),
              Effect.tapError((error) =>
                Effect.logWarning("Billing provider call failed").pipe(
                  Effect.annotateLogs({ call: name, reason: error.reason })
                )
              ),
              Effect.withSpan(`BillingProvider.${name}`)
            )
        })

      const post = (path: string, body: unknown) => (base: string) =>
        HttpClientRequest.bodyJson(HttpClientRequest.post(`${base}${path}`), body)
      const get = (path: string) => (base: string) => Effect.succeed(HttpClientRequest.get(`${base}${path}`))
      const query = (customerId: string) => `?customerId=${encodeURIComponent(customerId)}`

      return BillingProvider.of({
        createCustomer: (input) => call("createCustomer", post("/v1/customers", input), ProviderCustomer),
        createCheckout: (input) => call("createCheckout", post("/v1/checkouts", input), CheckoutAnswer),
        createCustomerSession: (input) =>
          call("createCustomerSession", post("/v1/customer-sessions", input), SessionAnswer),
        subscriptions: (customerId) =>
          Effect.map(
            call("subscriptions", get(`/v1/subscriptions${query(customerId)}`), ItemsOf(ProviderSubscription)),
            ({ items }) => items
          ),
        updateSubscription: (id, patch) =>
          call(
            "updateSubscription",
            (base) =>
              HttpClientRequest.bodyJson(
                HttpClientRequest.patch(`${base}/v1/subscriptions/${encodeURIComponent(id)}`),
                patch
              ),
            ProviderSubscription
          ),
        invoices: (customerId) =>
          Effect.map(
            call("invoices", get(`/v1/invoices${query(customerId)}`), ItemsOf(ProviderInvoice)),
            ({ items }) => items
          ),
        paymentMethods: (customerId) =>
          Effect.map(
            call("paymentMethods", get(`/v1/payment-methods${query(customerId)}`), ItemsOf(ProviderPaymentMethod)),
            ({ items }) => items
          )
      })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}
