/** Platform tables: idempotency keys, rate-limit buckets, server secrets, the mail outbox, the event log and audit. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table idempotency_keys (
      principal text not null,
      method text not null,
      path text not null,
      idempotency_key text not null,
      body_hash text not null,
      state text not null check (state in ('in_flight', 'completed')),
      status int4,
      headers jsonb,
      body text,
      created_at timestamptz not null,
      completed_at timestamptz,
      constraint idempotency_keys_pkey primary key (principal, method, path, idempotency_key),
      check ((state = 'completed') = (status is not null and headers is not null and body is not null))
    )`

  yield* sql`
    create table rate_limit_buckets (
      key text not null constraint rate_limit_buckets_pkey primary key,
      window_start timestamptz not null,
      count int4 not null check (count > 0)
    )`

  yield* sql`
    create table server_secrets (
      name text not null constraint server_secrets_pkey primary key,
      value text not null
    )`

  yield* sql`
    create table mail_outbox (
      id text collate "C" not null constraint mail_outbox_pkey primary key,
      to_address text not null,
      template text not null,
      subject text not null,
      text text not null,
      data jsonb not null,
      created_at timestamptz not null
    )`
  yield* sql`create index mail_outbox_to_address_idx on mail_outbox (lower(to_address), created_at desc, id desc)`
  yield* sql`create index mail_outbox_created_at_idx on mail_outbox (created_at desc, id desc)`

  yield* sql`
    create table events (
      id uuid not null constraint events_pkey primary key,
      org_id text not null,
      type text not null,
      occurred_at timestamptz not null,
      actor_type text not null check (actor_type in ('user', 'service_principal', 'workflow', 'system')),
      actor_id text not null,
      subject_kind text not null,
      subject_id text not null,
      subject_name text,
      project_id text,
      environment_id text,
      request_id text,
      correlation_id text,
      data jsonb not null,
      trace_context jsonb
    )`
  yield* sql`create index events_org_occurred_idx on events (org_id, occurred_at desc, id desc)`

  yield* sql`
    create table audit_entries (
      id uuid not null constraint audit_entries_pkey primary key,
      event_id uuid not null references events (id),
      org_id text not null,
      project_id text,
      environment_id text,
      actor_type text not null check (actor_type in ('user', 'service_principal', 'workflow', 'system')),
      actor_id text not null,
      event_type text not null,
      source text not null,
      category text not null,
      description text not null,
      subject_kind text not null,
      subject_id text not null,
      subject_name text,
      occurred_at timestamptz not null,
      request_id text,
      correlation_id text,
      payload jsonb not null
    )`
  // One index per audit filter, each ending in the keyset order so a filtered page is an index range scan.
  yield* sql`create index audit_entries_org_idx on audit_entries (org_id, occurred_at desc, id desc)`
  yield* sql`create index audit_entries_category_idx on audit_entries (org_id, category, occurred_at desc, id desc)`
  yield* sql`create index audit_entries_actor_idx on audit_entries (org_id, actor_id, occurred_at desc, id desc)`
  yield* sql`
    create index audit_entries_subject_idx
    on audit_entries (org_id, subject_kind, subject_id, occurred_at desc, id desc)`
  yield* sql`
    create index audit_entries_event_type_idx on audit_entries (org_id, event_type, occurred_at desc, id desc)`
})
