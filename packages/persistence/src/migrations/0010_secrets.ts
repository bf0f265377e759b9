/** Secrets: write-only values at workspace, project or environment scope, sealed under the KEK. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table secrets (
      id text collate "C" not null constraint secrets_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C",
      environment_id text collate "C",
      scope_kind text not null check (scope_kind in ('organization', 'project', 'environment')),
      secret_key text collate "C" not null,
      display_name text not null,
      status text not null check (status in ('active', 'revoked')),
      version integer not null,
      sealed_value text not null,
      kek_id text not null,
      rotation_policy text,
      last_rotated_at timestamptz,
      expires_at timestamptz,
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      revoked_at timestamptz,
      constraint secrets_scope_check check (
        (scope_kind = 'organization' and project_id is null and environment_id is null)
        or (scope_kind = 'project' and project_id is not null and environment_id is null)
        or (scope_kind = 'environment' and project_id is not null and environment_id is not null))
    )`
  // One active secret per key and scope; revoked rows keep their key without blocking a new one.
  yield* sql`
    create unique index secrets_active_key on secrets (org_id, project_id, environment_id, secret_key)
      nulls not distinct where status = 'active'`
  // A workspace's secrets, newest first (the keyset order of every list).
  yield* sql`create index secrets_org_idx on secrets (org_id, created_at desc, id desc)`
})
