/**
 * Audit: `SCALE_AUDIT_ROWS` events and their audit entries (default 10 million) over 90 days in the tenant, with
 * skewed spreads: ~40 event types (the first few hot) in their categories, actors mostly users among the tenant's
 * members (a few very busy), some service principals and workflows, never `system`; subjects of the type's kind, a
 * hot few per kind. Then every filter alone (matching and matching nothing), every pair of filters (values chosen so
 * that pairs which cannot co-occur match nothing, the worst case for an index walk), and a page 1,000 pages deep.
 */
import { createHash } from "node:crypto"
import { area, bulkLoad, idSql, inChunks, scaleOf, skewSql, type Tenant, uuidSql } from "./kit.ts"

const ROWS = scaleOf("SCALE_AUDIT_ROWS", 10_000_000)
/** Distinct actors: users (the tenant's members), service principals, workflows. */
const USERS = scaleOf("SCALE_MEMBERS", 20_000)
const SERVICE_PRINCIPALS = 200
const WORKFLOWS = 500

/** Event type, its audit category (as `auditCategoryOf` gives it) and its subject's kind, hottest first. */
const TYPES: ReadonlyArray<readonly [type: string, category: string, subjectKind: string]> = [
  ["settings.updated", "configuration", "setting"],
  ["run.created", "run", "run"],
  ["run.finished", "run", "run"],
  ["feature.updated", "configuration", "feature_flag"],
  ["environment.created", "projects", "environment"],
  ["project.created", "projects", "project"],
  ["secrets.updated", "configuration", "secret"],
  ["api_key.created", "api_keys", "api_key"],
  ["membership.added", "membership", "member"],
  ["team.member.added", "teams", "team"],
  ["webhook_endpoint.updated", "webhooks", "webhook_endpoint"],
  ["quota.updated", "quota", "quota"],
  ["invite.created", "membership", "invitation"],
  ["environment.archived", "projects", "environment"],
  ["project.archived", "projects", "project"],
  ["team.updated", "teams", "team"],
  ["team.created", "teams", "team"],
  ["team.role.granted", "teams", "team"],
  ["team.role.revoked", "teams", "team"],
  ["member.role_changed", "membership", "member"],
  ["membership.removed", "membership", "member"],
  ["invite.accepted", "membership", "invitation"],
  ["invite.revoked", "membership", "invitation"],
  ["api_key.revoked", "api_keys", "api_key"],
  ["webhook_endpoint.created", "webhooks", "webhook_endpoint"],
  ["webhook_endpoint.deleted", "webhooks", "webhook_endpoint"],
  ["webhook_subscription.created", "webhooks", "webhook_subscription"],
  ["run.canceled", "run", "run"],
  ["quota.created", "quota", "quota"],
  ["quota.exceeded", "quota", "quota"],
  ["agent_provider.connected", "integrations", "agent_provider_connection"],
  ["agent_provider.updated", "integrations", "agent_provider_connection"],
  ["cli_link.created", "cli_link", "cli_link"],
  ["subscription.updated", "billing", "subscription"],
  ["invoice.paid", "billing", "invoice"],
  ["payment.failed", "billing", "invoice"],
  ["entitlements.updated", "billing", "organization"],
  ["organization.updated", "organization", "organization"],
  ["project.restored", "projects", "project"],
  ["webhook.disabled", "webhooks", "webhook_endpoint"]
]

/** How many distinct subjects of each kind (a hot few of each take most entries). */
const SUBJECTS: Readonly<Record<string, readonly [prefix: string, count: number]>> = {
  setting: ["stg_", 20_000],
  run: ["run_", 100_000],
  feature_flag: ["flg_", 5_000],
  environment: ["env_", 200_000],
  project: ["prj_", 100_000],
  secret: ["sec_", 20_000],
  api_key: ["key_", 2_000],
  member: ["mem_", 20_000],
  team: ["team_", 5_000],
  webhook_endpoint: ["whe_", 500],
  webhook_subscription: ["whs_", 1_000],
  quota: ["quo_", 200],
  invitation: ["inv_", 30_000],
  agent_provider_connection: ["apc_", 50],
  cli_link: ["wsl_", 1_000],
  subscription: ["sub_", 1],
  invoice: ["in_", 90],
  organization: ["org_", 1]
}

const literalArray = (values: ReadonlyArray<string>) => `array[${values.map((v) => `'${v}'`).join(", ")}]`

/** The id of the `k`-th subject of `kind`, as SQL over the integer expression `k`. */
const subjectIdSql = (kind: string, k: string) => idSql(SUBJECTS[kind]?.[0] ?? `${kind}_`, `'${kind}' || ${k}`)

/** The id of the `k`-th (hottest first) user, service principal or workflow actor. */
export const userIdOf = (k: number) => `usr_${md5Upper(`u${k}`)}`
const md5Upper = (seed: string) => createHash("md5").update(seed).digest("hex").slice(0, 26).toUpperCase()
const subjectIdOf = (kind: string, k: number) => `${SUBJECTS[kind]?.[0] ?? `${kind}_`}${md5Upper(`${kind}${k}`)}`

