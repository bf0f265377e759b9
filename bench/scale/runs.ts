/**
 * Runs: `SCALE_RUNS` runs (default 100,000) with `SCALE_JOBS_PER_RUN` jobs each (default 10: 1,000,000 jobs), half of
 * the runs in the tenant's first project (the hot one, spread over its first two environments), the rest over the
 * next 1,000 projects; 80 % succeeded, 15 % failed, 4 % running, 1 % queued, none canceled (so `status=canceled` is
 * a filter that matches nothing). Times the hot project's run list: first page, deep, each filter and the pair.
 * Needs the projects area (the run's project and environments).
 */
import { area, bulkLoad, firstPageSql, idSql, inChunks, scaleOf, type Tenant } from "./kit.ts"

const RUNS = scaleOf("SCALE_RUNS", 100_000)
const JOBS = scaleOf("SCALE_JOBS_PER_RUN", 10)

const projectIdSql = (k: string) => idSql("prj_", `'project' || ${k}`)
const environmentIdSql = (project: string, e: string) => idSql("env_", `'environment' || ${project} || '-' || ${e}`)
/** A run id is the ULID its client minted: 26 characters. */
const runIdSql = (k: string) => `upper(substr(md5('run' || ${k}), 1, 26))`

export const runs = area({
  name: "runs",
  load: async (context) => {
    const { db, tenant } = context
    await bulkLoad(db, ["runs", "jobs"], () =>
      inChunks(context, "runs", RUNS, 20_000, (from, to) => `
        with r as (
          select g, case when g % 2 = 0 then 0 else 1 + g % 1000 end as p,
            case when g % 100 < 80 then 'succeeded' when g % 100 < 95 then 'failed' when g % 100 < 99 then 'running'
              else 'queued' end as status,
            now() - interval '1 second' * g * 30 as at
          from generate_series(${from}, ${to}) g
        ),
        inserted as (
          insert into runs (id, org_id, project_id, environment_id, status, trigger, metadata, created_by, job_counts,
            body_hash, next_seq, created_at, started_at, finished_at, canceled_at)
          select ${runIdSql("g")}, '${tenant.orgId}', ${projectIdSql("p")}, ${environmentIdSql("p", "1 + g % 2")},
            status, '{"kind":"ci","ref":"refs/heads/main"}'::jsonb, '{}'::jsonb,
            jsonb_build_object('id', '${tenant.userId}', 'kind', 'user'),
            jsonb_build_object('pending', 0, 'running', 0, 'succeeded', ${JOBS}, 'failed', 0, 'timed_out', 0,
              'memoized', 0, 'canceled', 0),
            md5('body' || g), 1, at, at, at + interval '5 minutes', null
          from r
        )
        insert into jobs (run_id, job_id, org_id, project_id, position, name, depends_on, status, attempt, lease_epoch,
          runner_id, lease_expires_at, lease_seconds, timeout_seconds, hermetic, job_input_hash, exit_code, outputs,
          error_message, started_at, finished_at, updated_at)
        select ${runIdSql("g")}, 'job-' || j, '${tenant.orgId}', ${projectIdSql("p")}, j, 'Job ' || j, '[]'::jsonb,
          'succeeded', 1, 1, null, null, null, null, false, null, 0, '{}'::jsonb, null, at, at, at
        from r, generate_series(1, ${JOBS}) j`))
    const { rows } = await db.query<{ project: string; environment: string }>(
      `select ${projectIdSql("0")} as project, ${environmentIdSql("0", "1")} as environment`
    )
    return rows[0] ?? { project: "", environment: "" }
  },
  routes: (tenant: Tenant, hot: { readonly project: string; readonly environment: string }) => {
    const path = `/v1/organizations/${tenant.orgId}/projects/${hot.project}/state/runs`
    const project = `org_id = '${tenant.orgId}' and project_id = '${hot.project}'`
    const list = (label: string, query: string, where: string) => ({
      area: "runs",
      label: `GET …/state/runs${label}`,
      path: `${path}${query}`,
      sql: firstPageSql("select * from runs", `${project}${where}`)
    })
    return [
      list(` (${RUNS / 2} in the project)`, "", ""),
      {
        area: "runs",
        label: "GET …/state/runs, page 1000",
        path: `${path}?limit=20`,
        depth: Math.min(1000, RUNS / 40 - 1)
      },
      list("?status=failed", "?status=failed", " and status = 'failed'"),
      list("?status=canceled (none)", "?status=canceled", " and status = 'canceled'"),
      list("?environmentId", `?environmentId=${hot.environment}`, ` and environment_id = '${hot.environment}'`),
      list(
        "?environmentId&status=canceled (none)",
        `?environmentId=${hot.environment}&status=canceled`,
        ` and environment_id = '${hot.environment}' and status = 'canceled'`
      )
    ]
  }
})
