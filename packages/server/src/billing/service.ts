/**
 * Billing (spec: Billing; metering-billing.md §4–6): plans, the workspace's customer, summary, entitlements, invoices
 * and payment methods; checkout, portal, plan change and cancellation, which only ask the provider (its webhook is
 * authoritative); and reconcile, which applies the provider's records as if their webhooks had arrived. A provider
 * fault is 502 `provider_unavailable`; production without a provider is 412 `billing_not_configured` on writes.
 */
import {
  type Actor,
  type BillingCustomer,
  type BillingSummary,
  type Checkout,
  type CheckoutInput,
  type Entitlement,
  type Invoice,
  NotFound,
  type PaymentMethod,
  type Plan,
  type PlanChangeInput,
  PreconditionFailed,
  ProviderUnavailable,
  type ReconcileResult,
  type ResolvedWorkspace,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import type { Paged } from "@cp/domain"
import { BillingRepo, idPosition, Transactor, UsersRepo } from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../platform/config.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { BillingProvider, type ProviderError, type ProviderFailure } from "./provider.ts"
import { BillingState, invoiceOf, isPurchasable, planOf, productOf, subscriptionOf } from "./state.ts"

const unavailable = (error: ProviderFailure) =>
  wireError(ProviderUnavailable, "The billing provider is unavailable; retry later", { reason: error.reason })

/** A provider fault as the calling route answers it (never 500). */
const providerError = (error: ProviderError) =>
  error._tag === "BillingNotConfigured"
    ? wireError(PreconditionFailed, "Billing is not configured on this server", { reason: "billing_not_configured" })
    : unavailable(error)

const precondition = (reason: string, message: string) => wireError(PreconditionFailed, message, { reason })

/** `embedOrigin` is used only when it is an `https://` origin (nothing after the host). */
const httpsOrigin = (value: unknown): string | undefined => {
  if (typeof value !== "string" || !/^https:\/\/[^/?#\s]+$/u.test(value)) return undefined
  try {
    return new URL(value).origin === value ? value : undefined
  } catch {
    return undefined
  }
}

/** `returnPath` is used only when it starts with a single `/`. */
const rootRelative = (value: unknown): string | undefined =>
  typeof value === "string" && /^\/(?![/\\])[^\s]*$/u.test(value) ? value : undefined

type WriteError = PreconditionFailed | ProviderUnavailable

export class BillingService extends Context.Service<BillingService, {
  readonly plans: () => Effect.Effect<{ readonly plans: ReadonlyArray<Plan> }>
  readonly customer: (workspace: ResolvedWorkspace) => Effect.Effect<{ readonly customer: BillingCustomer }, NotFound>
  readonly summary: (workspace: ResolvedWorkspace) => Effect.Effect<BillingSummary>
  readonly entitlements: (
    workspace: ResolvedWorkspace
  ) => Effect.Effect<{ readonly entitlements: ReadonlyArray<Entitlement> }>
  readonly invoices: (
    workspace: ResolvedWorkspace,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly invoices: ReadonlyArray<Invoice> }>, ValidationFailed>
  readonly paymentMethods: (
    workspace: ResolvedWorkspace
  ) => Effect.Effect<{ readonly paymentMethods: ReadonlyArray<PaymentMethod> }, ProviderUnavailable>
  readonly checkout: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: CheckoutInput
  ) => Effect.Effect<Checkout, ValidationFailed | WriteError>
  readonly portal: (workspace: ResolvedWorkspace) => Effect.Effect<{ readonly portalUrl: string }, WriteError>
  readonly change: (
    workspace: ResolvedWorkspace,
    input: PlanChangeInput
  ) => Effect.Effect<{ readonly changed: true }, ValidationFailed | WriteError>
  readonly cancel: (workspace: ResolvedWorkspace) => Effect.Effect<{ readonly cancelAtPeriodEnd: true }, WriteError>
  readonly reconcile: (workspace: ResolvedWorkspace) => Effect.Effect<ReconcileResult>
}>()("@cp/server/billing/BillingService") {
  static readonly layer = Layer.effect(
    BillingService,
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      const users = yield* UsersRepo
      const state = yield* BillingState
      const provider = yield* BillingProvider
      const tx = yield* Transactor
      const cursors = yield* Cursors
      const config = yield* AppConfig

      const returnUrl = (path: string | undefined) => `${config.publicBaseUrl}${path ?? "/"}`

      const purchasablePlan = Effect.fnUntraced(function*(code: string) {
        const plan = (yield* billing.plans).find((row) => row.code === code)
        if (plan === undefined || !isPurchasable(plan)) {
          return yield* validationFailed({ planCode: ["must be a purchasable plan"] })
        }
        return plan
      })

      /** The workspace's active subscription and customer, or 412 with `reason`. */
      const activeOf = Effect.fnUntraced(function*(workspace: ResolvedWorkspace) {
        const orgId = workspace.organization.id
        const active = yield* billing.activeSubscription(orgId)
        const customer = yield* billing.findCustomer(orgId)
        if (Option.isNone(active) || Option.isNone(customer)) {
          return yield* precondition("no_active_subscription", "The workspace has no active subscription")
        }
        return { subscription: active.value, customer: customer.value }
      })

      /** The workspace's customer, created at the provider first when there is none yet. */
      const ensureCustomer = Effect.fnUntraced(function*(actor: Actor, workspace: ResolvedWorkspace) {
        const orgId = workspace.organization.id
        const existing = yield* billing.findCustomer(orgId)
        if (Option.isSome(existing)) return existing.value
        const email = actor.kind === "user"
          ? Option.match(yield* users.findById(actor.userId), { onNone: () => undefined, onSome: (u) => u.email })
          : undefined
        const input = {
          email: email ?? `billing+${workspace.organization.slug}@workspaces.invalid`,
          name: workspace.organization.name,
          externalId: orgId
        }
        const created = yield* provider.createCustomer(input).pipe(Effect.mapError(providerError))
        const now = yield* currentDate
        const row = {
          id: mint.billingCustomer(now.getTime()),
          orgId,
          displayName: created.name,
          email: created.email,
          status: "active" as const,
          provider: "billprov",
          providerCustomerId: created.id,
          metadata: {},
          createdAt: now,
          updatedAt: now
        }
        // Two first checkouts at once: the first row stays, the second provider customer goes unused.
        return yield* billing.insertCustomer(row).pipe(
          Effect.as(row),
          Effect.catchTag(
            "UniqueViolation",
            () =>
              Effect.flatMap(billing.findCustomer(orgId), (found) => Effect.succeed(Option.getOrElse(found, () => row)))
          )
        )
      })

      return BillingService.of({
        plans: Effect.fn("Billing.plans")(function*() {
          return { plans: (yield* billing.plans).map(planOf) }
        }),
        customer: Effect.fn("Billing.customer")(function*(workspace) {
          const customer = yield* billing.findCustomer(workspace.organization.id)
          if (Option.isNone(customer)) return yield* wireError(NotFound, "The workspace has no billing customer yet")
          return { customer: customer.value }
        }),
        summary: Effect.fn("Billing.summary")(function*(workspace) {
          const orgId = workspace.organization.id
          const plans = yield* billing.plans
          const current = yield* state.current(orgId)
          const active = yield* billing.activeSubscription(orgId)
          return {
            customer: Option.getOrNull(yield* billing.findCustomer(orgId)),
            activeSubscription: Option.getOrNull(Option.flatMap(active, (row) => subscriptionOf(row, plans))),
            plan: planOf(current.plan),
            entitlements: current.entitlements
          }
        }),
        entitlements: Effect.fn("Billing.entitlements")(function*(workspace) {
          return { entitlements: (yield* state.current(workspace.organization.id)).entitlements }
        }),
        invoices: Effect.fn("Billing.invoices")(function*(workspace, page) {
          const orgId = workspace.organization.id
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "billing.invoices", scope: orgId },
            page,
            (window) => billing.invoices({ orgId, ...window }),
            idPosition
          )
          return { data: { invoices: items.map(invoiceOf) }, cursor }
        }),
        paymentMethods: Effect.fn("Billing.paymentMethods")(function*(workspace) {
          const customer = yield* billing.findCustomer(workspace.organization.id)
          if (Option.isNone(customer)) return { paymentMethods: [] }
          const methods = yield* provider.paymentMethods(customer.value.providerCustomerId).pipe(
            // Not configured: nothing is stored to read.
            Effect.catchTag("BillingNotConfigured", () => Effect.succeed([])),
            Effect.mapError(unavailable)
          )
          return { paymentMethods: methods }
        }),
        checkout: Effect.fn("Billing.checkout")(function*(actor, workspace, input) {
          const plan = yield* purchasablePlan(input.planCode)
          const orgId = workspace.organization.id
          const active = yield* billing.activeSubscription(orgId)
          const existing = yield* billing.findCustomer(orgId)
          if (Option.isSome(active) && Option.isSome(existing)) {
            const session = yield* provider.createCustomerSession({
              customerId: existing.value.providerCustomerId,
              returnUrl: returnUrl(rootRelative(input.returnPath))
            }).pipe(Effect.mapError(providerError))
            return { checkoutUrl: session.url, mode: "portal" as const }
          }
          const customer = yield* ensureCustomer(actor, workspace)
          const embedOrigin = httpsOrigin(input.embedOrigin)
          const session = yield* provider.createCheckout({
            customerId: customer.providerCustomerId,
            productId: productOf(plan) ?? "",
            successUrl: returnUrl(rootRelative(input.returnPath)),
            ...(embedOrigin === undefined ? {} : { embedOrigin })
          }).pipe(Effect.mapError(providerError))
          return { checkoutUrl: session.url, mode: "checkout" as const }
        }),
        portal: Effect.fn("Billing.portal")(function*(workspace) {
          const customer = yield* billing.findCustomer(workspace.organization.id)
          if (Option.isNone(customer)) {
            return yield* precondition("no_customer", "The workspace has no billing customer yet")
          }
          const session = yield* provider.createCustomerSession({
            customerId: customer.value.providerCustomerId,
            returnUrl: returnUrl(undefined)
          }).pipe(Effect.mapError(providerError))
          return { portalUrl: session.url }
        }),
        change: Effect.fn("Billing.change")(function*(workspace, input) {
          const plan = yield* purchasablePlan(input.planCode)
          const { subscription } = yield* activeOf(workspace)
          if (subscription.planCode === plan.code) {
            return yield* precondition("same_plan", "The workspace is already on this plan")
          }
          yield* provider.updateSubscription(subscription.providerSubscriptionId, { productId: productOf(plan) ?? "" })
            .pipe(Effect.mapError(providerError))
          return { changed: true as const }
        }),
        cancel: Effect.fn("Billing.cancel")(function*(workspace) {
          const { subscription } = yield* activeOf(workspace)
          yield* provider.updateSubscription(subscription.providerSubscriptionId, { cancelAtPeriodEnd: true })
            .pipe(Effect.mapError(providerError))
          return { cancelAtPeriodEnd: true as const }
        }),
        reconcile: Effect.fn("Billing.reconcile")(function*(workspace) {
          const customer = yield* billing.findCustomer(workspace.organization.id)
          if (Option.isNone(customer)) return { reconciled: false, reason: "no_customer" as const }
          const id = customer.value.providerCustomerId
          const fetched = yield* Effect.all([provider.subscriptions(id), provider.invoices(id)]).pipe(Effect.option)
          if (Option.isNone(fetched)) return { reconciled: false, reason: "provider_unavailable" as const }
          const [subscriptions, invoices] = fetched.value
          const changes = yield* tx.withTransaction(Effect.gen(function*() {
            const made: Array<string> = []
            // Oldest first, so the newest state of the workspace is applied last.
            const ordered = [...subscriptions].sort((a, b) => a.modifiedAt.localeCompare(b.modifiedAt))
            for (const subscription of ordered) {
              const applied = yield* state.applySubscription(subscription, false)
              if (applied._tag === "applied") made.push(...applied.changes)
            }
            for (const invoice of invoices) {
              const applied = yield* state.applyInvoice(invoice, false)
              if (applied._tag === "applied") {
                made.push(
                  ...(applied.changes.length === 0 ? [`invoice ${invoice.id} ${invoice.status}`] : applied.changes)
                )
              }
            }
            return made
          }))
          return changes.length === 0
            ? { reconciled: false, reason: "in_sync" as const }
            : { reconciled: true, changes }
        })
      })
    })
  )
}
