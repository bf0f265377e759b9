/** Workspaces tables: organizations (account roots and children), members and role bindings. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // Ids and slugs are compared byte-wise (collation "C"): the order memory repositories use, and slug ranges.
  yield* sql`
    create table organizations (
      id text collate "C" not null constraint organizations_pkey primary key,
      public_id text collate "C" not null constraint organizations_public_id_key unique,
      name text not null,
      slug text collate "C" not null constraint organizations_slug_key unique,
      kind text not null,
      account_id text collate "C" not null
        constraint organizations_account_fkey references organizations (public_id),
      is_account_root boolean not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint organizations_account_root_check check (is_account_root = (account_id = public_id))
    )`
  // An account's child workspaces, newest first.
  yield* sql`
    create index organizations_children_idx on organizations (account_id, created_at desc, id desc)
    where not is_account_root`

  yield* sql`
    create table members (
      id text collate "C" not null constraint members_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      subject_type text not null check (subject_type in ('user', 'service_principal')),
      subject_id text collate "C" not null,
      status text not null,
      joined_at timestamptz not null,
      constraint members_org_subject_key unique (org_id, subject_type, subject_id)
    )`
  // The workspaces a subject belongs to.
  yield* sql`create index members_subject_idx on members (subject_type, subject_id)`

  yield* sql`
    create table role_bindings (
      id text collate "C" not null constraint role_bindings_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      subject_type text not null check (subject_type in ('user', 'service_principal')),
      subject_id text collate "C" not null,
      role text not null,
      scope_kind text not null check (scope_kind in ('organization', 'project', 'account')),
      scope_ref text collate "C",
      created_at timestamptz not null,
      constraint role_bindings_scope_ref_check check ((scope_kind = 'project') = (scope_ref is not null)),
      constraint role_bindings_grant_key unique nulls not distinct
        (org_id, subject_type, subject_id, role, scope_kind, scope_ref)
    )`
  // Bindings by subject across workspaces (the owned account roots of a user); by workspace and subject, the
  // grant key's index serves.
  yield* sql`create index role_bindings_subject_idx on role_bindings (subject_type, subject_id)`
})
