/** Projects and environments: archived, never deleted. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table projects (
      id text collate "C" not null constraint projects_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      name text not null,
      slug text collate "C" not null,
      status text not null check (status in ('active', 'archived')),
      created_at timestamptz not null,
      updated_at timestamptz not null,
      archived_at timestamptz,
      constraint projects_org_slug_key unique (org_id, slug)
    )`
  // A workspace's projects, newest first (the keyset order of the list).
  yield* sql`create index projects_org_idx on projects (org_id, created_at desc, id desc)`

  yield* sql`
    create table environments (
      id text collate "C" not null constraint environments_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      name text not null,
      slug text collate "C" not null,
      status text not null check (status in ('active', 'archived')),
      created_at timestamptz not null,
      updated_at timestamptz not null,
      archived_at timestamptz,
      last_active_at timestamptz,
      constraint environments_project_slug_key unique (project_id, slug)
    )`
  yield* sql`create index environments_project_idx on environments (project_id, created_at desc, id desc)`
  // The idle sweep scans active environments by the time they were last used (or created).
  yield* sql`
    create index environments_idle_idx on environments ((coalesce(last_active_at, created_at)))
    where status = 'active'`
})
