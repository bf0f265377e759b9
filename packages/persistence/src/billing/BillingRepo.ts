/**
 * Billing records: plans (seeded), the workspace's customer at the provider, its subscriptions as the provider's
 * webhooks last described them, invoices, and the webhook ids already received (dedupe).
 */
import { OrgId } from "@cp/domain/ids"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey } from "../memoryTable.ts"
import { planSeeds } from "./plans.ts"
import {
  BillingSubscriptionRow,
  CustomerRow,
  DueCancellations,
  InvoiceRow,
  InvoicesPage,
  PlanRow,
  type UpsertedInvoice,
  WebhookReceipt
} from "./rows.ts"

/** The subscription states in which the workspace holds the subscription's plan (spec: subscription rows). */
export const PLAN_HOLDING_STATUSES = ["active", "trialing", "past_due"] as const

const holdsPlan = (status: string) => (PLAN_HOLDING_STATUSES as ReadonlyArray<string>).includes(status)

const Inserted = Schema.Struct({ webhookId: Schema.String })

export class BillingRepo extends Context.Service<BillingRepo, {
  /** Every plan, cheapest first. */
  readonly plans: Effect.Effect<ReadonlyArray<PlanRow>>
  readonly findCustomer: (orgId: OrgId) => Effect.Effect<Option.Option<CustomerRow>>
  readonly findCustomerByProviderId: (providerCustomerId: string) => Effect.Effect<Option.Option<CustomerRow>>
  /** `UniqueViolation` when the workspace already has a customer. */
  readonly insertCustomer: (row: CustomerRow) => Effect.Effect<void, UniqueViolation>
  /** The stored subscription, locked until the transaction ends (SQL). */
  readonly findSubscriptionForUpdate: (
    providerSubscriptionId: string
  ) => Effect.Effect<Option.Option<BillingSubscriptionRow>>
  /** Inserts the subscription, or replaces the stored one of the same provider id. */
  readonly upsertSubscription: (row: BillingSubscriptionRow) => Effect.Effect<void>
  /** The workspace's newest subscription in a plan-holding state. */
  readonly activeSubscription: (orgId: OrgId) => Effect.Effect<Option.Option<BillingSubscriptionRow>>
  /**
   * Inserts the invoice, or updates the stored one of the same provider id (its id and creation kept), with the status
   * it had before. Inside a transaction (SQL) the row stays locked until it ends, so of two concurrent writers exactly
   * one sees the status change.
   */
  readonly upsertInvoice: (row: InvoiceRow) => Effect.Effect<UpsertedInvoice>
  /** A page of the workspace's invoices, newest first. */
  readonly invoices: (page: InvoicesPage) => Effect.Effect<ReadonlyArray<InvoiceRow>>
  /** Records a webhook id; false when it was seen before (nothing else to do). */
  readonly recordReceipt: (receipt: WebhookReceipt) => Effect.Effect<boolean>
  /** Sets what a recorded webhook's event did. */
  readonly finishReceipt: (receipt: WebhookReceipt) => Effect.Effect<void>
  /** Plan-holding subscriptions whose `cancelAt` has passed, claimed (`for update skip locked`) for the sweep. */
  readonly dueCancellations: (due: DueCancellations) => Effect.Effect<ReadonlyArray<BillingSubscriptionRow>>
}>()("@cp/persistence/billing/BillingRepo") {
  static readonly memory = Layer.sync(BillingRepo, () => {
    const epoch = new Date(0)
    const plans: ReadonlyArray<PlanRow> = planSeeds.map((seed) => ({
      code: seed.code,
      publicId: seed.publicId as PlanRow["publicId"],
      name: seed.name,
      description: seed.description,
      status: "active",
      billingInterval: "month",
      priceAmountCents: seed.priceAmountCents,
      priceCurrency: "usd",
      metadata: seed.metadata,
      createdAt: epoch,
      updatedAt: epoch
    }))
    const customers = new Map<string, CustomerRow>()
    const subscriptions = new Map<string, BillingSubscriptionRow>()
    const invoices = new Map<string, InvoiceRow>()
    const receipts = new Map<string, WebhookReceipt>()
    const newest = <A extends { readonly createdAt: Date }>(rows: ReadonlyArray<A>) =>
      Option.fromUndefinedOr([...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())[0])
    return BillingRepo.of({
      plans: Effect.succeed(plans),
      findCustomer: (orgId) =>
        Effect.sync(() => Option.fromUndefinedOr([...customers.values()].find((row) => row.orgId === orgId))),
      findCustomerByProviderId: (id) =>
        Effect.sync(() => Option.fromUndefinedOr([...customers.values()].find((row) => row.providerCustomerId === id))),
      insertCustomer: (row) =>
        insertUnique(customers, row.id, row, [primaryKey("billing_customers_pkey"), {
          constraint: "billing_customers_org_id_key",
          key: (stored) => stored.orgId
        }]),
      findSubscriptionForUpdate: (id) => Effect.sync(() => Option.fromUndefinedOr(subscriptions.get(id))),
      upsertSubscription: (row) =>
        atomically((changes) => {
          const stored = subscriptions.get(row.providerSubscriptionId)
          changes.set(
            subscriptions,
            row.providerSubscriptionId,
            stored === undefined ? row : { ...row, id: stored.id, createdAt: stored.createdAt }
          )
          return Effect.void
        }),
      activeSubscription: (orgId) =>
        Effect.sync(() =>
          newest([...subscriptions.values()].filter((row) => row.orgId === orgId && holdsPlan(row.status)))
        ),
      upsertInvoice: (row) =>
        atomically((changes) => {
          const stored = invoices.get(row.providerInvoiceId)
          const invoice = stored === undefined ? row : { ...row, id: stored.id, createdAt: stored.createdAt }
          changes.set(invoices, row.providerInvoiceId, invoice)
          return Effect.succeed({ invoice, previousStatus: stored?.status ?? null })
        }),
      invoices: ({ orgId, ...window }) =>
        Effect.sync(() => windowOf([...invoices.values()].filter((row) => row.orgId === orgId), idPosition, window)),
      recordReceipt: (receipt) =>
        atomically((changes) => {
          if (receipts.has(receipt.webhookId)) return Effect.succeed(false)
          changes.set(receipts, receipt.webhookId, receipt)
          return Effect.succeed(true)
        }),
      finishReceipt: (receipt) =>
        atomically((changes) => {
          changes.set(receipts, receipt.webhookId, receipt)
          return Effect.void
        }),
      dueCancellations: ({ limit, now }) =>
        Effect.sync(() =>
          [...subscriptions.values()]
            .filter((row) => holdsPlan(row.status) && row.cancelAt !== null && row.cancelAt <= now)
            .slice(0, limit)
        )
    })
  })

  static readonly sql = Layer.effect(
    BillingRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const holding = sql.in([...PLAN_HOLDING_STATUSES])
      const insertInvoiceIfNew = SqlSchema.findOneOption({
        Request: InvoiceRow,
        Result: InvoiceRow,
        execute: (row) =>
          sql`
            insert into billing_invoices ${sql.insert(row)}
            on conflict (provider_invoice_id) do nothing returning *`
      })
      const lockInvoiceStatus = SqlSchema.findOne({
        Request: Schema.String,
        Result: Schema.Struct({ status: Schema.String }),
        execute: (id) => sql`select status from billing_invoices where provider_invoice_id = ${id} for update`
      })
      const updateInvoice = SqlSchema.findOne({
        Request: InvoiceRow,
        Result: InvoiceRow,
        execute: (row) =>
          sql`
            update billing_invoices set
              number = ${row.number}, status = ${row.status}, amount_due_cents = ${row.amountDueCents},
              amount_paid_cents = ${row.amountPaidCents}, currency = ${row.currency},
              period_start = ${row.periodStart}, period_end = ${row.periodEnd}, hosted_url = ${row.hostedUrl},
              provider_subscription_id = ${row.providerSubscriptionId}
            where provider_invoice_id = ${row.providerInvoiceId}
            returning *`
      })
      return BillingRepo.of({
        plans: SqlSchema.findAll({
          Request: Schema.Void,
          Result: PlanRow,
          execute: () =>
            sql`
              select id as code, public_id, name, description, status, billing_interval, price_amount_cents,
                price_currency, metadata, created_at, updated_at
              from plans order by price_amount_cents, id`
        })(undefined).pipe(Effect.orDie),
        findCustomer: flow(
          SqlSchema.findOneOption({
            Request: OrgId,
            Result: CustomerRow,
            execute: (orgId) => sql`select * from billing_customers where org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        findCustomerByProviderId: flow(
          SqlSchema.findOneOption({
            Request: Schema.String,
            Result: CustomerRow,
            execute: (id) => sql`select * from billing_customers where provider_customer_id = ${id}`
          }),
          Effect.orDie
        ),
        insertCustomer: flow(
          SqlSchema.void({
            Request: CustomerRow,
            execute: (row) =>
              sql`insert into billing_customers ${sql.insert({ ...row, metadata: sql.json(row.metadata) })}`
          }),
          uniqueViolationOrDie
        ),
        findSubscriptionForUpdate: flow(
          SqlSchema.findOneOption({
            Request: Schema.String,
            Result: BillingSubscriptionRow,
            execute: (id) => sql`select * from billing_subscriptions where provider_subscription_id = ${id} for update`
          }),
          Effect.orDie
        ),
        upsertSubscription: flow(
          SqlSchema.void({
            Request: BillingSubscriptionRow,
            execute: (row) =>
              sql`
                insert into billing_subscriptions ${sql.insert({ ...row, metadata: sql.json(row.metadata) })}
                on conflict (provider_subscription_id) do update set
                  billing_customer_id = excluded.billing_customer_id, plan_code = excluded.plan_code,
                  status = excluded.status, current_period_start = excluded.current_period_start,
                  current_period_end = excluded.current_period_end, trial_end = excluded.trial_end,
                  cancel_at = excluded.cancel_at, canceled_at = excluded.canceled_at, metadata = excluded.metadata,
                  provider_modified_at = excluded.provider_modified_at, updated_at = excluded.updated_at`
          }),
          Effect.orDie
        ),
        activeSubscription: flow(
          SqlSchema.findOneOption({
            Request: OrgId,
            Result: BillingSubscriptionRow,
            execute: (orgId) =>
              sql`
                select * from billing_subscriptions where org_id = ${orgId} and status in ${holding}
                order by created_at desc, id desc limit 1`
          }),
          Effect.orDie
        ),
        // Two writers of one invoice at once (a webhook and a reconcile) must agree on who changed its status: the
        // insert waits for a concurrent insert of the same id to commit; otherwise the stored row is locked (FOR UPDATE
        // reads the latest committed status, after any concurrent writer commits) before it is updated.
        upsertInvoice: (row) =>
          Effect.gen(function*() {
            const inserted = yield* insertInvoiceIfNew(row)
            if (Option.isSome(inserted)) return { invoice: inserted.value, previousStatus: null }
            const previous = yield* lockInvoiceStatus(row.providerInvoiceId)
            const invoice = yield* updateInvoice(row)
            return { invoice, previousStatus: previous.status }
          }).pipe(Effect.orDie),
        invoices: flow(
          SqlSchema.findAll({
            Request: InvoicesPage,
            Result: InvoiceRow,
            execute: ({ orgId, ...window }) =>
              keysetQuery(sql, sql`select * from billing_invoices`, [sql`org_id = ${orgId}`], window)
          }),
          Effect.orDie
        ),
        recordReceipt: flow(
          SqlSchema.findAll({
            Request: WebhookReceipt,
            Result: Inserted,
            execute: (receipt) =>
              sql`
                insert into billing_webhook_receipts ${sql.insert(receipt)}
                on conflict (webhook_id) do nothing returning webhook_id`
          }),
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        ),
        finishReceipt: flow(
          SqlSchema.void({
            Request: WebhookReceipt,
            execute: ({ orgId, outcome, webhookId }) =>
              sql`
                update billing_webhook_receipts set outcome = ${outcome}, org_id = ${orgId}
                where webhook_id = ${webhookId}`
          }),
          Effect.orDie
        ),
        dueCancellations: flow(
          SqlSchema.findAll({
            Request: DueCancellations,
            Result: BillingSubscriptionRow,
            execute: ({ limit, now }) =>
              sql`
                select * from billing_subscriptions
                where status in ${holding} and cancel_at is not null and cancel_at <= ${now}
                order by cancel_at, id limit ${limit}
                for update skip locked`
          }),
          Effect.orDie
        )
      })
    })
  )
}
