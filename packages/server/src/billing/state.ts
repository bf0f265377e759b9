/**
 * How the provider's records become this server's (metering-billing.md §5, spec "subscription (billing)" rows): one
 * subscription or invoice applied inside the caller's transaction, with the order guard, the tenant and plan mapping,
 * the plan assignment (the workspace's entitlements, rewritten in the same transaction) and the billing events. The
 * webhook ingress, reconcile and the period-end sweep all apply changes through here.
 */
import { Entitlement, EntitlementId, Invoice, type OrgId, type Plan, Subscription, SubscriptionId } from "@cp/domain"
import {
  BillingRepo,
  type BillingSubscriptionRow,
  type CustomerRow,
  DEFAULT_PLAN_ID,
  EntitlementsRepo,
  type InvoiceRow,
  PLAN_HOLDING_STATUSES,
  type PlanRow
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { v5 } from "uuid"
import { apiJson, type EventActor, EventLog, type NewEvent, systemActor } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { currentDate } from "../platform/serviceKit.ts"
import type { ProviderInvoice, ProviderSubscription } from "./providerApi.ts"

/** The namespace of entitlement ids (name-based UUIDs of workspace, plan, key and subscription). */
const ENTITLEMENT_NAMESPACE = "6f1c2a52-3c59-4d51-9a7e-0b7f3a1c9e11"

const TERMINAL_STATUSES: ReadonlyArray<string> = ["canceled", "unpaid", "paused"]
export const holdsPlan = (status: string) => (PLAN_HOLDING_STATUSES as ReadonlyArray<string>).includes(status)

/** What applying one provider record did: `applied` with the changes made, or why it changed nothing. */
export type Applied =
  | { readonly _tag: "applied"; readonly changes: ReadonlyArray<string> }
  | { readonly _tag: "ignored"; readonly reason: "unknown_workspace" | "unmapped_product" | "stale" | "unchanged" }

const ignored = (reason: Extract<Applied, { _tag: "ignored" }>["reason"]): Applied => ({ _tag: "ignored", reason })

export const planOf = (row: PlanRow): Plan => ({
  id: row.publicId,
  code: row.code,
  name: row.name,
  description: row.description,
  status: row.status,
  billingInterval: row.billingInterval,
  priceAmountCents: row.priceAmountCents,
  priceCurrency: row.priceCurrency,
  metadata: row.metadata,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

/** The product a plan is sold as at the provider, and whether a checkout may buy it. */
export const productOf = (plan: PlanRow): string | undefined => {
  const product = plan.metadata["providerProductId"]
  return typeof product === "string" ? product : undefined
}
export const isPurchasable = (plan: PlanRow) => plan.metadata["purchasable"] === true && productOf(plan) !== undefined

/** The subscription as the API shows it; its plan by the plan's public id (the stored code references `plans`). */
export const subscriptionOf = (
  row: BillingSubscriptionRow,
  plans: ReadonlyArray<PlanRow>
): Option.Option<Subscription> => {
  const { planCode, providerModifiedAt: _modified, ...rest } = row
  return Option.map(
    Option.fromUndefinedOr(plans.find((plan) => plan.code === planCode)),
    (plan) => ({ ...rest, planId: plan.publicId })
  )
}

export const invoiceOf = ({ providerSubscriptionId: _subscription, ...invoice }: InvoiceRow) => invoice

const date = (iso: string | null) => iso === null ? null : new Date(iso)

export class BillingState extends Context.Service<BillingState, {
  readonly plans: Effect.Effect<ReadonlyArray<PlanRow>>
  /** The workspace's plan and the entitlements it confers, as the API shows them. */
  readonly current: (orgId: OrgId) => Effect.Effect<{
    readonly plan: PlanRow
    readonly subscriptionId: string | null
    readonly entitlements: ReadonlyArray<Entitlement>
  }>
  /** Applies a provider subscription; call inside a transaction. `revoked`: the provider revoked it. */
  readonly applySubscription: (data: ProviderSubscription, revoked: boolean) => Effect.Effect<Applied>
  /** Applies a provider invoice; `failed`: the provider says its payment failed. Inside a transaction. */
  readonly applyInvoice: (data: ProviderInvoice, failed: boolean) => Effect.Effect<Applied>
  /** Ends a stored subscription whose scheduled cancellation is due (the sweep); inside a transaction. */
  readonly endAtPeriodEnd: (row: BillingSubscriptionRow) => Effect.Effect<void>
}>()("@cp/server/billing/BillingState") {
  static readonly layer = Layer.effect(
    BillingState,
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      const entitlements = yield* EntitlementsRepo
      const events = yield* EventLog
      const actor: EventActor = systemActor

      const current = Effect.fnUntraced(function*(orgId: OrgId) {
        const plans = yield* billing.plans
        const assignment = yield* entitlements.assignmentOf(orgId)
        const planCode = Option.match(assignment, { onNone: () => DEFAULT_PLAN_ID, onSome: (a) => a.planId })
        const subscriptionId = Option.match(assignment, { onNone: () => null, onSome: (a) => a.subscriptionId })
        const plan = plans.find((row) => row.code === planCode) ?? plans.find((row) => row.code === DEFAULT_PLAN_ID)
        if (plan === undefined) return yield* Effect.die(new Error("the free plan is missing"))
        const rows = yield* entitlements.forWorkspace(orgId)
        const assignedAt = Option.map(assignment, (a) => a.updatedAt)
        const list: ReadonlyArray<Entitlement> = rows.map((row) => ({
          id: EntitlementId.make(
            v5(`${orgId}:${row.planId}:${row.entitlementKey}:${subscriptionId ?? ""}`, ENTITLEMENT_NAMESPACE)
          ),
          orgId,
          subscriptionId: subscriptionId === null ? null : SubscriptionId.make(subscriptionId),
          entitlementKey: row.entitlementKey,
          valueType: row.valueType,
          enabled: row.enabled,
          limitValue: row.limitValue === null ? null : Number(row.limitValue),
          source: "plan",
          metadata: {},
          createdAt: Option.getOrElse(assignedAt, () => row.createdAt),
          updatedAt: Option.getOrElse(assignedAt, () => row.updatedAt)
        }))
        return { plan, subscriptionId, entitlements: list }
      })

      /** Moves the workspace to `planCode` (held through `subscriptionId`), with `entitlements.updated`. */
      const assign = Effect.fnUntraced(function*(orgId: OrgId, planCode: string, subscriptionId: string | null) {
        const before = yield* current(orgId)
        if (before.plan.code === planCode && before.subscriptionId === subscriptionId) return false
        yield* entitlements.assignPlan({ orgId, planId: planCode, subscriptionId, updatedAt: yield* currentDate })
        const after = yield* current(orgId)
        yield* events.record({
          orgId,
          type: "entitlements.updated",
          actor,
          subject: { kind: "entitlements", id: orgId, name: planCode },
          data: {
            planCode,
            entitlements: after.entitlements.map((entry) => apiJson(Entitlement, entry))
          },
          description: `Entitlements of plan ${planCode} applied`
        })
        return before.plan.code !== planCode
      })

      const subscriptionEvent = (
        type: "subscription.activated" | "subscription.updated" | "subscription.canceled",
        subscription: Subscription,
        planCode: string
      ): NewEvent => ({
        orgId: subscription.orgId,
        type,
        actor,
        subject: { kind: "subscription", id: subscription.id, name: planCode },
        data: { subscription: apiJson(Subscription, subscription), planCode },
        description: `Subscription ${type.slice("subscription.".length)} (${planCode})`
      })

      /** The tenant of a provider record: `metadata.orgId`, else the customer's workspace; both must agree. */
      const customerOf = Effect.fnUntraced(function*(customerId: string, orgId: string | undefined) {
        const customer = yield* billing.findCustomerByProviderId(customerId)
        return Option.filter(customer, (row: CustomerRow) => orgId === undefined || row.orgId === orgId)
      })

      /** Stores `row`, rewrites the plan per the state rules, and records the subscription's event. */
      const store = Effect.fnUntraced(function*(
        row: BillingSubscriptionRow,
        before: Option.Option<BillingSubscriptionRow>
      ) {
        yield* billing.upsertSubscription(row)
        const plans = yield* billing.plans
        const changes: Array<string> = []
        const assigned = yield* current(row.orgId)
        if (holdsPlan(row.status)) {
          if (yield* assign(row.orgId, row.planCode, row.id)) changes.push(`plan ${row.planCode}`)
        } else if (TERMINAL_STATUSES.includes(row.status) && assigned.subscriptionId === row.id) {
          if (yield* assign(row.orgId, DEFAULT_PLAN_ID, null)) changes.push(`plan ${DEFAULT_PLAN_ID}`)
        }
        const wasHolding = Option.match(before, { onNone: () => false, onSome: (b) => holdsPlan(b.status) })
        const wasTerminal = Option.match(before, {
          onNone: () => false,
          onSome: (b) => TERMINAL_STATUSES.includes(b.status)
        })
        const type = holdsPlan(row.status) && !wasHolding
          ? "subscription.activated" as const
          : TERMINAL_STATUSES.includes(row.status) && !wasTerminal
          ? "subscription.canceled" as const
          : "subscription.updated" as const
        const subscription = subscriptionOf(row, plans)
        if (Option.isSome(subscription)) yield* events.record(subscriptionEvent(type, subscription.value, row.planCode))
        changes.unshift(`${type} ${row.providerSubscriptionId}`)
        return changes
      })

      return BillingState.of({
        plans: billing.plans,
        current,
        applySubscription: Effect.fn("BillingState.applySubscription")(function*(data, revoked) {
          const customer = yield* customerOf(data.customerId, data.metadata["orgId"])
          if (Option.isNone(customer)) return ignored("unknown_workspace")
          const plan = (yield* billing.plans).find((row) => productOf(row) === data.productId)
          if (plan === undefined) return ignored("unmapped_product")
          const stored = yield* billing.findSubscriptionForUpdate(data.id)
          const modifiedAt = new Date(data.modifiedAt)
          if (Option.isSome(stored) && stored.value.providerModifiedAt > modifiedAt) return ignored("stale")
          const now = yield* currentDate
          const status = revoked ? "canceled" : data.status
          const row: BillingSubscriptionRow = {
            id: Option.match(stored, { onNone: () => mint.subscription(now.getTime()), onSome: (s) => s.id }),
            orgId: customer.value.orgId,
            billingCustomerId: customer.value.id,
            planCode: plan.code,
            status,
            currentPeriodStart: date(data.currentPeriodStart),
            currentPeriodEnd: date(data.currentPeriodEnd),
            trialEnd: date(data.trialEnd),
            cancelAt: data.cancelAtPeriodEnd && status !== "canceled" ? date(data.currentPeriodEnd) : null,
            canceledAt: date(data.canceledAt) ?? (status === "canceled" ? now : null),
            provider: "billprov",
            providerSubscriptionId: data.id,
            providerModifiedAt: modifiedAt,
            metadata: data.metadata,
            createdAt: Option.match(stored, { onNone: () => now, onSome: (s) => s.createdAt }),
            updatedAt: now
          }
          if (Option.isSome(stored) && sameState(stored.value, row)) return ignored("unchanged")
          return { _tag: "applied", changes: yield* store(row, stored) } satisfies Applied
        }),
        applyInvoice: Effect.fn("BillingState.applyInvoice")(function*(data, failed) {
          const customer = yield* customerOf(data.customerId, undefined)
          if (Option.isNone(customer)) return ignored("unknown_workspace")
          const now = yield* currentDate
          const { invoice, previousStatus } = yield* billing.upsertInvoice({
            id: mint.invoice(now.getTime()),
            orgId: customer.value.orgId,
            providerInvoiceId: data.id,
            providerSubscriptionId: data.subscriptionId,
            number: data.number,
            status: data.status,
            amountDueCents: data.amountDueCents,
            amountPaidCents: data.amountPaidCents,
            currency: data.currency,
            periodStart: date(data.periodStart),
            periodEnd: date(data.periodEnd),
            hostedUrl: data.hostedUrl,
            createdAt: new Date(data.createdAt)
          })
          const type = invoice.status === "paid" && previousStatus !== "paid"
            ? "invoice.paid"
            : failed
            ? "payment.failed"
            : undefined
          if (type === undefined) {
            return previousStatus === invoice.status ? ignored("unchanged") : { _tag: "applied", changes: [] }
          }
          yield* events.record({
            orgId: invoice.orgId,
            type,
            actor,
            subject: { kind: "invoice", id: invoice.id, name: invoice.number },
            data: { invoice: apiJson(Invoice, invoiceOf(invoice)) },
            description: type === "invoice.paid" ? `Invoice ${invoice.number ?? invoice.id} paid` : "Payment failed"
          })
          return { _tag: "applied", changes: [`${type} ${data.id}`] } satisfies Applied
        }),
        endAtPeriodEnd: Effect.fn("BillingState.endAtPeriodEnd")(function*(row) {
          const now = yield* currentDate
          yield* store(
            { ...row, status: "canceled", canceledAt: now, cancelAt: null, updatedAt: now },
            Option.some(row)
          )
        })
      })
    })
  )
}

/** Whether two stored states of a subscription say the same thing (the provider re-sent it). */
const sameState = (a: BillingSubscriptionRow, b: BillingSubscriptionRow) =>
  a.status === b.status && a.planCode === b.planCode && a.cancelAt?.getTime() === b.cancelAt?.getTime() &&
  a.currentPeriodEnd?.getTime() === b.currentPeriodEnd?.getTime() &&
  a.currentPeriodStart?.getTime() === b.currentPeriodStart?.getTime()
