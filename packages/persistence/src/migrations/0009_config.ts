/** Configuration tables: settings and feature flags at workspace, project and environment scope. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table settings (
      id text collate "C" not null constraint settings_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C",
      environment_id text collate "C",
      scope_kind text not null check (scope_kind in ('organization', 'project', 'environment')),
      key text collate "C" not null,
      value_json text not null,
      value_type text not null check (value_type in ('string', 'number', 'boolean', 'json')),
      visibility text not null check (visibility in ('public', 'internal', 'masked')),
      overridable boolean not null,
      description text,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint settings_scope_key unique nulls not distinct (org_id, project_id, environment_id, key)
    )`
  // A scope's settings, newest first (the keyset order of the list); resolve reads one key across scopes.
  yield* sql`create index settings_scope_idx on settings (org_id, project_id, environment_id, created_at desc, id desc)`
  yield* sql`create index settings_key_idx on settings (org_id, key)`

  yield* sql`
    create table feature_flags (
      id text collate "C" not null constraint feature_flags_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C",
      environment_id text collate "C",
      scope_kind text not null check (scope_kind in ('organization', 'project', 'environment')),
      key text collate "C" not null,
      enabled boolean not null,
      value_json text not null,
      description text,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint feature_flags_scope_key unique nulls not distinct (org_id, project_id, environment_id, key)
    )`
  yield* sql`
    create index feature_flags_scope_idx
    on feature_flags (org_id, project_id, environment_id, created_at desc, id desc)`
})
