/** API keys and the service principals behind them (each key's one role binding lives in `role_bindings`). */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // A non-human subject of role bindings; today every one belongs to exactly one API key.
  yield* sql`
    create table service_principals (
      id text collate "C" not null constraint service_principals_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      display_name text not null,
      created_at timestamptz not null
    )`

  // Only the SHA-256 of the secret is kept; `prefix` (its first 12 characters) is what lists show.
  yield* sql`
    create table api_keys (
      id text collate "C" not null constraint api_keys_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      service_principal_id text collate "C" not null
        constraint api_keys_service_principal_key unique references service_principals (id),
      label text not null,
      prefix text not null,
      secret_hash text not null constraint api_keys_secret_hash_key unique,
      role text not null,
      project_id text collate "C",
      created_at timestamptz not null,
      expires_at timestamptz,
      last_used_at timestamptz,
      revoked_at timestamptz,
      constraint api_keys_project_check
        check ((role in ('project_admin', 'project_builder', 'project_viewer')) = (project_id is not null))
    )`
  // A workspace's keys newest first, the keyset order of the list (with or without the project filter).
  yield* sql`create index api_keys_org_idx on api_keys (org_id, created_at desc, id desc)`
})
