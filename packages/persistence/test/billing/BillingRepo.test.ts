/**
 * The billing repositories' contract on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: plans seeded in price
 * order, one customer per workspace, subscriptions upserted by provider id (id and creation kept), the newest
 * plan-holding one as active, invoices upserted with their status before, webhook ids recorded once, due
 * cancellations, and plan assignments that every entitlement reader sees.
 */
import { BillingCustomerId, InvoiceId, SubscriptionId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { BillingRepo } from "../../src/billing/BillingRepo.ts"
import type { BillingSubscriptionRow, CustomerRow, InvoiceRow } from "../../src/billing/rows.ts"
import { EntitlementsRepo } from "../../src/entitlements/EntitlementsRepo.ts"
import { UniqueViolation } from "../../src/errors.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const implementations = {
  memory: Layer.mergeAll(BillingRepo.memory, EntitlementsRepo.memory, OrganizationsRepo.memory),
  sql: Layer.mergeAll(BillingRepo.sql, EntitlementsRepo.sql, OrganizationsRepo.sql)
}

const uuid = () => randomUUID()

const setup = Effect.gen(function*() {
  const org = accountRootRow("Billing")
  yield* (yield* OrganizationsRepo).insert(org).pipe(Effect.orDie)
  const customer: CustomerRow = {
    id: BillingCustomerId.make(uuid()),
    orgId: org.id,
    displayName: "Billing",
    email: "billing@example.com",
    status: "active",
    provider: "billprov",
    providerCustomerId: `cus_${uuid()}`,
    metadata: { note: "x" },
    createdAt: at(0),
    updatedAt: at(0)
  }
  yield* (yield* BillingRepo).insertCustomer(customer)
  return { org, customer }
})

const subscriptionRow = (
  org: OrganizationRow,
  customer: CustomerRow,
  minutes: number,
  overrides: Partial<BillingSubscriptionRow> = {}
): BillingSubscriptionRow => ({
  id: SubscriptionId.make(uuid()),
  orgId: org.id,
  billingCustomerId: customer.id,
  planCode: "team",
  status: "active",
  currentPeriodStart: at(minutes),
  currentPeriodEnd: at(minutes + 60),
  trialEnd: null,
  cancelAt: null,
  canceledAt: null,
  provider: "billprov",
  providerSubscriptionId: `sub_${uuid()}`,
  providerModifiedAt: at(minutes),
  metadata: { orgId: org.id },
  createdAt: at(minutes),
  updatedAt: at(minutes),
  ...overrides
})

describeContract("BillingRepo", implementations, (it) => {
  it.effect("plans in price order; one customer per workspace, found by workspace and by provider id", () =>
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      assert.deepStrictEqual((yield* billing.plans).map((plan) => plan.code), ["free", "team", "business"])
      const { customer, org } = yield* setup
      const again = yield* Effect.flip(billing.insertCustomer({ ...customer, id: BillingCustomerId.make(uuid()) }))
      assert.instanceOf(again, UniqueViolation)
      assert.deepStrictEqual(Option.getOrThrow(yield* billing.findCustomer(org.id)), customer)
      assert.deepStrictEqual(
        Option.getOrThrow(yield* billing.findCustomerByProviderId(customer.providerCustomerId)),
        customer
      )
    }))

  it.effect("subscriptions upsert by provider id, keep id and creation; the newest holding one is active", () =>
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      const { customer, org } = yield* setup
      const first = subscriptionRow(org, customer, 1)
      yield* billing.upsertSubscription(first)
      yield* billing.upsertSubscription({
        ...first,
        id: SubscriptionId.make(uuid()),
        status: "past_due",
        updatedAt: at(2)
      })
      const stored = Option.getOrThrow(yield* billing.findSubscriptionForUpdate(first.providerSubscriptionId))
      assert.strictEqual(stored.id, first.id)
      assert.strictEqual(stored.status, "past_due")
      assert.deepStrictEqual(stored.createdAt, first.createdAt)
      const second = subscriptionRow(org, customer, 5, { status: "canceled" })
      yield* billing.upsertSubscription(second)
      assert.strictEqual(Option.getOrThrow(yield* billing.activeSubscription(org.id)).id, first.id)

      const due = subscriptionRow(org, customer, 6, { cancelAt: at(10) })
      yield* billing.upsertSubscription(due)
      const dueIds = (now: number) =>
        Effect.map(
          billing.dueCancellations({ now: at(now), limit: 100 }),
          (rows) => rows.filter((row) => row.orgId === org.id).map((row) => row.id)
        )
      assert.deepStrictEqual(yield* dueIds(9), [])
      assert.deepStrictEqual(yield* dueIds(10), [due.id])
    }))

  it.effect("invoices upsert by provider id with their status before; a page is newest first", () =>
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      const { org } = yield* setup
      const invoice: InvoiceRow = {
        id: InvoiceId.make(uuid()),
        orgId: org.id,
        providerInvoiceId: `in_${uuid()}`,
        providerSubscriptionId: null,
        number: "SIM-1",
        status: "open",
        amountDueCents: 2900,
        amountPaidCents: 0,
        currency: "usd",
        periodStart: at(0),
        periodEnd: at(60),
        hostedUrl: null,
        createdAt: at(1)
      }
      const created = yield* billing.upsertInvoice(invoice)
      assert.strictEqual(created.previousStatus, null)
      const paid = yield* billing.upsertInvoice({
        ...invoice,
        id: InvoiceId.make(uuid()),
        status: "paid",
        amountPaidCents: 2900
      })
      assert.strictEqual(paid.previousStatus, "open")
      assert.strictEqual(paid.invoice.id, invoice.id)
      const later = { ...invoice, id: InvoiceId.make(uuid()), providerInvoiceId: `in_${uuid()}`, createdAt: at(2) }
      yield* billing.upsertInvoice(later)
      const page = yield* billing.invoices({ orgId: org.id, limit: 10 })
      assert.deepStrictEqual(page.map((row) => row.id), [later.id, invoice.id])
      assert.strictEqual(page[1]?.status, "paid")
    }))

  it.effect("a webhook id is recorded once; a plan assignment changes the workspace's entitlements", () =>
    Effect.gen(function*() {
      const billing = yield* BillingRepo
      const entitlements = yield* EntitlementsRepo
      const { org } = yield* setup
      const receipt = {
        webhookId: `msg_${uuid()}`,
        eventType: "x",
        orgId: null,
        outcome: "received",
        receivedAt: at(0)
      }
      assert.isTrue(yield* billing.recordReceipt(receipt))
      assert.isFalse(yield* billing.recordReceipt(receipt))
      yield* billing.finishReceipt({ ...receipt, outcome: "applied", orgId: org.id })

      const limit = Effect.map(
        entitlements.forWorkspace(org.id),
        (rows) => rows.find((row) => row.entitlementKey === "limit.projects")?.limitValue
      )
      assert.strictEqual(yield* limit, 5)
      assert.isTrue(Option.isNone(yield* entitlements.assignmentOf(org.id)))
      yield* entitlements.assignPlan({ orgId: org.id, planId: "team", subscriptionId: uuid(), updatedAt: at(1) })
      assert.strictEqual(yield* limit, 50)
      yield* entitlements.assignPlan({ orgId: org.id, planId: "free", subscriptionId: null, updatedAt: at(2) })
      assert.strictEqual(yield* limit, 5)
      assert.strictEqual(Option.getOrThrow(yield* entitlements.assignmentOf(org.id)).subscriptionId, null)
    }))
})
