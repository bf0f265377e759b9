/**
 * Usage metering and quotas: usage records (idempotency key unique per workspace for ever), hourly and daily rollups
 * kept in the ingest statement, quotas and their violations. Limits and used amounts are double precision: exact for
 * the integers up to 2^53 − 1 the API accepts, and read back as JSON numbers on every driver.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table usage_records (
      id text collate "C" not null constraint usage_records_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" references projects (id),
      environment_id text collate "C" references environments (id),
      resource_id text,
      metric text collate "C" not null,
      quantity bigint not null check (quantity >= 0),
      idempotency_key text collate "C" not null,
      recorded_at timestamptz not null,
      metadata jsonb,
      created_at timestamptz not null,
      constraint usage_records_idempotency_key unique (org_id, idempotency_key)
    )`
  // Summaries read rollups; this serves usage by metric and time (quota `used` falls back to rollups too).
  yield* sql`create index usage_records_metric_idx on usage_records (org_id, metric, recorded_at)`

  // One row per (workspace, project, environment, metric, bucket); null project/environment are workspace-level.
  yield* sql`
    create table usage_rollups (
      id text collate "C" not null default gen_random_uuid()::text constraint usage_rollups_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C",
      environment_id text collate "C",
      metric text collate "C" not null,
      bucket_type text not null check (bucket_type in ('hour', 'day')),
      bucket_start timestamptz not null,
      quantity numeric not null,
      record_count bigint not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint usage_rollups_bucket_key unique nulls not distinct
        (org_id, metric, bucket_type, bucket_start, project_id, environment_id)
    )`

  yield* sql`
    create table quotas (
      id text collate "C" not null constraint quotas_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" references projects (id),
      environment_id text collate "C" references environments (id),
      metric text collate "C" not null,
      "limit" double precision not null check ("limit" >= 0 and "limit" = trunc("limit")),
      period text not null check (period in ('hour', 'day', 'month', 'billing_cycle')),
      enforcement text not null check (enforcement in ('soft', 'hard')),
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint quotas_scope_key unique nulls not distinct (org_id, metric, period, project_id, environment_id)
    )`
  yield* sql`create index quotas_org_idx on quotas (org_id, created_at desc, id desc)`

  // One violation per (quota, period start); a plan quota (no row) is keyed by its metric and period instead.
  yield* sql`
    create table quota_violations (
      id text collate "C" not null constraint quota_violations_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      quota_key text collate "C" not null,
      quota_id text collate "C" references quotas (id) on delete set null,
      metric text collate "C" not null,
      project_id text collate "C",
      environment_id text collate "C",
      resource_id text,
      period text not null,
      period_start timestamptz not null,
      "limit" double precision not null,
      used double precision not null,
      enforcement text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint quota_violations_period_key unique (org_id, quota_key, period_start)
    )`
  yield* sql`create index quota_violations_org_idx on quota_violations (org_id, created_at desc, id desc)`

  // Plan entitlements `quota.<metric>` carry their period and enforcement here (billing may add the column first).
  yield* sql`alter table plan_entitlements add column if not exists metadata jsonb`
})
