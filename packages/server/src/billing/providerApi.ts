/**
 * The billing provider's API shapes (metering-billing.md §4), shared by the client (`provider.ts`) and the simulator
 * (`simulator.ts`), so both speak exactly the same JSON.
 */
import { InvoiceStatus, PaymentMethod, SubscriptionStatus } from "@cp/domain"
import { Schema } from "effect"

/** Provider timestamps: ISO 8601 UTC strings with milliseconds. */
const ProviderTime = Schema.String.check(Schema.isPattern(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/u))

export const ProviderCustomer = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  externalId: Schema.String
})
export type ProviderCustomer = typeof ProviderCustomer.Type

export const ProviderSubscription = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  productId: Schema.String,
  status: SubscriptionStatus,
  currentPeriodStart: Schema.NullOr(ProviderTime),
  currentPeriodEnd: Schema.NullOr(ProviderTime),
  trialEnd: Schema.NullOr(ProviderTime),
  cancelAtPeriodEnd: Schema.Boolean,
  canceledAt: Schema.NullOr(ProviderTime),
  modifiedAt: ProviderTime,
  metadata: Schema.Record(Schema.String, Schema.String)
})
export type ProviderSubscription = typeof ProviderSubscription.Type

export const ProviderInvoice = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  subscriptionId: Schema.NullOr(Schema.String),
  number: Schema.NullOr(Schema.String),
  status: InvoiceStatus,
  amountDueCents: Schema.Number,
  amountPaidCents: Schema.Number,
  currency: Schema.String,
  periodStart: Schema.NullOr(ProviderTime),
  periodEnd: Schema.NullOr(ProviderTime),
  hostedUrl: Schema.NullOr(Schema.String),
  createdAt: ProviderTime
})
export type ProviderInvoice = typeof ProviderInvoice.Type

export const ProviderPaymentMethod = PaymentMethod
export type ProviderPaymentMethod = typeof ProviderPaymentMethod.Type

export const CustomerInput = Schema.Struct({ email: Schema.String, name: Schema.String, externalId: Schema.String })
export const CheckoutRequest = Schema.Struct({
  customerId: Schema.String,
  productId: Schema.String,
  successUrl: Schema.String,
  embedOrigin: Schema.optionalKey(Schema.String)
})
export type CheckoutRequest = typeof CheckoutRequest.Type
export const CheckoutAnswer = Schema.Struct({ id: Schema.String, url: Schema.String })
export const SessionRequest = Schema.Struct({ customerId: Schema.String, returnUrl: Schema.String })
export const SessionAnswer = Schema.Struct({ url: Schema.String })
export const SubscriptionPatch = Schema.Union([
  Schema.Struct({ productId: Schema.String }),
  Schema.Struct({ cancelAtPeriodEnd: Schema.Literal(true) })
])
export type SubscriptionPatch = typeof SubscriptionPatch.Type
export const ItemsOf = <S extends Schema.Top>(item: S) => Schema.Struct({ items: Schema.Array(item) })

/** The inbound webhook body (§5): subscription events carry a subscription, invoice events an invoice. */
export const SubscriptionEventTypes = [
  "subscription.created",
  "subscription.updated",
  "subscription.canceled",
  "subscription.revoked"
] as const
export const InvoiceEventTypes = ["invoice.paid", "invoice.payment_failed"] as const

export const WebhookEnvelope = Schema.Struct({ type: Schema.String, timestamp: Schema.String, data: Schema.Unknown })
export const SubscriptionEvent = Schema.Struct({
  type: Schema.Literals(SubscriptionEventTypes),
  timestamp: Schema.String,
  data: ProviderSubscription
})
export const InvoiceEvent = Schema.Struct({
  type: Schema.Literals(InvoiceEventTypes),
  timestamp: Schema.String,
  data: ProviderInvoice
})
