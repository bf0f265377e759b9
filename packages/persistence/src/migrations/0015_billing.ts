/**
 * Billing (metering-billing.md §4–6): plans gain their billing fields and `team` and `business` join `free` (with
 * their entitlements, so a plan change stays a `workspace_plans` row change); customers, subscriptions, invoices and
 * the webhook ids received. `workspace_plans.subscription_id` names the subscription that conferred the plan.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { planSeeds } from "../billing/plans.ts"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    alter table plans
      add column public_id uuid,
      add column description text,
      add column status text not null default 'active',
      add column billing_interval text not null default 'month',
      add column price_amount_cents integer not null default 0,
      add column price_currency text not null default 'usd',
      add column metadata jsonb not null default '{}'::jsonb,
      add column updated_at timestamptz not null default now()`
  for (const plan of planSeeds) {
    yield* sql`
      insert into plans (id, name, public_id, description, price_amount_cents, metadata)
      values (${plan.code}, ${plan.name}, ${plan.publicId}, ${plan.description}, ${plan.priceAmountCents},
        ${JSON.stringify(plan.metadata)}::jsonb)
      on conflict (id) do update set name = excluded.name, public_id = excluded.public_id,
        description = excluded.description, price_amount_cents = excluded.price_amount_cents,
        metadata = excluded.metadata`
    for (const entry of plan.entitlements) {
      yield* sql`
        insert into plan_entitlements (plan_id, entitlement_key, value_type, enabled, limit_value)
        values (${plan.code}, ${entry.entitlementKey}, ${entry.valueType}, ${entry.enabled}, ${entry.limitValue})
        on conflict (plan_id, entitlement_key) do nothing`
    }
  }
  // Plans made outside this seed (operators' custom plans) get a public id of their own.
  yield* sql`
    alter table plans alter column public_id set not null, alter column public_id set default gen_random_uuid()`
  yield* sql`alter table plans add constraint plans_public_id_key unique (public_id)`

  yield* sql`
    create table billing_customers (
      id uuid not null constraint billing_customers_pkey primary key,
      org_id text collate "C" not null constraint billing_customers_org_id_key unique references organizations (id),
      display_name text not null,
      email text not null,
      status text not null,
      provider text not null,
      provider_customer_id text collate "C" not null constraint billing_customers_provider_key unique,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`
  yield* sql`
    create table billing_subscriptions (
      id uuid not null constraint billing_subscriptions_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      billing_customer_id uuid not null references billing_customers (id),
      plan_code text collate "C" not null references plans (id),
      status text not null,
      current_period_start timestamptz,
      current_period_end timestamptz,
      trial_end timestamptz,
      cancel_at timestamptz,
      canceled_at timestamptz,
      provider text not null,
      provider_subscription_id text collate "C" not null constraint billing_subscriptions_provider_key unique,
      provider_modified_at timestamptz not null,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`
  yield* sql`create index billing_subscriptions_org_idx on billing_subscriptions (org_id, created_at desc, id desc)`
  // The period-end sweep's claim: only subscriptions with a scheduled cancellation.
  yield* sql`
    create index billing_subscriptions_cancel_idx on billing_subscriptions (cancel_at) where cancel_at is not null`
  yield* sql`
    create table billing_invoices (
      id uuid not null constraint billing_invoices_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      provider_invoice_id text collate "C" not null constraint billing_invoices_provider_key unique,
      provider_subscription_id text collate "C",
      number text,
      status text not null,
      amount_due_cents integer not null,
      amount_paid_cents integer not null,
      currency text not null,
      period_start timestamptz,
      period_end timestamptz,
      hosted_url text,
      created_at timestamptz not null
    )`
  yield* sql`create index billing_invoices_org_idx on billing_invoices (org_id, created_at desc, id desc)`
  yield* sql`
    create table billing_webhook_receipts (
      webhook_id text collate "C" not null constraint billing_webhook_receipts_pkey primary key,
      event_type text not null,
      org_id text collate "C",
      outcome text not null,
      received_at timestamptz not null
    )`
  yield* sql`alter table workspace_plans add column subscription_id uuid`
})
