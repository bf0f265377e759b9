/**
 * The billing provider's inbound webhook (metering-billing.md §5; spec Authentication §8): Standard Webhooks over the
 * raw body, verified before anything parses it (401 `unauthenticated` otherwise, nothing changes); then, in one
 * transaction, the `webhook-id` is recorded (a repeat changes nothing) and the event applied through `BillingState`.
 */
import { BadRequest, Unauthenticated, wireError } from "@cp/domain"
import { BillingRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { Webhook } from "standardwebhooks"
import { AppConfig } from "../platform/config.ts"
import { currentDate } from "../platform/serviceKit.ts"
import {
  InvoiceEvent,
  InvoiceEventTypes,
  SubscriptionEvent,
  SubscriptionEventTypes,
  WebhookEnvelope
} from "./providerApi.ts"
import { type Applied, BillingState } from "./state.ts"

/** A signature header, also accepted under its `x-billprov-` alias. */
const headerOf = (headers: Readonly<Record<string, string | undefined>>, name: "id" | "timestamp" | "signature") =>
  headers[`webhook-${name}`] ?? headers[`x-billprov-${name}`]

const unauthenticated = () => wireError(Unauthenticated, "The webhook signature is missing, invalid or stale")

export class BillingWebhooks extends Context.Service<BillingWebhooks, {
  /** Verifies and applies one delivery: `headers` as received (lower-case names), `body` the raw text. */
  readonly receive: (
    headers: Readonly<Record<string, string | undefined>>,
    body: string
  ) => Effect.Effect<{ readonly received: true }, Unauthenticated | BadRequest>
}>()("@cp/server/billing/BillingWebhooks") {
  static readonly layer = Layer.effect(
    BillingWebhooks,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const billing = yield* BillingRepo
      const state = yield* BillingState
      const tx = yield* Transactor
      const verifier = Option.map(config.billprovWebhookSecret, (secret) => new Webhook(Redacted.value(secret)))

      const verify = (headers: Readonly<Record<string, string | undefined>>, body: string) => {
        const id = headerOf(headers, "id")
        const timestamp = headerOf(headers, "timestamp")
        const signature = headerOf(headers, "signature")
        if (Option.isNone(verifier) || id === undefined || timestamp === undefined || signature === undefined) {
          return Effect.fail(unauthenticated())
        }
        return Effect.try({
          try: () =>
            verifier.value.verify(body, {
              "webhook-id": id,
              "webhook-timestamp": timestamp,
              "webhook-signature": signature
            }, { jsonParse: false }),
          catch: unauthenticated
        }).pipe(Effect.as(id))
      }

      return BillingWebhooks.of({
        receive: Effect.fn("BillingWebhooks.receive")(function*(headers, body) {
          const webhookId = yield* verify(headers, body)
          const envelope = yield* Schema.decodeUnknownEffect(Schema.fromJsonString(WebhookEnvelope))(body).pipe(
            Effect.mapError(() => wireError(BadRequest, "The webhook body is not a provider event"))
          )
          const malformed = () => wireError(BadRequest, `The ${envelope.type} event's data is malformed`)
          const isInvoice = (InvoiceEventTypes as ReadonlyArray<string>).includes(envelope.type)
          const isSubscription = (SubscriptionEventTypes as ReadonlyArray<string>).includes(envelope.type)
          let apply: Option.Option<Effect.Effect<Applied>> = Option.none()
          if (isInvoice) {
            const e = yield* Schema.decodeUnknownEffect(InvoiceEvent)(envelope).pipe(Effect.mapError(malformed))
            apply = Option.some(state.applyInvoice(e.data, e.type === "invoice.payment_failed"))
          } else if (isSubscription) {
            const e = yield* Schema.decodeUnknownEffect(SubscriptionEvent)(envelope).pipe(Effect.mapError(malformed))
            apply = Option.some(state.applySubscription(e.data, e.type === "subscription.revoked"))
          }
          const receivedAt = yield* currentDate
          const outcome = yield* tx.withTransaction(Effect.gen(function*() {
            const receipt = { webhookId, eventType: envelope.type, orgId: null, outcome: "received", receivedAt }
            if (!(yield* billing.recordReceipt(receipt))) return "duplicate"
            if (Option.isNone(apply)) {
              yield* billing.finishReceipt({ ...receipt, outcome: "ignored_type" })
              return "ignored_type"
            }
            const applied = yield* apply.value
            const outcome = applied._tag === "applied" ? "applied" : applied.reason
            yield* billing.finishReceipt({ ...receipt, outcome })
            return outcome
          }))
          yield* Effect.logInfo("Billing webhook received").pipe(
            Effect.annotateLogs({ webhookId, type: envelope.type, outcome })
          )
          return { received: true as const }
        })
      })
    })
  )
}
