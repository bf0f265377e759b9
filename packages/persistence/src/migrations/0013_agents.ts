/** Agent provider connections: model keys and compute accounts held in custody (envelope encryption). */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table agent_connections (
      id text collate "C" not null constraint agent_connections_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      provider text not null check (provider in ('anthropic', 'openai', 'gemini', 'modal')),
      name text not null,
      config_json text not null,
      key_hint text,
      status text not null check (status in ('verified', 'unverified', 'invalid')),
      last_verified_at timestamptz,
      sealed_key text,
      wrapped_data_key text,
      kek_id text,
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      deleted_at timestamptz,
      constraint agent_connections_custody_check check (
        (deleted_at is null and sealed_key is not null and wrapped_data_key is not null and kek_id is not null)
        or (deleted_at is not null and sealed_key is null and wrapped_data_key is null))
    )`
  // One live connection per (provider, name) in a workspace; disconnected rows free the name.
  yield* sql`
    create unique index agent_connections_name_key on agent_connections (org_id, provider, name)
      where deleted_at is null`
  yield* sql`create index agent_connections_org_idx on agent_connections (org_id, created_at desc, id desc)`
  // KEK rotation finds the data keys still wrapped under an older key.
  yield* sql`create index agent_connections_kek_idx on agent_connections (kek_id) where wrapped_data_key is not null`
})
