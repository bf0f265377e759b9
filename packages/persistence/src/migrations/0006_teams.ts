/** Teams tables: teams, their members and the roles granted to them. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table teams (
      id text collate "C" not null constraint teams_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      name text not null,
      slug text collate "C" not null,
      status text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      constraint teams_org_slug_key unique (org_id, slug)
    )`
  // A workspace's teams, newest first (the keyset order of the list).
  yield* sql`create index teams_org_idx on teams (org_id, created_at desc, id desc)`

  // Deleting a team deletes its members and grants in the same statement: its grants stop applying at once.
  yield* sql`
    create table team_members (
      team_id text collate "C" not null references teams (id) on delete cascade,
      subject_type text not null check (subject_type in ('user', 'service_principal')),
      subject_id text collate "C" not null,
      status text not null,
      created_at timestamptz not null,
      constraint team_members_pkey primary key (team_id, subject_type, subject_id)
    )`
  // The teams of a subject: the edge's one workspace lookup starts from the caller.
  yield* sql`create index team_members_subject_idx on team_members (subject_type, subject_id)`
  // A team's members, newest first.
  yield* sql`create index team_members_list_idx on team_members (team_id, created_at desc, subject_id desc)`

  yield* sql`
    create table team_role_grants (
      id text collate "C" not null constraint team_role_grants_pkey primary key,
      team_id text collate "C" not null references teams (id) on delete cascade,
      role text not null,
      scope_kind text not null check (scope_kind in ('organization', 'project', 'account')),
      scope_ref text collate "C",
      created_at timestamptz not null,
      constraint team_role_grants_scope_ref_check check ((scope_kind = 'project') = (scope_ref is not null)),
      constraint team_role_grants_grant_key unique nulls not distinct (team_id, role, scope_kind, scope_ref)
    )`
})
