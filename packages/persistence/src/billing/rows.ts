/** The stored shapes of the billing area: plans, customers, subscriptions, invoices, webhook receipts. */
import { BillingCustomer, Invoice, Plan, Subscription } from "@cp/domain/billing"
import { OrgId } from "@cp/domain/ids"
import { Schema, Struct } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/** A row of `plans`: its key is the code; the wire id is `publicId`. */
export const PlanRow = Schema.Struct({
  ...Struct.omit(storedFields(Plan.fields), ["id"]),
  publicId: Plan.fields.id
})
export type PlanRow = typeof PlanRow.Type

export const CustomerRow = Schema.Struct(storedFields(BillingCustomer.fields))
export type CustomerRow = typeof CustomerRow.Type

/**
 * A row of `billing_subscriptions`: the plan by its code (the `plans` key), and the provider's `modifiedAt` of the
 * last state applied, which orders the provider's events.
 */
export const BillingSubscriptionRow = Schema.Struct({
  ...Struct.omit(storedFields(Subscription.fields), ["planId"]),
  planCode: Schema.String,
  providerModifiedAt: Schema.Date
})
export type BillingSubscriptionRow = typeof BillingSubscriptionRow.Type

export const InvoiceRow = Schema.Struct({
  ...storedFields(Invoice.fields),
  providerSubscriptionId: Schema.NullOr(Schema.String)
})
export type InvoiceRow = typeof InvoiceRow.Type

/** An invoice upsert's answer: the row as stored, and its status before (null when the call created it). */
export interface UpsertedInvoice {
  readonly invoice: InvoiceRow
  readonly previousStatus: string | null
}

export const InvoicesPage = Schema.Struct({ orgId: OrgId, ...pageFields })
export type InvoicesPage = typeof InvoicesPage.Type

/** A webhook id seen, at `at`; `outcome` says what its event did (applied, or why it changed nothing). */
export const WebhookReceipt = Schema.Struct({
  webhookId: Schema.String,
  eventType: Schema.String,
  orgId: Schema.NullOr(OrgId),
  outcome: Schema.String,
  receivedAt: Schema.Date
})
export type WebhookReceipt = typeof WebhookReceipt.Type

/** Subscriptions whose scheduled cancellation is due at `now`, at most `limit`. */
export const DueCancellations = Schema.Struct({ now: Schema.Date, limit: Schema.Number })
export type DueCancellations = typeof DueCancellations.Type
