/**
 * The run-state plane, part II: the content-addressed object store (run-state.md §4). Bytes live in PostgreSQL itself,
 * in chunk rows of at most 1 MiB keyed by a blob id: a single PUT writes one blob, an upload one blob per part, and an
 * object lists its blobs in order. Blobs are written by autocommit statements before the object row exists, so a
 * transfer holds no transaction open; chunks no object or upload part names are swept as orphans.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table objects (
      project_id text collate "C" not null references projects (id),
      digest text collate "C" not null,
      org_id text collate "C" not null references organizations (id),
      size bigint not null check (size >= 0),
      blobs jsonb not null,
      refers_to jsonb not null,
      created_at timestamptz not null,
      last_accessed_at timestamptz not null,
      constraint objects_pkey primary key (project_id, digest)
    )`
  // The list, newest first (keyset on created_at, digest); GC walks a project's objects by last access.
  yield* sql`create index objects_project_created_idx on objects (project_id, created_at desc, digest desc)`
  yield* sql`create index objects_org_idx on objects (org_id)`
  // GC: an object's referrers (`refers_to @> '["sha256:…"]'`).
  yield* sql`create index objects_refers_to_idx on objects using gin (refers_to jsonb_path_ops)`
  // The orphan sweep: which object holds a blob.
  yield* sql`create index objects_blobs_idx on objects using gin (blobs jsonb_path_ops)`

  yield* sql`
    create table object_chunks (
      blob_id text collate "C" not null,
      seq integer not null,
      data bytea not null,
      created_at timestamptz not null,
      constraint object_chunks_pkey primary key (blob_id, seq)
    )`
  // The orphan sweep: chunks by age.
  yield* sql`create index object_chunks_created_idx on object_chunks (created_at) where seq = 0`

  yield* sql`
    create table object_uploads (
      id text collate "C" not null constraint object_uploads_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      digest text collate "C" not null,
      size bigint not null check (size >= 0),
      created_at timestamptz not null,
      expires_at timestamptz not null
    )`
  yield* sql`create index object_uploads_expires_idx on object_uploads (expires_at)`

  yield* sql`
    create table object_upload_parts (
      upload_id text collate "C" not null references object_uploads (id) on delete cascade,
      part_number integer not null check (part_number between 1 and 10000),
      blob_id text collate "C" not null,
      size bigint not null check (size >= 0),
      created_at timestamptz not null,
      constraint object_upload_parts_pkey primary key (upload_id, part_number)
    )`
  yield* sql`create index object_upload_parts_blob_idx on object_upload_parts (blob_id)`
})
