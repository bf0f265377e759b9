/**
 * Workspaces: `SCALE_SMALL_TENANTS` small tenants (default 100,000), each an account root with one owner user, its
 * member row and owner binding; the bench user belongs to `SCALE_USER_WORKSPACES` of them (default 5,000) and owns
 * `SCALE_CHILD_WORKSPACES` child workspaces under the tenant's account (default 1,000). Times the bench user's
 * workspace list and the account's children, first page and deep.
 */
import { area, bulkLoad, firstPageSql, idSql, inChunks, scaleOf, type Tenant, uuidSql } from "./kit.ts"

const SMALL = scaleOf("SCALE_SMALL_TENANTS", 100_000)
const USER_WORKSPACES = Math.min(SMALL, scaleOf("SCALE_USER_WORKSPACES", 5_000))
const CHILDREN = scaleOf("SCALE_CHILD_WORKSPACES", 1_000)

export const workspaces = area({
  name: "workspaces",
  load: async (context) => {
    const { db, tenant } = context
    const org = (seed: string) => idSql("org_", seed)
    await bulkLoad(db, ["organizations", "members", "role_bindings", "users"], async () => {
      await inChunks(context, "small tenants", SMALL, 50_000, (from, to) => `
        with owners as (
          insert into users (id, email, display_name, last_org_slug, email_verified, created_at, updated_at)
          select ${idSql("usr_", "'small' || g")}, 'owner-' || g || '@small.example', 'Owner ' || g, null, true,
            now() - interval '1 minute' * g, now()
          from generate_series(${from}, ${to}) g
        ),
        orgs as (
          insert into organizations (id, public_id, name, slug, kind, account_id, is_account_root, created_at,
            updated_at)
          select ${org("'small' || g")}, ${idSql("ws_", "'small' || g")}, 'Small ' || g, 'small-' || g,
            (select kind from organizations where id = '${tenant.orgId}'), ${idSql("ws_", "'small' || g")}, true,
            now() - interval '1 minute' * g, now()
          from generate_series(${from}, ${to}) g
        ),
        bindings as (
          insert into role_bindings (id, org_id, subject_type, subject_id, role, scope_kind, scope_ref, created_at)
          select ${uuidSql("'small' || g")}, ${org("'small' || g")}, 'user', ${idSql("usr_", "'small' || g")},
            'owner', 'organization', null, now() - interval '1 minute' * g
          from generate_series(${from}, ${to}) g
        )
        insert into members (id, org_id, subject_type, subject_id, status, joined_at)
        select ${idSql("mem_", "'small' || g")}, ${org("'small' || g")}, 'user', ${idSql("usr_", "'small' || g")},
          'active', now() - interval '1 minute' * g
        from generate_series(${from}, ${to}) g`)
      // The bench user in USER_WORKSPACES of them, as a developer.
      await db.query(`
        with m as (
          insert into members (id, org_id, subject_type, subject_id, status, joined_at)
          select ${idSql("mem_", "'bench' || g")}, ${org("'small' || g")}, 'user', '${tenant.userId}', 'active', now()
          from generate_series(1, ${USER_WORKSPACES}) g
        )
        insert into role_bindings (id, org_id, subject_type, subject_id, role, scope_kind, scope_ref, created_at)
        select ${uuidSql("'bench' || g")}, ${org("'small' || g")}, 'user', '${tenant.userId}', 'builder',
          'organization', null, now()
        from generate_series(1, ${USER_WORKSPACES}) g`)
      // Child workspaces under the tenant's account.
      await db.query(`
        insert into organizations (id, public_id, name, slug, kind, account_id, is_account_root, created_at, updated_at)
        select ${org("'child' || g")}, ${idSql("ws_", "'child' || g")}, 'Child ' || g, 'child-' || g, o.kind,
          o.account_id, false, now() - interval '1 minute' * g, now()
        from generate_series(1, ${CHILDREN}) g, organizations o where o.id = '${tenant.orgId}'`)
    })
    // The account root the children sit under (the tenant itself when it is one).
    const { rows } = await db.query<{ id: string; publicId: string }>(
      `select r.id, r.public_id as "publicId" from organizations o join organizations r on r.public_id = o.account_id
       where o.id = $1`,
      [tenant.orgId]
    )
    return rows[0] ?? { id: tenant.orgId, publicId: "" }
  },
  routes: (tenant: Tenant, root: { readonly id: string; readonly publicId: string }) => [
    {
      area: "workspaces",
      label: `GET /v1/organizations (${USER_WORKSPACES + 1} workspaces)`,
      path: "/v1/organizations",
      sql: firstPageSql(
        "select o.* from members m join organizations o on o.id = m.org_id",
        `m.subject_type = 'user' and m.subject_id = '${tenant.userId}' and m.status = 'active'`,
        "o.created_at",
        "o.id"
      )
    },
    {
      area: "workspaces",
      label: `GET /v1/organizations, page ${Math.min(50, Math.floor(USER_WORKSPACES / 100))}`,
      path: "/v1/organizations?limit=100",
      depth: Math.min(50, Math.floor(USER_WORKSPACES / 100))
    },
    {
      area: "workspaces",
      label: `GET …/workspaces (${CHILDREN} children)`,
      path: `/v1/organizations/${root.id}/workspaces`,
      sql: firstPageSql("select * from organizations", `account_id = '${root.publicId}' and not is_account_root`)
    }
  ]
})
