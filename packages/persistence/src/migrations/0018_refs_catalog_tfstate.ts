/**
 * The run-state plane, part II (the half beside the object store): refs with compare-and-swap versions, each
 * project's catalog head with its publish history and the entity read model a published catalog fills, and the
 * Terraform `http` backend's states with their lock and every stored version. Refs and catalog heads name object
 * digests; the garbage collector reads them as roots.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table state_refs (
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      name text collate "C" not null,
      digest text collate "C" not null,
      version integer not null,
      updated_at timestamptz not null,
      updated_by jsonb not null,
      constraint state_refs_pkey primary key (project_id, name)
    )`
  // GC roots: every digest a ref names.
  yield* sql`create index state_refs_digest_idx on state_refs (digest)`

  yield* sql`
    create table catalog_heads (
      project_id text collate "C" not null constraint catalog_heads_pkey primary key references projects (id),
      org_id text collate "C" not null references organizations (id),
      digest text collate "C" not null,
      version integer not null,
      published_at timestamptz not null,
      published_by jsonb not null
    )`

  yield* sql`
    create table catalog_head_history (
      project_id text collate "C" not null references projects (id),
      org_id text collate "C" not null,
      version integer not null,
      -- The version zero-padded: the key of the newest-first keyset (published_at, id).
      id text collate "C" not null,
      digest text collate "C" not null,
      published_at timestamptz not null,
      published_by jsonb not null,
      constraint catalog_head_history_pkey primary key (project_id, version)
    )`

  yield* sql`
    create table catalog_entities (
      project_id text collate "C" not null references projects (id),
      org_id text collate "C" not null,
      position integer not null,
      kind text not null,
      name text not null,
      owner text,
      environment text,
      description text,
      metadata jsonb not null,
      constraint catalog_entities_pkey primary key (project_id, position)
    )`
  yield* sql`create index catalog_entities_org_idx on catalog_entities (org_id, kind, name)`

  yield* sql`
    create table tfstates (
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      component text collate "C" not null,
      environment_id text collate "C" not null references environments (id),
      current_version integer,
      last_version integer not null,
      lock_id text,
      lock_info text,
      locked_at timestamptz,
      updated_at timestamptz not null,
      constraint tfstates_pkey primary key (project_id, component, environment_id)
    )`

  yield* sql`
    create table tfstate_versions (
      project_id text collate "C" not null,
      component text collate "C" not null,
      environment_id text collate "C" not null,
      version integer not null,
      serial bigint,
      lineage text,
      size integer not null,
      content bytea not null,
      created_at timestamptz not null,
      created_by jsonb not null,
      purge_after timestamptz,
      constraint tfstate_versions_pkey primary key (project_id, component, environment_id, version),
      constraint tfstate_versions_state_fkey foreign key (project_id, component, environment_id)
        references tfstates (project_id, component, environment_id)
    )`
  // Versions of a deleted state are purged 30 days after the delete.
  yield* sql`create index tfstate_versions_purge_idx on tfstate_versions (purge_after) where purge_after is not null`
})
