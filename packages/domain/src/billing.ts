/**
 * Billing (spec: Billing resources and endpoints, Authentication §8, "subscription (billing)" states;
 * metering-billing.md §4–6): plans, the workspace's customer and subscription at the billing provider, the
 * entitlements its plan confers, invoices and payment methods, checkout and portal links, plan changes and
 * cancellation (intent only: the provider's webhook is authoritative), reconcile, and the provider's inbound webhook.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { NotFound, PreconditionFailed, ProviderUnavailable, RateLimited, Unauthenticated } from "./errors.ts"
import { BillingCustomerId, EntitlementId, InvoiceId, OrgId, PlanId, SubscriptionId } from "./ids.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Text } from "./text.ts"
import { Envelope, maxBodyBytes, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** The one billing provider this server talks to (metering-billing.md §4). */
export const BILLING_PROVIDER = "billprov"

/** Free-form JSON metadata of a billing object. */
export const BillingMetadata = Schema.Record(Schema.String, Schema.Json)
export type BillingMetadata = typeof BillingMetadata.Type

/** A plan code: lowercase letters, digits, `_` and `-`. */
export const PlanCode = Schema.String.annotate({ description: "A plan code, e.g. `team`" }).check(
  Schema.isPattern(/^[a-z][a-z0-9_-]{0,62}$/u, { message: "must be a plan code" })
)

