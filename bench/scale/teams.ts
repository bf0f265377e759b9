/**
 * Teams: `SCALE_TEAMS` teams in the tenant (default 5,000), each with four members from the tenant's users and two
 * grants (a workspace role and a project role); the first team has 2,000 members. Times the team list (first page
 * and deep), the first team's members, and the workspace's team grants.
 */
import { area, bulkLoad, firstPageSql, idSql, scaleOf, type Tenant, uuidSql, withProfileSql } from "./kit.ts"

const TEAMS = scaleOf("SCALE_TEAMS", 5_000)
const MEMBERS = scaleOf("SCALE_MEMBERS", 20_000)
const BIG_TEAM = Math.min(MEMBERS, 2_000)

const teamIdSql = (k: string) => idSql("team_", `'team' || ${k}`)

export const teams = area({
  name: "teams",
  load: async ({ db, tenant }) => {
    await bulkLoad(db, ["teams", "team_members", "team_role_grants"], async () => {
      await db.query(`
        insert into teams (id, org_id, name, slug, status, created_at, updated_at)
        select ${teamIdSql("g")}, '${tenant.orgId}', 'Team ' || g, 'team-' || g, 'active',
          now() - interval '1 minute' * g, now()
        from generate_series(0, ${TEAMS - 1}) g`)
      await db.query(`
        insert into team_members (team_id, subject_type, subject_id, status, created_at)
        select distinct on (t, u) ${teamIdSql("t")}, 'user', ${idSql("usr_", "'u' || u")}, 'active', now()
        from (
          select g as t, (g * 7 + m) % ${MEMBERS} as u from generate_series(1, ${TEAMS - 1}) g, generate_series(1, 4) m
          union all select 0, m from generate_series(0, ${BIG_TEAM - 1}) m
        ) s`)
      await db.query(`
        insert into team_role_grants (id, team_id, role, scope_kind, scope_ref, created_at)
        select ${uuidSql("'grant' || g || '-' || r")}, ${teamIdSql("g")},
          case r when 1 then 'viewer' else 'project_builder' end,
          case r when 1 then 'organization' else 'project' end,
          case r when 1 then null else ${idSql("prj_", "'project' || (g % 1000)")} end,
          now() - interval '1 minute' * g
        from generate_series(0, ${TEAMS - 1}) g, generate_series(1, 2) r`)
    })
    const { rows } = await db.query<{ id: string }>(`select ${teamIdSql("0")} as id`)
    return rows[0]?.id ?? ""
  },
  routes: (tenant: Tenant, firstTeam: string) => [
    {
      area: "teams",
      label: `GET …/teams (${TEAMS})`,
      path: `/v1/organizations/${tenant.orgId}/teams`,
      sql: firstPageSql("select * from teams", `org_id = '${tenant.orgId}'`)
    },
    {
      area: "teams",
      label: "GET …/teams, page 100",
      path: `/v1/organizations/${tenant.orgId}/teams?limit=20`,
      depth: Math.min(100, Math.floor(TEAMS / 20) - 1)
    },
    {
      area: "teams",
      label: `GET …/teams/:id/members (${BIG_TEAM})`,
      path: `/v1/organizations/${tenant.orgId}/teams/${firstTeam}/members`,
      sql: firstPageSql(withProfileSql("team_members"), `s.team_id = '${firstTeam}'`, "s.created_at", "s.subject_id")
    },
    {
      area: "teams",
      label: `GET …/team-roles (${TEAMS * 2})`,
      path: `/v1/organizations/${tenant.orgId}/team-roles`,
      sql: firstPageSql(
        "select g.* from team_role_grants g join teams t on t.id = g.team_id",
        `t.org_id = '${tenant.orgId}'`,
        "g.created_at",
        "g.id"
      )
    }
  ]
})
