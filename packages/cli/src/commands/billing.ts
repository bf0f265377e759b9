/**
 * Billing commands, in the workspace of `-w` (or the default): `billing plans`, `billing summary`, `billing invoices`,
 * `billing payment-methods`, `billing checkout <plan> [--return-path /p]` (prints the checkout URL; opens nothing),
 * `billing portal` (prints the portal URL), `billing change <plan>`, `billing cancel` (asks unless --yes) and
 * `billing reconcile`. Plan changes take effect when the provider's webhook arrives.
 */
import type { Invoice, PaymentMethod, Plan } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { confirm, fetchRows, flagWords, pageFlags, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const planColumns: Columns<Plan> = {
  code: (plan) => plan.code,
  name: (plan) => plan.name,
  price: (plan) => `${(plan.priceAmountCents / 100).toFixed(2)} ${plan.priceCurrency}/${plan.billingInterval}`,
  purchasable: (plan) => plan.metadata["purchasable"] === true
}

const invoiceColumns: Columns<Invoice> = {
  id: (invoice) => invoice.id,
  number: (invoice) => invoice.number,
  status: (invoice) => invoice.status,
  due: (invoice) => invoice.amountDueCents,
  paid: (invoice) => invoice.amountPaidCents,
  currency: (invoice) => invoice.currency,
  created: (invoice) => invoice.createdAt
}

const paymentMethodColumns: Columns<PaymentMethod> = {
  id: (method) => method.id,
  brand: (method) => method.brand,
  last4: (method) => method.last4,
  expires: (method) => `${String(method.expMonth).padStart(2, "0")}/${method.expYear}`,
  default: (method) => method.isDefault
}

const planArgument = Argument.String("plan").pipe(Argument.withDescription("Plan code (e.g. team)"))

const plans = Command.make(
  "plans",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.billing.plans")(function*({ workspace }) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.plans({ params: { orgId: workspace } })
    yield* printResult(answer.plans, (rows) => renderTable(planColumns, rows))
  })
).pipe(Command.withDescription("List the plans, cheapest first"), withClient)

const summary = Command.make(
  "summary",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.billing.summary")(function*({ workspace }) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.summary({ params: { orgId: workspace } })
    yield* printResult(answer, (value) =>
      [
        `plan: ${value.plan.code} (${value.plan.name})`,
        `subscription: ${
          value.activeSubscription === null
            ? "none"
            : `${value.activeSubscription.status}, period ends ${value.activeSubscription.currentPeriodEnd ?? "-"}${
              value.activeSubscription.cancelAt === null ? "" : ", cancels at period end"
            }`
        }`,
        `customer: ${value.customer === null ? "none" : value.customer.email}`,
        renderTable({
          entitlement: (e: typeof value.entitlements[number]) => e.entitlementKey,
          enabled: (e) => e.enabled,
          limit: (e) => e.limitValue
        }, value.entitlements)
      ].join("\n"))
  })
).pipe(Command.withDescription("Show the plan, subscription and entitlements"), withClient)

const invoices = Command.make(
  "invoices",
  { workspace: workspaceFlag, ...pageFlags },
  Effect.fn("cpctl.billing.invoices")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.billing.invoices({ params: { orgId: flags.workspace }, query }),
        (page) => ({ rows: page.data.invoices, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: invoiceColumns,
      empty: "No invoices.",
      command: ["cpctl", "billing", "invoices", "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List invoices, newest first"), withClient)

const paymentMethods = Command.make(
  "payment-methods",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.billing.paymentMethods")(function*({ workspace }) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.paymentMethods({ params: { orgId: workspace } })
    yield* printList(answer.paymentMethods, null, {
      columns: paymentMethodColumns,
      empty: "No saved payment methods.",
      command: ["cpctl", "billing", "payment-methods", "-w", workspace]
    })
  })
).pipe(Command.withDescription("List saved cards (display-safe fields)"), withClient)

const checkout = Command.make(
  "checkout",
  {
    workspace: workspaceFlag,
    plan: planArgument,
    returnPath: Flag.String("return-path").pipe(
      Flag.withDescription("Root-relative path to return to after paying"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.billing.checkout")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.checkout({
      params: { orgId: flags.workspace },
      payload: {
        planCode: flags.plan,
        ...Option.match(flags.returnPath, { onNone: () => ({}), onSome: (returnPath) => ({ returnPath }) })
      }
    })
    yield* printResult(answer, (value) => value.checkoutUrl)
  })
).pipe(Command.withDescription("Print a checkout URL for a plan (a portal URL when already subscribed)"), withClient)

const portal = Command.make(
  "portal",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.billing.portal")(function*({ workspace }) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.portal({ params: { orgId: workspace } })
    yield* printResult(answer, (value) => value.portalUrl)
  })
).pipe(Command.withDescription("Print the customer portal URL"), withClient)

const change = Command.make(
  "change",
  { workspace: workspaceFlag, plan: planArgument },
  Effect.fn("cpctl.billing.change")(function*({ plan, workspace }) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.change({ params: { orgId: workspace }, payload: { planCode: plan } })
    yield* printResult(answer, () => `Asked the provider to move the subscription to ${plan}`)
  })
).pipe(Command.withDescription("Change the subscription's plan"), withClient)

const cancel = Command.make(
  "cancel",
  { workspace: workspaceFlag, yes: yesFlag },
  Effect.fn("cpctl.billing.cancel")(function*({ workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(yes, "Cancel the subscription at the end of the current period?")
    const answer = yield* api.billing.cancel({ params: { orgId: workspace } })
    yield* printResult(answer, () => "The subscription ends at the end of the current period")
  })
).pipe(Command.withDescription("Cancel the subscription at period end (asks unless --yes)"), withClient)

const reconcile = Command.make(
  "reconcile",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.billing.reconcile")(function*({ workspace }) {
    const { api } = yield* ControlPlaneClient
    const answer = yield* api.billing.reconcile({ params: { orgId: workspace } })
    yield* printResult(
      answer,
      (value) =>
        value.reconciled ? `Reconciled: ${(value.changes ?? []).join(", ")}` : `Nothing to do: ${value.reason ?? ""}`
    )
  })
).pipe(Command.withDescription("Apply the provider's records the server missed"), withClient)

/** `cpctl billing`. */
export const billing = Command.make("billing").pipe(
  Command.withDescription("Plans, subscription, invoices, checkout and portal"),
  Command.withSubcommands([plans, summary, invoices, paymentMethods, checkout, portal, change, cancel, reconcile])
)
