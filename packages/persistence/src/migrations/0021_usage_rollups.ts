/**
 * Rollups off the ingest path: an ingest statement adds its records' per-hour sums to `usage_rollup_pending` (plain
 * inserts, no shared row to wait for), and the roll-up fiber of each replica folds claimed pending rows into the
 * hourly and daily `usage_rollups` (`for update skip locked`, one statement per claim). Quota usage reads both tables
 * in one statement, so it is exact whatever has been folded yet.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // One row per (ingest statement, workspace, project, environment, metric, UTC hour); never updated, only deleted.
  yield* sql`
    create table usage_rollup_pending (
      id bigint generated always as identity constraint usage_rollup_pending_pkey primary key,
      org_id text collate "C" not null,
      project_id text collate "C",
      environment_id text collate "C",
      metric text collate "C" not null,
      hour_start timestamptz not null,
      quantity numeric not null,
      record_count bigint not null,
      created_at timestamptz not null
    )`
  // Quota usage sums a workspace's pending rows of one metric and period.
  yield* sql`create index usage_rollup_pending_metric_idx on usage_rollup_pending (org_id, metric, hour_start)`
})
