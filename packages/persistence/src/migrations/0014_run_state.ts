/** The run-state plane, part I: runs, jobs and their leases, each run's event log, job logs and command-line links. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    create table runs (
      id text collate "C" not null constraint runs_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      environment_id text collate "C" references environments (id),
      status text not null check (status in ('queued', 'running', 'succeeded', 'failed', 'canceled')),
      trigger jsonb not null,
      metadata jsonb not null,
      created_by jsonb not null,
      job_counts jsonb not null,
      body_hash text not null,
      next_seq integer not null,
      created_at timestamptz not null,
      started_at timestamptz,
      finished_at timestamptz,
      canceled_at timestamptz
    )`
  // A project's runs, newest first (the keyset order of the list).
  yield* sql`create index runs_project_idx on runs (project_id, created_at desc, id desc)`

  yield* sql`
    create table jobs (
      run_id text collate "C" not null references runs (id),
      job_id text collate "C" not null,
      org_id text collate "C" not null,
      project_id text collate "C" not null,
      position integer not null,
      name text not null,
      depends_on jsonb not null,
      status text not null
        check (status in ('pending', 'running', 'succeeded', 'failed', 'timed_out', 'memoized', 'canceled')),
      attempt integer not null,
      lease_epoch integer not null,
      runner_id text,
      lease_expires_at timestamptz,
      lease_seconds integer,
      timeout_seconds integer,
      hermetic boolean not null,
      job_input_hash text,
      exit_code integer,
      outputs jsonb not null,
      error_message text,
      started_at timestamptz,
      finished_at timestamptz,
      updated_at timestamptz not null,
      constraint jobs_pkey primary key (run_id, job_id)
    )`
  // The lease sweep: running jobs by lease expiry.
  yield* sql`create index jobs_running_lease_idx on jobs (lease_expires_at) where status = 'running'`
  // Memoization: a succeeded hermetic job of the project with this id and input hash.
  yield* sql`
    create index jobs_memo_idx on jobs (project_id, job_id, job_input_hash)
    where status = 'succeeded' and hermetic and job_input_hash is not null`

  yield* sql`
    create table run_events (
      run_id text collate "C" not null references runs (id),
      seq integer not null,
      type text not null,
      job_id text,
      attempt integer,
      runner_id text,
      at timestamptz not null,
      data jsonb not null,
      constraint run_events_pkey primary key (run_id, seq)
    )`

  yield* sql`
    create table job_log_chunks (
      run_id text collate "C" not null references runs (id),
      job_id text collate "C" not null,
      attempt integer not null,
      seq integer not null,
      bytes integer not null,
      content text not null,
      created_at timestamptz not null,
      constraint job_log_chunks_pkey primary key (run_id, job_id, attempt, seq)
    )`

  yield* sql`
    create table cli_links (
      id text collate "C" not null constraint cli_links_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      project_id text collate "C" not null references projects (id),
      remote_url text collate "C" not null,
      provider text not null check (provider in ('scmhost', 'git')),
      provider_repo_id text,
      provider_owner_id text,
      provider_owner_login text,
      ci_settings jsonb not null,
      created_by jsonb not null,
      created_at timestamptz not null,
      last_seen_at timestamptz,
      deleted_at timestamptz
    )`
  // One active link per (workspace, project, remote URL); resolve looks links up by URL across workspaces.
  yield* sql`
    create unique index cli_links_active_key on cli_links (org_id, project_id, remote_url) where deleted_at is null`
  yield* sql`create index cli_links_url_idx on cli_links (remote_url) where deleted_at is null`
})
