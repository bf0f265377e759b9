/**
 * Plans and the entitlements they confer. Every workspace is on the `free` plan unless `workspace_plans` says
 * otherwise, so billing later changes rows here, not code. The free plan's values are in docs/decisions.md.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table plans (
      id text collate "C" not null constraint plans_pkey primary key,
      name text not null,
      created_at timestamptz not null default now()
    )`
  yield* sql`
    create table plan_entitlements (
      plan_id text collate "C" not null references plans (id),
      entitlement_key text collate "C" not null,
      value_type text not null check (value_type in ('quantity', 'boolean')),
      enabled boolean not null,
      limit_value integer,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      constraint plan_entitlements_pkey primary key (plan_id, entitlement_key)
    )`
  // A workspace without a row here is on the free plan.
  yield* sql`
    create table workspace_plans (
      org_id text collate "C" not null constraint workspace_plans_pkey primary key references organizations (id),
      plan_id text collate "C" not null references plans (id),
      updated_at timestamptz not null default now()
    )`

  yield* sql`insert into plans (id, name) values ('free', 'Free')`
  yield* sql`
    insert into plan_entitlements (plan_id, entitlement_key, value_type, enabled, limit_value) values
      ('free', 'limit.projects', 'quantity', true, 5),
      ('free', 'limit.repo_links', 'quantity', true, 5),
      ('free', 'feature.integrations.scmhost', 'boolean', true, null)`
})
