/**
 * Quotas end to end over real HTTP (metering-billing.md §3; spec: Limits "Quota periods", `POST /quotas/check`,
 * `GET /quotas/violations`): the quota routes and `organization.quota.manage`, the check (most specific quota,
 * `no_quota_defined`, soft and hard), plan-entitlement quotas, and violations recorded once per (quota, period) and
 * raised as usage grows, with one `quota.exceeded` event each. Period boundaries are `TestClock` tests in
 * packages/server/test/quotas. Runs on PGlite, and on PostgreSQL when `DATABASE_URL` is set.
 */
import { Environment, Quota, QuotaDecision, QuotaEventData, QuotaViolation } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { decisionByAction } from "./support/access.ts"
import { cpctlAs, printedAs } from "./support/cli.ts"
import { failed, invalidFields, nextCursor, ok, pageOf, type Res } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, sqlBackends, TestServer, testServerOver, type WorkspaceApi, workspaceApi } from "./support/server.ts"
import { createProject, signIn, signInWithPersonal } from "./support/session.ts"

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `quotas [${backend}]`,
    (it) => {
      type Api = WorkspaceApi
      const api = workspaceApi
      const owner = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "quota")
        const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
        const as = api(user.token, user.personal.id)
        const environmentId = ok(yield* as("POST", `/projects/${projectId}/environments`, { name: "prod" }), {
          environment: Environment
        }).environment.id
        return { ...user, projectId, environmentId, baseUrl, as }
      })
      const quotaOf = (res: Res) => ok(res, { quota: Quota }).quota
      const decisionOf = (res: Res) => ok(res, QuotaDecision.fields)
      const use = (as: Api, body: Record<string, unknown>) =>
        Effect.map(as("POST", "/usage", { idempotencyKey: randomUUID(), ...body }), (res) => ok(res))
      const exceededEvents = (orgId: string) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ data: { used: number; quotaId: string | null } }>`
            select data from events where org_id = ${orgId} and type = 'quota.exceeded' order by occurred_at`.pipe(
            Effect.map((rows) => rows.map((row) => row.data)),
            Effect.orDie
          ))

      it.effect("create, list, update, delete a quota; a second of the same metric, period and scope is 409", () =>
        Effect.gen(function*() {
          const { as, personal, projectId } = yield* owner
          const body = { metric: "api.calls", limit: 100, period: "day", enforcement: "hard" }
          const quota = quotaOf(yield* as("POST", "/quotas", body))
          assert.deepStrictEqual(Object.keys(quota).sort(), [
            "createdAt",
            "enforcement",
            "environmentId",
            "id",
            "limit",
            "metric",
            "orgId",
            "period",
            "projectId",
            "updatedAt"
          ])
          assert.match(quota.id, /^quo_[0-9A-HJKMNP-TV-Z]{26}$/)
          assert.deepInclude(quota, { orgId: personal.id, projectId: null, environmentId: null, limit: 100 })
          failed(yield* as("POST", "/quotas", body), 409, "conflict")
          // Another period or scope is another quota.
          quotaOf(yield* as("POST", "/quotas", { ...body, period: "hour" }))
          quotaOf(yield* as("POST", "/quotas", { ...body, projectId }))
          const listed = pageOf(yield* as("GET", "/quotas"), { quotas: Schema.Array(Quota) })
          assert.strictEqual(listed.data.quotas.length, 3)
          const updated = quotaOf(yield* as("PATCH", `/quotas/${quota.id}`, { limit: 5, enforcement: "soft" }))
          assert.deepInclude(updated, { limit: 5, enforcement: "soft", metric: "api.calls" })
          assert.deepStrictEqual(ok(yield* as("DELETE", `/quotas/${quota.id}`), { deleted: Schema.Literal(true) }), {
            deleted: true
          })
          failed(yield* as("DELETE", `/quotas/${quota.id}`), 404, "not_found")
          failed(yield* as("PATCH", `/quotas/${quota.id}`, { limit: 1 }), 404, "not_found")
        }))

      it.effect("quota bodies: 422 on each bad field, on a foreign project and on environmentId alone", () =>
        Effect.gen(function*() {
          const { as, environmentId, projectId } = yield* owner
          const other = yield* owner
          const body = { metric: "m", limit: 1, period: "day", enforcement: "soft" }
          const cases: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
            ["metric", { metric: "Bad Metric" }],
            ["limit", { limit: -1 }],
            ["limit", { limit: 1.5 }],
            ["period", { period: "week" }],
            ["enforcement", { enforcement: "strict" }],
            ["projectId", { projectId: other.projectId }],
            ["environmentId", { environmentId }],
            ["environmentId", { projectId, environmentId: other.environmentId }]
          ]
          for (const [field, patch] of cases) {
            assert.property(invalidFields(yield* as("POST", "/quotas", { ...body, ...patch })), field)
          }
          assert.property(
            invalidFields(yield* as("POST", "/quotas/check", { metric: "m", environmentId })),
            "environmentId"
          )
        }))

      it.effect("organization.quota.manage: owner and admin hold it, builder and viewer do not (403)", () =>
        Effect.gen(function*() {
          const { baseUrl, personal, token } = yield* owner
          const access = yield* call(baseUrl, "GET", `/v1/organizations/${personal.id}/effective-access`, { token })
          assert.isTrue(decisionByAction(access)("organization.quota.manage").allow)
          for (const [role, allowed] of [["admin", true], ["builder", false], ["viewer", false]] as const) {
            const member = yield* signIn(baseUrl)
            yield* seedMember(personal.id, member.user.id, role)
            const res = yield* call(baseUrl, "GET", `/v1/organizations/${personal.id}/effective-access`, {
              token: member.token
            })
            assert.strictEqual(decisionByAction(res)("organization.quota.manage").allow, allowed, role)
            const created = yield* call(baseUrl, "POST", `/v1/organizations/${personal.id}/quotas`, {
              token: member.token,
              body: { metric: `m.${role}`, limit: 1, period: "day", enforcement: "soft" }
            })
            if (allowed) quotaOf(created)
            else {assert.strictEqual(
                failed(created, 403, "forbidden").details["permission"],
                "organization.quota.manage"
              )}
          }
        }))

      it.effect("check without a quota: allowed, limit and remaining −1, no_quota_defined", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          assert.deepStrictEqual(decisionOf(yield* as("POST", "/quotas/check", { metric: "none" })), {
            allowed: true,
            metric: "none",
            limit: -1,
            used: 0,
            remaining: -1,
            period: null,
            enforcement: null,
            reason: "no_quota_defined"
          })
        }))

      it.effect("check evaluates the most specific quota; scopes nest; hard blocks at the limit, soft never", () =>
        Effect.gen(function*() {
          const { as, environmentId, projectId } = yield* owner
          const metric = "builds"
          quotaOf(yield* as("POST", "/quotas", { metric, limit: 100, period: "month", enforcement: "hard" }))
          quotaOf(yield* as("POST", "/quotas", { metric, limit: 10, period: "day", enforcement: "hard", projectId }))
          quotaOf(
            yield* as("POST", "/quotas", {
              metric,
              limit: 3,
              period: "hour",
              enforcement: "soft",
              projectId,
              environmentId
            })
          )
          yield* use(as, { metric, quantity: 2 })
          yield* use(as, { metric, quantity: 4, projectId })
          yield* use(as, { metric, quantity: 3, projectId, environmentId })
          const workspace = decisionOf(yield* as("POST", "/quotas/check", { metric }))
          assert.deepInclude(workspace, { limit: 100, used: 9, remaining: 91, period: "month", allowed: true })
          assert.isNull(workspace.reason)
          const project = decisionOf(yield* as("POST", "/quotas/check", { metric, projectId }))
          assert.deepInclude(project, { limit: 10, used: 7, remaining: 3, period: "day", allowed: true })
          const env = decisionOf(yield* as("POST", "/quotas/check", { metric, projectId, environmentId }))
          assert.deepInclude(env, {
            limit: 3,
            used: 3,
            remaining: 0,
            period: "hour",
            enforcement: "soft",
            allowed: true,
            reason: "quota_exceeded"
          })
          yield* use(as, { metric, quantity: 3, projectId })
          assert.deepInclude(decisionOf(yield* as("POST", "/quotas/check", { metric, projectId })), {
            used: 10,
            remaining: 0,
            allowed: false,
            reason: "quota_exceeded"
          })
        }))

      it.effect("a plan's quota.<metric> is a workspace quota until an explicit workspace quota overrides it", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const sql = yield* SqlClient.SqlClient
          const plan = `metered-${randomUUID().slice(0, 8)}`
          yield* sql`insert into plans (id, name) values (${plan}, 'Metered')`.pipe(Effect.orDie)
          yield* sql`
            insert into plan_entitlements (plan_id, entitlement_key, value_type, enabled, limit_value, metadata)
            values (${plan}, 'quota.seats', 'quantity', true, 2, '{"period":"day","enforcement":"hard"}')`
            .pipe(Effect.orDie)
          yield* sql`insert into workspace_plans (org_id, plan_id) values (${personal.id}, ${plan})`.pipe(Effect.orDie)
          yield* use(as, { metric: "seats", quantity: 2 })
          assert.deepInclude(decisionOf(yield* as("POST", "/quotas/check", { metric: "seats" })), {
            limit: 2,
            used: 2,
            period: "day",
            enforcement: "hard",
            allowed: false,
            reason: "quota_exceeded"
          })
          const events = yield* exceededEvents(personal.id)
          assert.strictEqual(events.length, 1)
          assert.isNull(events[0]?.quotaId)
          quotaOf(yield* as("POST", "/quotas", { metric: "seats", limit: 50, period: "month", enforcement: "soft" }))
          assert.deepInclude(decisionOf(yield* as("POST", "/quotas/check", { metric: "seats" })), {
            limit: 50,
            allowed: true,
            reason: null
          })
        }))

      it.effect("violations: once per (quota, period), raised as usage grows, one quota.exceeded event; filters", () =>
        Effect.gen(function*() {
          const { as, personal, projectId } = yield* owner
          const quota = quotaOf(
            yield* as("POST", "/quotas", { metric: "jobs", limit: 5, period: "day", enforcement: "soft", projectId })
          )
          yield* use(as, { metric: "jobs", quantity: 4, projectId, resourceId: "r1" })
          assert.strictEqual(
            pageOf(yield* as("GET", "/quotas/violations"), { violations: Schema.Array(QuotaViolation) }).data
              .violations.length,
            0
          )
          yield* use(as, { metric: "jobs", quantity: 1, projectId, resourceId: "r2" })
          // Usage elsewhere in the workspace does not count toward the project's quota.
          yield* use(as, { metric: "jobs", quantity: 50 })
          const first = pageOf(yield* as("GET", "/quotas/violations"), { violations: Schema.Array(QuotaViolation) })
          assert.strictEqual(first.data.violations.length, 1)
          const violation = first.data.violations[0]
          assert.deepInclude(violation, {
            quotaId: quota.id,
            metric: "jobs",
            projectId,
            environmentId: null,
            resourceId: "r2",
            period: "day",
            limit: 5,
            used: 5,
            enforcement: "soft"
          })
          const day = new Date()
          day.setUTCHours(0, 0, 0, 0)
          assert.strictEqual(violation?.periodStart, day.toISOString())
          // A batch pushing further updates the same violation.
          ok(
            yield* as("POST", "/usage/batch", {
              records: [
                { metric: "jobs", idempotencyKey: randomUUID(), quantity: 2, projectId, resourceId: "r3" },
                { metric: "jobs", idempotencyKey: randomUUID(), quantity: 1, projectId, resourceId: "r3" }
              ]
            })
          )
          const again = pageOf(yield* as("GET", "/quotas/violations"), { violations: Schema.Array(QuotaViolation) })
          assert.strictEqual(again.data.violations.length, 1)
          assert.deepInclude(again.data.violations[0], { id: violation?.id ?? "", used: 8, resourceId: "r3" })
          const events = yield* exceededEvents(personal.id)
          assert.strictEqual(events.length, 1)
          assert.strictEqual(events[0]?.used, 5)
          // The event's data is what the catalog declares.
          const data = Schema.decodeUnknownSync(QuotaEventData["quota.exceeded"])(events[0])
          assert.strictEqual(data.quotaId, quota.id)
          assert.strictEqual(data.violationId, violation?.id)
          assert.strictEqual(data.limit, 5)
          const filtered = (query: string) =>
            Effect.map(
              as("GET", `/quotas/violations?${query}`),
              (res) => pageOf(res, { violations: Schema.Array(QuotaViolation) }).data.violations.length
            )
          assert.strictEqual(yield* filtered("metric=jobs"), 1)
          assert.strictEqual(yield* filtered("metric=other"), 0)
          assert.strictEqual(yield* filtered(`projectId=${projectId}`), 1)
          assert.strictEqual(yield* filtered("resourceId=r3"), 1)
          assert.strictEqual(yield* filtered("resourceId=r1"), 0)
          assert.property(invalidFields(yield* as("GET", "/quotas/violations?metric=BAD")), "metric")
        }))

      it.effect("violations page newest first with a cursor bound to the filters", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          for (const metric of ["v.a", "v.b", "v.c"]) {
            quotaOf(yield* as("POST", "/quotas", { metric, limit: 0, period: "hour", enforcement: "hard" }))
            yield* use(as, { metric, quantity: 0 })
          }
          const page1 = yield* as("GET", "/quotas/violations?limit=2")
          const first = pageOf(page1, { violations: Schema.Array(QuotaViolation) }).data.violations
          assert.deepStrictEqual(first.map((v) => v.metric), ["v.c", "v.b"])
          const cursor = nextCursor(page1)
          const page2 = pageOf(
            yield* as("GET", `/quotas/violations?limit=2&cursor=${encodeURIComponent(cursor)}`),
            { violations: Schema.Array(QuotaViolation) }
          )
          assert.deepStrictEqual(page2.data.violations.map((v) => v.metric), ["v.a"])
          assert.isNull(page2.cursor)
          assert.property(
            invalidFields(
              yield* as("GET", `/quotas/violations?limit=2&metric=v.a&cursor=${encodeURIComponent(cursor)}`)
            ),
            "cursor"
          )
        }))

      if (backend === "pglite") {
        it.effect("cpctl quotas set (create, then change) | list | check | violations | delete", () =>
          Effect.gen(function*() {
            const { as, baseUrl, personal, projectId, token } = yield* owner
            const ws = ["-w", personal.id]
            const set = (limit: string) =>
              cpctlAs(
                baseUrl,
                token,
                "--json",
                "quotas",
                "set",
                "cli.jobs",
                "--limit",
                limit,
                "--period",
                "day",
                "--enforcement",
                "hard",
                "--project",
                projectId,
                ...ws
              )
            const made = yield* set("5")
            assert.strictEqual(made.exitCode, 0, made.stderr)
            const quota = printedAs(made, Quota)
            const changed = printedAs(yield* set("2"), Quota)
            assert.deepInclude(changed, { id: quota.id, limit: 2 })
            const listed = yield* cpctlAs(baseUrl, token, "quotas", "list", ...ws)
            assert.include(listed.stdout, quota.id)
            yield* use(as, { metric: "cli.jobs", quantity: 3, projectId, resourceId: "cli-r" })
            const check = yield* cpctlAs(
              baseUrl,
              token,
              "--json",
              "quotas",
              "check",
              "cli.jobs",
              "--project",
              projectId,
              ...ws
            )
            assert.deepInclude(printedAs(check, QuotaDecision), { allowed: false, used: 3, reason: "quota_exceeded" })
            const violations = yield* cpctlAs(
              baseUrl,
              token,
              "--json",
              "quotas",
              "violations",
              "--resource",
              "cli-r",
              ...ws
            )
            assert.strictEqual(printedAs(violations, Schema.Array(QuotaViolation)).length, 1)
            const deleted = yield* cpctlAs(baseUrl, token, "quotas", "delete", quota.id, "--yes", ...ws)
            assert.strictEqual(deleted.exitCode, 0, deleted.stderr)
            const gone = yield* cpctlAs(baseUrl, token, "quotas", "delete", quota.id, "--yes", ...ws)
            assert.include(gone.stderr, "not_found")
          }))
      }
    }
  )
}