export const Plan = Schema.Struct({
  id: PlanId,
  code: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  status: Schema.Literals(["active", "retired"]),
  billingInterval: Schema.Literals(["month", "year"]),
  priceAmountCents: Schema.Number,
  priceCurrency: Schema.String,
  metadata: BillingMetadata,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Plan = typeof Plan.Type

export const BillingCustomer = Schema.Struct({
  id: BillingCustomerId,
  orgId: OrgId,
  displayName: Schema.String,
  email: Schema.String,
  status: Schema.Literals(["active"]),
  provider: Schema.String,
  providerCustomerId: Schema.String,
  metadata: BillingMetadata,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type BillingCustomer = typeof BillingCustomer.Type

/** The provider's subscription states (metering-billing.md §4). */
export const SubscriptionStatus = Schema.Literals([
  "incomplete",
  "trialing",
  "active",
  "past_due",
  "canceled",
  "unpaid",
  "paused"
])
export type SubscriptionStatus = typeof SubscriptionStatus.Type

export const Subscription = Schema.Struct({
  id: SubscriptionId,
  orgId: OrgId,
  billingCustomerId: BillingCustomerId,
  planId: PlanId,
  status: SubscriptionStatus,
  currentPeriodStart: Schema.NullOr(Timestamp),
  currentPeriodEnd: Schema.NullOr(Timestamp),
  trialEnd: Schema.NullOr(Timestamp),
  cancelAt: Schema.NullOr(Timestamp),
  canceledAt: Schema.NullOr(Timestamp),
  provider: Schema.String,
  providerSubscriptionId: Schema.String,
  metadata: BillingMetadata,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Subscription = typeof Subscription.Type

export const Entitlement = Schema.Struct({
  id: EntitlementId,
  orgId: OrgId,
  subscriptionId: Schema.NullOr(SubscriptionId),
  entitlementKey: Schema.String,
  valueType: Schema.Literals(["quantity", "boolean"]),
  enabled: Schema.Boolean,
  limitValue: Schema.NullOr(Schema.Number),
  source: Schema.Literals(["plan"]),
  metadata: BillingMetadata,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Entitlement = typeof Entitlement.Type

export const InvoiceStatus = Schema.Literals(["draft", "open", "paid", "void", "uncollectible"])
export type InvoiceStatus = typeof InvoiceStatus.Type

export const Invoice = Schema.Struct({
  id: InvoiceId,
  orgId: OrgId,
  providerInvoiceId: Schema.String,
  number: Schema.NullOr(Schema.String),
  status: InvoiceStatus,
  amountDueCents: Schema.Number,
  amountPaidCents: Schema.Number,
  currency: Schema.String,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  hostedUrl: Schema.NullOr(Schema.String),
  createdAt: Timestamp
})
export type Invoice = typeof Invoice.Type

/** A saved card, display-safe fields only. */
export const PaymentMethod = Schema.Struct({
  id: Schema.String,
  brand: Schema.String,
  last4: Schema.String,
  expMonth: Schema.Number,
  expYear: Schema.Number,
  isDefault: Schema.Boolean
})
export type PaymentMethod = typeof PaymentMethod.Type

export const BillingSummary = Schema.Struct({
  customer: Schema.NullOr(BillingCustomer),
  activeSubscription: Schema.NullOr(Subscription),
  plan: Plan,
  entitlements: Schema.Array(Entitlement)
})
export type BillingSummary = typeof BillingSummary.Type

/**
 * A checkout request. `embedOrigin` and `returnPath` are free text here: malformed values are ignored, not refused
 * (spec: "malformed optional values are ignored").
 */
export const CheckoutInput = Schema.Struct({
  planCode: Text.annotate({ description: "The purchasable plan to buy" }),
  embedOrigin: Schema.optionalKey(Schema.Unknown.annotate({ description: "An https origin embedding the checkout" })),
  returnPath: Schema.optionalKey(Schema.Unknown.annotate({ description: "A root-relative path to return to" }))
})
export type CheckoutInput = typeof CheckoutInput.Type

export const Checkout = Schema.Struct({
  checkoutUrl: Schema.String,
  mode: Schema.Literals(["checkout", "portal"])
})
export type Checkout = typeof Checkout.Type

export const PlanChangeInput = Schema.Struct({
  planCode: Text.annotate({ description: "The purchasable plan to change to" })
})
export type PlanChangeInput = typeof PlanChangeInput.Type

export const ReconcileResult = Schema.Struct({
  reconciled: Schema.Boolean,
  reason: Schema.optionalKey(Schema.Literals(["in_sync", "no_customer", "provider_unavailable"])),
  changes: Schema.optionalKey(Schema.Array(Schema.String))
})
export type ReconcileResult = typeof ReconcileResult.Type

const orgParams = { orgId: OrgRef }
const billingPath = "/v1/organizations/:orgId/billing"

export class BillingApi extends HttpApiGroup.make("billing")
  .add(
    HttpApiEndpoint.get("plans", `${billingPath}/plans`, {
      params: orgParams,
      success: Envelope({ plans: Schema.Array(Plan) })
    }).annotateMerge(doc("List plans", "Every plan, in price order.")).annotateMerge(
      requires.permission("billing.read")
    ),
    HttpApiEndpoint.get("customer", `${billingPath}/customer`, {
      params: orgParams,
      success: Envelope({ customer: BillingCustomer }),
      error: NotFound
    }).annotateMerge(
      doc("Get the billing customer", "Created at the provider by the first checkout; 404 before that.")
    ).annotateMerge(requires.permission("billing.read")),
    HttpApiEndpoint.get("summary", `${billingPath}/summary`, {
      params: orgParams,
      success: Envelope(BillingSummary.fields)
    }).annotateMerge(
      doc("Get the billing summary", "The customer, the active subscription, the plan and its entitlements.")
    ).annotateMerge(requires.permission("billing.read")),
    HttpApiEndpoint.get("invoices", `${billingPath}/invoices`, {
      params: orgParams,
      query: PageQuery,
      success: Page({ invoices: Schema.Array(Invoice) })
    }).annotateMerge(doc("List invoices", "Newest first.")).annotateMerge(requires.permission("billing.read")),
    HttpApiEndpoint.get("entitlements", `${billingPath}/entitlements`, {
      params: orgParams,
      success: Envelope({ entitlements: Schema.Array(Entitlement) })
    }).annotateMerge(doc("List effective entitlements", "Those of the workspace's plan.")).annotateMerge(
      requires.permission("billing.read")
    ),
    HttpApiEndpoint.get("paymentMethods", `${billingPath}/payment-methods`, {
      params: orgParams,
      success: Envelope({ paymentMethods: Schema.Array(PaymentMethod) }),
      error: ProviderUnavailable
    }).annotateMerge(
      doc("List payment methods", "Saved cards as the provider holds them, display-safe fields only.")
    ).annotateMerge(requires.permission("billing.read")),
    HttpApiEndpoint.post("checkout", `${billingPath}/checkout`, {
      params: orgParams,
      payload: CheckoutInput,
      success: Envelope(Checkout.fields),
      error: [PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(
      doc(
        "Start a checkout",
        "A hosted checkout URL for a purchasable plan (`mode: checkout`), or a portal URL when an active " +
          "subscription exists (`mode: portal`). The plan changes when the provider's webhook arrives."
      )
    ).annotateMerge(requires.permission("billing.manage")),
    HttpApiEndpoint.post("portal", `${billingPath}/portal`, {
      params: orgParams,
      success: Envelope({ portalUrl: Schema.String }),
      error: [PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(doc("Open the customer portal", "412 `no_customer` before the first checkout.")).annotateMerge(
      requires.permission("billing.manage")
    ),
    HttpApiEndpoint.post("change", `${billingPath}/subscription/change`, {
      params: orgParams,
      payload: PlanChangeInput,
      success: Envelope({ changed: Schema.Literal(true) }),
      error: [PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(
      doc("Change the plan", "Asks the provider to move the active subscription to another purchasable plan.")
    ).annotateMerge(requires.permission("billing.manage")),
    HttpApiEndpoint.post("cancel", `${billingPath}/subscription/cancel`, {
      params: orgParams,
      success: Envelope({ cancelAtPeriodEnd: Schema.Literal(true) }),
      error: [PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(
      doc("Cancel the subscription", "At the end of the current period; the plan is kept until then.")
    ).annotateMerge(requires.permission("billing.manage")),
    HttpApiEndpoint.post("reconcile", `${billingPath}/reconcile`, {
      params: orgParams,
      success: Envelope(ReconcileResult.fields)
    }).annotateMerge(
      doc(
        "Reconcile with the provider",
        "Applies the provider's subscriptions and invoices as if their webhooks had arrived; " +
          "`reconciled: false` with a reason is a normal outcome."
      )
    ).annotateMerge(requires.permission("billing.manage"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Billing", description: "Plans, subscription, invoices, checkout" }))
{}

/** The largest inbound billing webhook body. */
export const BILLING_WEBHOOK_MAX_BYTES = 256 * 1024

/**
 * The provider's inbound webhook. The body is taken as raw text (never parsed by the router, never re-serialized) so
 * the Standard Webhooks signature is checked over the exact bytes before anything reads it.
 */
export class BillingWebhooksApi extends HttpApiGroup.make("billingWebhooks")
  .add(
    HttpApiEndpoint.post("billprov", "/v1/billing/webhooks/billprov", {
      payload: Schema.String.pipe(HttpApiSchema.asText({ contentType: "application/json" })),
      success: Envelope({ received: Schema.Literal(true) }),
      error: [Unauthenticated, RateLimited]
    }).annotateMerge(
      doc(
        "Receive a billing provider webhook",
        "Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` (or their `x-billprov-` " +
          "aliases), an HMAC-SHA256 over the raw body; a bad, missing or stale signature is 401 and changes nothing; " +
          "300 deliveries a minute per source address, then 429 with `Retry-After`."
      )
    ).annotateMerge(requires.none).annotateMerge(maxBodyBytes(BILLING_WEBHOOK_MAX_BYTES))
  )
  .annotateMerge(OpenApi.annotations({ title: "Billing webhooks", description: "Inbound billing provider webhooks" }))
{}
