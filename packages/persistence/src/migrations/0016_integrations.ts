/** Integrations: connections, repo links, inbound deliveries, and the development simulator's installations. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table integration_connections (
      id text collate "C" not null constraint integration_connections_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      provider text not null,
      status text not null check (status in ('pending', 'active', 'suspended', 'revoked')),
      scope text not null check (scope in ('account', 'workspace')),
      share_mode text not null check (share_mode in ('auto', 'granted')),
      display_name text not null,
      external_account_login text,
      external_account_type text,
      external_account_id text,
      installation_id text,
      repository_selection text,
      permissions_json text not null,
      state_id text,
      state_issued_at timestamptz,
      state_expires_at timestamptz,
      state_consumed_at timestamptz,
      sealed_token text,
      wrapped_data_key text,
      kek_id text,
      created_by text not null,
      connected_at timestamptz,
      revoked_at timestamptz,
      suspended_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`
  // One installation binds one live connection across every workspace (spec: webhook-routed identities).
  yield* sql`
    create unique index integration_connections_installation_key
      on integration_connections (provider, installation_id)
      where installation_id is not null and status <> 'revoked'`
  // Within a workspace one provider account backs at most one live connection.
  yield* sql`
    create unique index integration_connections_account_key
      on integration_connections (org_id, provider, external_account_id)
      where external_account_id is not null and status <> 'revoked'`
  yield* sql`create index integration_connections_org_idx on integration_connections (org_id, created_at desc, id desc)`

  yield* sql`
    create table integration_repo_links (
      id text collate "C" not null constraint integration_repo_links_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      connection_id text collate "C" not null references integration_connections (id),
      repo_external_id text not null,
      repo_full_name text not null,
      default_branch text not null,
      branch_env_map_json text not null,
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      deleted_at timestamptz
    )`
  yield* sql`
    create unique index integration_repo_links_project_repo_key
      on integration_repo_links (project_id, repo_external_id) where deleted_at is null`
  yield* sql`
    create index integration_repo_links_repo_idx
      on integration_repo_links (connection_id, repo_external_id) where deleted_at is null`
  yield* sql`create index integration_repo_links_org_idx on integration_repo_links (org_id) where deleted_at is null`

  yield* sql`
    create table integration_deliveries (
      id text collate "C" not null constraint integration_deliveries_pkey primary key,
      provider text not null,
      delivery_key text not null,
      connection_id text collate "C" references integration_connections (id),
      installation_id text,
      event text not null,
      action text,
      status text not null check (status in ('received', 'attributed', 'emitted', 'skipped', 'failed')),
      signature_ok boolean not null,
      failure_reason text,
      headers_json text not null,
      body_base64 text not null,
      received_at timestamptz not null,
      processed_at timestamptz,
      constraint integration_deliveries_key unique (provider, delivery_key)
    )`
  yield* sql`
    create index integration_deliveries_connection_idx
      on integration_deliveries (connection_id, received_at desc, id desc)`

  yield* sql`
    create table integration_grants (
      connection_id text collate "C" not null references integration_connections (id),
      workspace_org_id text collate "C" not null references organizations (id),
      created_by text not null,
      created_at timestamptz not null,
      constraint integration_grants_pkey primary key (connection_id, workspace_org_id)
    )`
  yield* sql`create index integration_grants_workspace_idx on integration_grants (workspace_org_id)`

  yield* sql`
    create table integration_scope_templates (
      org_id text collate "C" not null references organizations (id),
      provider text not null,
      template_id text not null,
      display_name text not null,
      description text not null,
      permissions_json text not null,
      status text not null check (status in ('active', 'retired')),
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint integration_scope_templates_pkey primary key (org_id, provider, template_id)
    )`

  // The development simulator's installations (never used in production, where the table stays empty).
  yield* sql`
    create table dev_scmhost_installations (
      id text not null primary key,
      account_id text not null unique,
      account_login text not null,
      account_type text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`
})
