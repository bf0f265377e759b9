/**
 * Outbound webhooks: endpoints (their signing secrets sealed under the KEK), subscriptions, and delivery attempts,
 * which are also the transactional outbox the delivery worker claims from (`due_at`, `claimed_until`).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table webhook_endpoints (
      id text collate "C" not null constraint webhook_endpoints_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C",
      url text not null,
      name text,
      description text,
      status text not null check (status in ('active', 'disabled')),
      disabled_reason text,
      disabled_at timestamptz,
      secret_version integer not null,
      secret_last_rotated_at timestamptz,
      sealed_secret text not null,
      previous_sealed_secret text,
      previous_secret_expires_at timestamptz,
      kek_id text not null,
      consecutive_failures integer not null default 0,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`
  yield* sql`create index webhook_endpoints_org_idx on webhook_endpoints (org_id, created_at desc, id desc)`

  yield* sql`
    create table webhook_subscriptions (
      id text collate "C" not null constraint webhook_subscriptions_pkey primary key,
      org_id text collate "C" not null,
      endpoint_id text collate "C" not null references webhook_endpoints (id) on delete cascade,
      event_type text collate "C" not null,
      enabled boolean not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint webhook_subscriptions_endpoint_event_type unique (endpoint_id, event_type)
    )`
  yield* sql`create index webhook_subscriptions_org_idx on webhook_subscriptions (org_id) where enabled`
  yield* sql`
    create index webhook_subscriptions_endpoint_idx on webhook_subscriptions (endpoint_id, created_at desc, id desc)`

  yield* sql`
    create table webhook_deliveries (
      id text collate "C" not null constraint webhook_deliveries_pkey primary key,
      org_id text collate "C" not null,
      endpoint_id text collate "C" not null references webhook_endpoints (id) on delete cascade,
      subscription_id text collate "C",
      event_id uuid not null,
      event_type text not null,
      status text not null check (status in ('pending', 'retrying', 'success', 'failed')),
      attempt_number integer not null,
      http_status_code integer,
      failure_reason text,
      idempotency_key text not null,
      next_retry_at timestamptz,
      completed_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      body text not null,
      due_at timestamptz,
      claimed_until timestamptz,
      claim_token text,
      trace_context jsonb,
      response_body text,
      check ((status in ('pending', 'retrying')) = (due_at is not null))
    )`
  // The worker's claim: due rows only, oldest due first.
  yield* sql`create index webhook_deliveries_due_idx on webhook_deliveries (due_at) where due_at is not null`
  yield* sql`
    create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, created_at desc, id desc)`
})
