/**
 * Members: `SCALE_MEMBERS` users (default 20,000) who are members of the tenant (builders), their ids the ones the
 * audit module uses for its user actors, plus 2,000 pending invitations. Times the member and invitation lists.
 */
import { area, bulkLoad, firstPageSql, idSql, scaleOf, type Tenant, uuidSql, withProfileSql } from "./kit.ts"

const MEMBERS = scaleOf("SCALE_MEMBERS", 20_000)
const INVITATIONS = scaleOf("SCALE_INVITATIONS", 2_000)

export const members = area({
  name: "members",
  load: async ({ db, tenant }) => {
    await bulkLoad(db, ["users", "members", "role_bindings", "invitations"], async () => {
      await db.query(`
        with u as (
          insert into users (id, email, display_name, last_org_slug, email_verified, created_at, updated_at)
          select ${idSql("usr_", "'u' || g")}, 'member-' || g || '@big.example', 'Member ' || g, null, true,
            now() - interval '1 minute' * g, now()
          from generate_series(0, ${MEMBERS - 1}) g
        ),
        b as (
          insert into role_bindings (id, org_id, subject_type, subject_id, role, scope_kind, scope_ref, created_at)
          select ${uuidSql("'mb' || g")}, '${tenant.orgId}', 'user', ${idSql("usr_", "'u' || g")}, 'builder',
            'organization', null, now() - interval '1 minute' * g
          from generate_series(0, ${MEMBERS - 1}) g
        )
        insert into members (id, org_id, subject_type, subject_id, status, joined_at)
        select ${idSql("mem_", "'u' || g")}, '${tenant.orgId}', 'user', ${idSql("usr_", "'u' || g")}, 'active',
          now() - interval '1 minute' * g
        from generate_series(0, ${MEMBERS - 1}) g`)
      await db.query(`
        insert into invitations (id, org_id, email, role, status, token_hash, invited_by, expires_at, created_at)
        select ${idSql("inv_", "'i' || g")}, '${tenant.orgId}', 'invitee-' || g || '@big.example', 'viewer',
          'pending', md5('inv' || g), '${tenant.userId}', now() + interval '7 days', now() - interval '1 minute' * g
        from generate_series(1, ${INVITATIONS}) g`)
    })
    return null
  },
  routes: (tenant: Tenant) => [
    {
      area: "members",
      label: `GET …/members (${MEMBERS})`,
      path: `/v1/organizations/${tenant.orgId}/members`,
      sql: firstPageSql(withProfileSql("members"), `s.org_id = '${tenant.orgId}'`, "s.joined_at", "s.id")
    },
    {
      area: "members",
      label: "GET …/members, page 100",
      path: `/v1/organizations/${tenant.orgId}/members?limit=100`,
      depth: Math.min(100, Math.floor(MEMBERS / 100) - 1)
    },
    {
      area: "members",
      label: `GET …/invitations (${INVITATIONS})`,
      path: `/v1/organizations/${tenant.orgId}/invitations`
    }
  ]
})
