/**
 * Webhooks: 100 endpoints in the tenant and `SCALE_DELIVERY_ATTEMPTS` delivery attempts (default 1,000,000), 90 % of
 * them on the first endpoint (the busy one) over 90 days; 95 % succeeded, 5 % failed. Times the endpoint list, the
 * busy endpoint's attempts (first page and deep) and its statistics.
 */
import { area, bulkLoad, firstPageSql, idSql, inChunks, scaleOf, type Tenant } from "./kit.ts"

const ATTEMPTS = scaleOf("SCALE_DELIVERY_ATTEMPTS", 1_000_000)
const ENDPOINTS = 100

const endpointIdSql = (k: string) => idSql("whe_", `'endpoint' || ${k}`)
/** The `g`-th attempt's time: spread over the last 90 days, newest first. */
const at = `now() - interval '90 days' * (g::float8 / ${ATTEMPTS})`

export const webhooks = area({
  name: "webhooks",
  load: async (context) => {
    const { db, tenant } = context
    await bulkLoad(db, ["webhook_endpoints", "webhook_deliveries"], async () => {
      await db.query(`
        insert into webhook_endpoints (id, org_id, project_id, url, name, description, status, secret_version,
          sealed_secret, kek_id, consecutive_failures, created_at, updated_at)
        select ${endpointIdSql("g")}, '${tenant.orgId}', null, 'https://hooks.example.com/' || g, 'Endpoint ' || g,
          null, 'active', 1, 'sealed', 'kek', 0, now() - interval '1 hour' * g, now()
        from generate_series(0, ${ENDPOINTS - 1}) g`)
      await inChunks(context, "delivery attempts", ATTEMPTS, 500_000, (from, to) => `
        insert into webhook_deliveries (id, org_id, endpoint_id, subscription_id, event_id, event_type, status,
          attempt_number, http_status_code, failure_reason, idempotency_key, next_retry_at, completed_at, created_at,
          updated_at, body, due_at)
        select ${idSql("whd_", "'attempt' || g")}, '${tenant.orgId}',
          ${endpointIdSql(`case when g % 10 = 0 then 1 + g % ${ENDPOINTS - 1} else 0 end`)}, null,
          md5('event' || g)::uuid, 'project.created', case when g % 20 = 0 then 'failed' else 'success' end, 1,
          case when g % 20 = 0 then 500 else 200 end, null, md5('idem' || g),
          null, ${at}, ${at}, now(), '{}', null
        from generate_series(${from}, ${to}) g`)
    })
    const { rows } = await db.query<{ id: string }>(`select ${endpointIdSql("0")} as id`)
    return rows[0]?.id ?? ""
  },
  routes: (tenant: Tenant, busy: string) => {
    const endpoints = `/v1/organizations/${tenant.orgId}/webhooks/endpoints`
    return [
      {
        area: "webhooks",
        label: `GET …/webhooks/endpoints (${ENDPOINTS})`,
        path: endpoints,
        sql: firstPageSql("select * from webhook_endpoints", `org_id = '${tenant.orgId}'`)
      },
      {
        area: "webhooks",
        label: `GET …/delivery-attempts (${(ATTEMPTS * 0.9).toLocaleString("en")} on the endpoint)`,
        path: `${endpoints}/${busy}/delivery-attempts`,
        sql: firstPageSql("select * from webhook_deliveries", `endpoint_id = '${busy}'`)
      },
      {
        area: "webhooks",
        label: "GET …/delivery-attempts, page 1000",
        path: `${endpoints}/${busy}/delivery-attempts?limit=50`,
        depth: Math.min(1000, Math.floor((ATTEMPTS * 0.9) / 50) - 1)
      },
      {
        area: "webhooks",
        label: "GET …/endpoints/:id/stats",
        path: `${endpoints}/${busy}/stats`,
        sql: `select count(*) filter (where status = 'success')::int, count(*) filter (where status = 'failed')::int,
          (select max(completed_at) from webhook_deliveries where endpoint_id = '${busy}' and status = 'success'),
          (select max(completed_at) from webhook_deliveries where endpoint_id = '${busy}' and status = 'failed')
          from webhook_deliveries where endpoint_id = '${busy}' and created_at >= now() - interval '24 hours'`
      }
    ]
  }
})
