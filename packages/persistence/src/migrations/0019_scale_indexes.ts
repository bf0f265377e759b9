/**
 * Indexes that keep every read fast at ten million rows in one workspace (issue 19, measured by `bench/scale`).
 *
 * Audit: a page is the newest entries matching up to two equality filters, so every filter alone and every pair of
 * filters has an index whose equality prefix is exactly those columns, followed by the keyset order. A page is then
 * one index range read from its start, and a combination that matches nothing is an empty range, whatever each
 * filter matches on its own (a single-column index walked in time order would read every row of the one filter
 * looking for the other). `from`/`to` bound the time column that ends every index. 0001 made the ones for the
 * workspace, category, actor, event type and subject (kind and id); this adds the rest.
 *
 * Members: the member list pages a workspace's members by `(joined_at, id)`, which no index ordered (only the
 * `(org_id, subject_type, subject_id)` key), so each page sorted every member of the workspace; and the roles of a
 * page's members (`org_id = … and subject_id = any(…)`) read every binding of the workspace, since the grant key puts
 * `subject_type` between the two.
 *
 * Runs: a project's run list filters by `status` and `environmentId`; as for audit, each filter and the pair get an
 * index in the keyset order (an environment belongs to one project, so its index needs no project column), or a
 * status that no run of a busy project has walks every run of the project.
 *
 * Webhooks: an endpoint's statistics took the latest success and failure over its whole history; the latest
 * completion per status is now one probe of an index.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The audit filters' columns, with the short name their index is called by. */
const AUDIT_FILTERS: ReadonlyArray<readonly [column: string, short: string]> = [
  ["category", "category"],
  ["event_type", "event_type"],
  ["actor_type", "actor_type"],
  ["actor_id", "actor"],
  ["subject_kind", "subject_kind"],
  ["subject_id", "subject_id"]
]

/** Equality prefixes 0001 already indexed (as column lists). */
const EXISTING = new Set(["category", "event_type", "actor_id", "subject_kind,subject_id"])

/** Every filter alone and every pair, in `AUDIT_FILTERS` order, minus the ones 0001 made. */
export const auditIndexPrefixes: ReadonlyArray<ReadonlyArray<readonly [column: string, short: string]>> = [
  ...AUDIT_FILTERS.map((filter) => [filter]),
  ...AUDIT_FILTERS.flatMap((first, i) => AUDIT_FILTERS.slice(i + 1).map((second) => [first, second]))
].filter((prefix) => !EXISTING.has(prefix.map(([column]) => column).join(",")))

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (const prefix of auditIndexPrefixes) {
    const name = `audit_entries_${prefix.map(([, short]) => short).join("_")}_idx`
    const columns = prefix.map(([column]) => column).join(", ")
    yield* sql.unsafe(`create index ${name} on audit_entries (org_id, ${columns}, occurred_at desc, id desc)`)
  }
  yield* sql`create index members_org_joined_idx on members (org_id, joined_at desc, id desc)`
  yield* sql`create index role_bindings_org_subject_idx on role_bindings (org_id, subject_id)`
  yield* sql`create index runs_project_status_idx on runs (project_id, status, created_at desc, id desc)`
  yield* sql`create index runs_environment_idx on runs (environment_id, created_at desc, id desc)`
  yield* sql`create index runs_environment_status_idx on runs (environment_id, status, created_at desc, id desc)`
  yield* sql`
    create index webhook_deliveries_completed_idx on webhook_deliveries (endpoint_id, status, completed_at)`
})