export const audit = area({
  name: "audit",
  load: async (context) => {
    const { db, tenant } = context
    const types = literalArray(TYPES.map(([type]) => type))
    const categories = literalArray(TYPES.map(([, category]) => category))
    const kinds = literalArray(TYPES.map(([, , kind]) => kind))
    // The subject id per row: a case over the kind, each a hot-skewed pick among that kind's subjects.
    const subjectCase = `case t.kind ${
      Object.entries(SUBJECTS).map(([kind, [, count]]) =>
        `when '${kind}' then ${kind === "organization" ? `'${tenant.orgId}'` : subjectIdSql(kind, skewSql(count, 3))}`
      ).join(" ")
    } end`
    await bulkLoad(
      db,
      ["events", "audit_entries"],
      () =>
        inChunks(context, "audit entries", ROWS, 1_000_000, (from, to) => `
        with picked as (
          select g,
            ${uuidSql("'e' || g")} as event_id,
            ${uuidSql("'a' || g")} as audit_id,
            now() - interval '90 days' * (g::float8 / ${ROWS}) - interval '1 second' * random() as at,
            1 + ${skewSql(TYPES.length, 2.5)} as type_index,
            random() as actor_roll,
            ${skewSql(USERS, 3)} as user_k,
            ${skewSql(SERVICE_PRINCIPALS, 2)} as sp_k,
            ${skewSql(WORKFLOWS, 2)} as wf_k
          from generate_series(${from}, ${to}) g
        ),
        t as (
          select p.*, (${types})[type_index] as type, (${categories})[type_index] as category,
            (${kinds})[type_index] as kind,
            case when actor_roll < 0.85 then 'user' when actor_roll < 0.97 then 'service_principal' else 'workflow' end
              as actor_type
          from picked p
        ),
        rows as (
          select t.*, ${subjectCase} as subject_id,
            case t.actor_type
              when 'user' then ${idSql("usr_", "'u' || t.user_k")}
              when 'service_principal' then ${idSql("sp_", "'s' || t.sp_k")}
              else 'workflow:' || ${idSql("run_", "'w' || t.wf_k")}
            end as actor_id
          from t
        ),
        event as (
          insert into events (id, org_id, type, occurred_at, actor_type, actor_id, subject_kind, subject_id,
            subject_name, project_id, environment_id, request_id, correlation_id, data, trace_context)
          select event_id, '${tenant.orgId}', type, at, actor_type, actor_id, kind, subject_id, null, null, null,
            'req_' || g, null, '{}'::jsonb, null
          from rows
        )
        insert into audit_entries (id, event_id, org_id, project_id, environment_id, actor_type, actor_id, event_type,
          source, category, description, subject_kind, subject_id, subject_name, occurred_at, request_id,
          correlation_id, payload)
        select audit_id, event_id, '${tenant.orgId}', null, null, actor_type, actor_id, type, 'api', category,
          type || ' by ' || actor_type, kind, subject_id, null, at, 'req_' || g, null, '{}'::jsonb
        from rows`)
    )
    return null
  },
  routes: (tenant: Tenant) => {
    const base = `/v1/organizations/${tenant.orgId}/audit`
    const day = 24 * 3600 * 1000
    const now = Date.now()
    const iso = (ms: number) => new Date(ms).toISOString()
    /** Each filter with a hot value and a second value of a different group (for the pairs), then a miss. */
    const filters: ReadonlyArray<readonly [name: string, first: string, second: string, miss: string]> = [
      ["category", "billing", "configuration", "nothing"],
      ["eventType", "team.updated", "settings.updated", "nothing.happened"],
      ["actorType", "workflow", "user", "system"],
      ["actorId", userIdOf(0), `sp_${md5Upper("s0")}`, "usr_00000000000000000000000000"],
      ["subjectKind", "project", "team", "nothing"],
      ["subjectId", subjectIdOf("team", 0), subjectIdOf("project", 0), "prj_00000000000000000000000000"],
      ["from", iso(now - 30 * day), iso(now - 60 * day), iso(now + day)]
    ]
    const columns: Readonly<Record<string, string>> = {
      category: "category = $",
      eventType: "event_type = $",
      actorType: "actor_type = $",
      actorId: "actor_id = $",
      subjectKind: "subject_kind = $",
      subjectId: "subject_id = $",
      from: "occurred_at >= $",
      to: "occurred_at <= $"
    }
    /** The statement `EventLogRepo.listAudit` runs for a first page of 50 (it reads one row more). */
    const statement = (pairs: ReadonlyArray<readonly [string, string]>) =>
      `select * from audit_entries where ${
        [`org_id = '${tenant.orgId}'`, ...pairs.map(([k, v]) => (columns[k] ?? "").replace("$", `'${v}'`))].join(
          " and "
        )
      } order by occurred_at desc, id desc limit 51`
    const query = (pairs: ReadonlyArray<readonly [string, string]>) =>
      `${base}?${new URLSearchParams([...pairs.map(([k, v]): [string, string] => [k, v]), ["limit", "50"]]).toString()}`
    const label = (pairs: ReadonlyArray<readonly [string, string]>) =>
      pairs.map(([k, v]) => `${k}=${v.length > 20 ? `${v.slice(0, 10)}…` : v}`).join("&")
    const oneDay: ReadonlyArray<readonly [string, string]> = [["from", iso(now - 46 * day)], [
      "to",
      iso(now - 45 * day)
    ]]
    const routes = [
      { area: "audit", label: "(no filter)", path: query([]), sql: statement([]) },
      { area: "audit", label: "(no filter), page 1000", path: query([]), depth: 1000 },
      ...filters.flatMap(([name, first, , miss]) => [
        { area: "audit", label: label([[name, first]]), path: query([[name, first]]), sql: statement([[name, first]]) },
        {
          area: "audit",
          label: `${label([[name, miss]])} (none)`,
          path: query([[name, miss]]),
          sql: statement([[name, miss]])
        }
      ]),
      {
        area: "audit",
        label: "from&to (one day)",
        path: query(oneDay),
        sql: statement(oneDay)
      },
      ...filters.flatMap(([a, first], i) =>
        filters.slice(i + 1).map(([b, , second]) => {
          const pairs: ReadonlyArray<readonly [string, string]> = [[a, first], [b, second]]
          return { area: "audit", label: label(pairs), path: query(pairs), sql: statement(pairs) }
        })
      )
    ]
    return routes
  }
})
