/**
 * Projects: `SCALE_PROJECTS` projects in the tenant (default 100,000), every tenth archived, the first with
 * `SCALE_ENVIRONMENTS` environments (default 1,000) and every other with two. Times the project list (first page
 * and deep) and one project's environments.
 */
import { area, bulkLoad, firstPageSql, idSql, inChunks, scaleOf, type Tenant } from "./kit.ts"

const PROJECTS = scaleOf("SCALE_PROJECTS", 100_000)
const ENVIRONMENTS = scaleOf("SCALE_ENVIRONMENTS", 1_000)

/** The `k`-th project's id, as the audit module names its subjects. */
const projectIdSql = (k: string) => idSql("prj_", `'project' || ${k}`)

export const projects = area({
  name: "projects",
  load: async (context) => {
    const { db, tenant } = context
    await bulkLoad(db, ["projects", "environments"], async () => {
      await inChunks(context, "projects", PROJECTS, 50_000, (from, to) => `
        with p as (
          insert into projects (id, org_id, name, slug, status, created_at, updated_at, archived_at)
          select ${projectIdSql("g")}, '${tenant.orgId}', 'Project ' || g, 'project-' || g,
            case when g % 10 = 0 then 'archived' else 'active' end, now() - interval '1 minute' * g, now(),
            case when g % 10 = 0 then now() else null end
          from generate_series(${from - 1}, ${to - 1}) g
        )
        insert into environments (id, org_id, project_id, name, slug, status, created_at, updated_at, archived_at,
          last_active_at)
        select ${idSql("env_", "'environment' || g || '-' || e")}, '${tenant.orgId}', ${projectIdSql("g")},
          'Env ' || e, 'env-' || e, 'active', now() - interval '1 minute' * g, now(), null, null
        from generate_series(${from - 1}, ${
        to - 1
      }) g, generate_series(1, case when g = 0 then ${ENVIRONMENTS} else 2 end) e`)
    })
    const { rows } = await db.query<{ id: string }>(`select ${projectIdSql("0")} as id`)
    return rows[0]?.id ?? ""
  },
  routes: (tenant: Tenant, firstProject: string) => [
    {
      area: "projects",
      label: `GET …/projects (${PROJECTS})`,
      path: `/v1/organizations/${tenant.orgId}/projects`,
      sql: firstPageSql("select * from projects", `org_id = '${tenant.orgId}'`)
    },
    {
      area: "projects",
      label: "GET …/projects, page 1000",
      path: `/v1/organizations/${tenant.orgId}/projects?limit=50`,
      depth: Math.min(1000, Math.floor(PROJECTS / 50) - 1)
    },
    {
      area: "projects",
      label: `GET …/environments (${ENVIRONMENTS})`,
      path: `/v1/organizations/${tenant.orgId}/projects/${firstProject}/environments`,
      sql: firstPageSql("select * from environments", `project_id = '${firstProject}'`)
    }
  ]
})
