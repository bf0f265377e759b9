/**
 * Usage metering end to end over real HTTP (spec: "Usage metering"; metering-billing.md §1–2): single and batch
 * ingest with every field rule (422 on the named field, or the batch item's `validation_failed`), idempotency keys
 * unique per workspace (409 with `details.usageRecordId`, per-item `duplicate` also inside one batch), nothing
 * stored on refusal, and summaries showing the records within 10 s of their ingest (the roll-up fiber). Runs on
 * PGlite, and on PostgreSQL when `DATABASE_URL` is set.
 */
import { BatchItemResult, Environment, UsageRecord, UsageSummary } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs, cpctlRun, printedAs, tokenEnv } from "./support/cli.ts"
import { failed, invalidFields, ok, type Res } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver, workspaceApi } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"
import { rolledUp } from "./support/usage.ts"

const MINUTE = 60 * 1000
const DAY = 24 * 60 * MINUTE

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `usage [${backend}]`,
    (it) => {
      const api = workspaceApi
      const owner = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "usage")
        const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
        return { ...user, projectId, baseUrl, as: api(user.token, user.personal.id) }
      })
      const key = () => `k-${randomUUID()}`
      const recordOf = (res: Res) => ok(res, { usageRecord: UsageRecord }).usageRecord
      const resultsOf = (res: Res) => ok(res, { results: Schema.Array(BatchItemResult) }).results
      const storedCount = (orgId: string) =>
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ n: number }>`select count(*)::int as n from usage_records where org_id = ${orgId}`.pipe(
              Effect.map((rows) => rows[0]?.n ?? -1),
              Effect.orDie
            )
        )

      it.effect("a record has the wire shape and defaults (quantity 1, recordedAt now, null optionals)", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const idempotencyKey = key()
          const record = recordOf(yield* as("POST", "/usage", { metric: "api.calls", idempotencyKey }))
          assert.deepStrictEqual(Object.keys(record).sort(), [
            "createdAt",
            "environmentId",
            "id",
            "idempotencyKey",
            "metadata",
            "metric",
            "orgId",
            "projectId",
            "quantity",
            "recordedAt",
            "resourceId"
          ])
          assert.match(record.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/)
          assert.deepInclude(record, {
            orgId: personal.id,
            quantity: 1,
            metric: "api.calls",
            idempotencyKey,
            projectId: null,
            environmentId: null,
            resourceId: null,
            metadata: null
          })
          assert.strictEqual(record.recordedAt, record.createdAt)
        }))

      it.effect("a repeated key is 409 conflict naming the first record, whatever the other fields say", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const idempotencyKey = key()
          const first = recordOf(yield* as("POST", "/usage", { metric: "m", idempotencyKey, quantity: 5 }))
          const again = failed(
            yield* as("POST", "/usage", { metric: "other", idempotencyKey, quantity: 9 }),
            409,
            "conflict"
          )
          assert.strictEqual(again.details["usageRecordId"], first.id)
          assert.strictEqual(yield* storedCount(personal.id), 1)
        }))

      it.effect("the same key in two workspaces is two records", () =>
        Effect.gen(function*() {
          const a = yield* owner
          const b = yield* owner
          const idempotencyKey = key()
          recordOf(yield* a.as("POST", "/usage", { metric: "m", idempotencyKey }))
          recordOf(yield* b.as("POST", "/usage", { metric: "m", idempotencyKey }))
        }))

      it.effect("every field rule of a single record is a 422 on that field, and nothing is stored", () =>
        Effect.gen(function*() {
          const { as, baseUrl, personal, projectId } = yield* owner
          const other = yield* owner
          const otherProject = yield* createProject(baseUrl, other.token, other.personal.id)
          const env = ok(yield* other.as("POST", `/projects/${other.projectId}/environments`, { name: "e" }), {
            environment: Environment
          }).environment
          const now = Date.now()
          const cases: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
            ["metric", { metric: "Upper" }],
            ["metric", { metric: "9starts-with-digit" }],
            ["metric", { metric: `a${"b".repeat(64)}` }],
            ["metric", { metric: "" }],
            ["quantity", { quantity: 1.5 }],
            ["quantity", { quantity: -1 }],
            ["quantity", { quantity: 2 ** 53 }],
            ["quantity", { quantity: "3" }],
            ["idempotencyKey", { idempotencyKey: "" }],
            ["idempotencyKey", { idempotencyKey: "has space" }],
            ["idempotencyKey", { idempotencyKey: "k".repeat(256) }],
            ["recordedAt", { recordedAt: "yesterday" }],
            ["recordedAt", { recordedAt: new Date(now - 36 * DAY).toISOString() }],
            ["recordedAt", { recordedAt: new Date(now + 6 * MINUTE).toISOString() }],
            ["projectId", { projectId: "prj_nope" }],
            ["projectId", { projectId: otherProject }],
            ["environmentId", { environmentId: env.id }],
            ["environmentId", { projectId, environmentId: env.id }],
            ["resourceId", { resourceId: "" }],
            ["resourceId", { resourceId: "r".repeat(256) }],
            ["metadata", { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"])) }],
            ["metadata", { metadata: { ["k".repeat(41)]: "v" } }],
            ["metadata", { metadata: { k: "v".repeat(501) } }],
            ["metadata", { metadata: { k: 1 } }]
          ]
          for (const [field, patch] of cases) {
            const fields = invalidFields(yield* as("POST", "/usage", { metric: "m", idempotencyKey: key(), ...patch }))
            assert.isTrue(
              Object.keys(fields).some((name) => name === field || name.startsWith(`${field}.`)),
              `${JSON.stringify(patch)} → ${JSON.stringify(fields)}`
            )
          }
          assert.strictEqual(yield* storedCount(personal.id), 0)
        }))

      it.effect("bounds that are allowed: 2^53 − 1, 0, 50 metadata keys, 35 days back, 5 minutes ahead", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const now = Date.now()
          const ok1 = recordOf(
            yield* as("POST", "/usage", { metric: "m", idempotencyKey: key(), quantity: Number.MAX_SAFE_INTEGER })
          )
          assert.strictEqual(ok1.quantity, Number.MAX_SAFE_INTEGER)
          recordOf(yield* as("POST", "/usage", { metric: "m", idempotencyKey: key(), quantity: 0 }))
          const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`.padEnd(40, "x"), "v"]))
          assert.deepStrictEqual(
            recordOf(yield* as("POST", "/usage", { metric: "m", idempotencyKey: key(), metadata })).metadata,
            metadata
          )
          const old = new Date(now - 35 * DAY + MINUTE).toISOString()
          assert.strictEqual(
            recordOf(yield* as("POST", "/usage", { metric: "m", idempotencyKey: key(), recordedAt: old })).recordedAt,
            old
          )
          recordOf(
            yield* as("POST", "/usage", {
              metric: "m",
              idempotencyKey: key(),
              recordedAt: new Date(now + 4 * MINUTE).toISOString()
            })
          )
        }))

      it.effect("a batch refuses per item a project of another workspace and an environment of another project", () =>
        Effect.gen(function*() {
          const { as, personal, projectId } = yield* owner
          const other = yield* owner
          const foreignEnv = ok(yield* other.as("POST", `/projects/${other.projectId}/environments`, { name: "e" }), {
            environment: Environment
          }).environment.id
          const results = resultsOf(
            yield* as("POST", "/usage/batch", {
              records: [
                { metric: "m", idempotencyKey: key(), projectId: other.projectId },
                { metric: "m", idempotencyKey: key(), projectId, environmentId: foreignEnv },
                { metric: "m", idempotencyKey: key(), environmentId: foreignEnv },
                { metric: "m", idempotencyKey: key(), quantity: 2 ** 53 },
                {
                  metric: "m",
                  idempotencyKey: key(),
                  metadata: Object.fromEntries(
                    Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"])
                  )
                }
              ]
            })
          )
          const fields = results.map((r) =>
            r.ok ? "stored" : `${r.error.kind}:${Object.keys(r.error.fields ?? {}).join()}`
          )
          assert.deepStrictEqual(fields, [
            "validation_failed:projectId",
            "validation_failed:environmentId",
            "validation_failed:environmentId",
            "validation_failed:quantity",
            "validation_failed:metadata"
          ])
          assert.strictEqual(yield* storedCount(personal.id), 0)
        }))

      it.effect("a batch answers per record in order: stored, validation_failed, duplicates (stored, in-batch)", () =>
        Effect.gen(function*() {
          const { as, personal, projectId } = yield* owner
          const stored = recordOf(yield* as("POST", "/usage", { metric: "m", idempotencyKey: "before" }))
          const results = resultsOf(
            yield* as("POST", "/usage/batch", {
              records: [
                { metric: "m", idempotencyKey: "a", quantity: 2, projectId },
                { metric: "m", idempotencyKey: "b", quantity: 1.5 },
                { metric: "m", idempotencyKey: "before" },
                { metric: "m", idempotencyKey: "a", quantity: 7 },
                { metric: "m", idempotencyKey: "c", projectId: "prj_01ARZ3NDEKTSV4RRFFQ69G5FAV" },
                "not an object",
                { metric: "m", idempotencyKey: "d" }
              ]
            })
          )
          assert.strictEqual(results.length, 7)
          const [a, b, before, aAgain, c, junk, d] = results
          assert.isTrue(a?.ok === true && a.usageRecord.quantity === 2 && a.usageRecord.projectId === projectId)
          assert.isTrue(b?.ok === false && b.error.kind === "validation_failed" && "quantity" in (b.error.fields ?? {}))
          assert.isTrue(before?.ok === false && before.error.kind === "duplicate")
          assert.strictEqual(before?.ok === false ? before.error.usageRecordId : "", stored.id)
          assert.isTrue(aAgain?.ok === false && aAgain.error.kind === "duplicate")
          assert.strictEqual(aAgain?.ok === false ? aAgain.error.usageRecordId : "", a?.ok ? a.usageRecord.id : "x")
          assert.isTrue(
            c?.ok === false && c.error.kind === "validation_failed" && "projectId" in (c.error.fields ?? {})
          )
          assert.isTrue(junk?.ok === false && junk.error.kind === "validation_failed")
          assert.isTrue(d?.ok === true)
          assert.strictEqual(yield* storedCount(personal.id), 3)
        }))

      it.effect("a batch of 0 or 1001 records is a 422 on records; 1000 are stored in one answer", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          assert.property(invalidFields(yield* as("POST", "/usage/batch", { records: [] })), "records")
          const many = (n: number) => Array.from({ length: n }, (_, i) => ({ metric: "m", idempotencyKey: `n${i}` }))
          assert.property(invalidFields(yield* as("POST", "/usage/batch", { records: many(1001) })), "records")
          assert.strictEqual(yield* storedCount(personal.id), 0)
          const results = resultsOf(yield* as("POST", "/usage/batch", { records: many(1000) }))
          assert.isTrue(results.every((r) => r.ok))
          assert.strictEqual(yield* storedCount(personal.id), 1000)
        }))

      it.effect("the summary reflects records within 10 s of their ingest: day and hour rollups, filters, totals", () =>
        Effect.gen(function*() {
          const { as, baseUrl, projectId, token, personal } = yield* owner
          const env = ok(yield* as("POST", `/projects/${projectId}/environments`, { name: "prod" }), {
            environment: Environment
          }).environment
          const now = Date.now()
          const hourAgo = new Date(now - 60 * MINUTE).toISOString()
          resultsOf(
            yield* as("POST", "/usage/batch", {
              records: [
                { metric: "cpu", idempotencyKey: key(), quantity: 3 },
                { metric: "cpu", idempotencyKey: key(), quantity: 4, projectId },
                { metric: "cpu", idempotencyKey: key(), quantity: 5, projectId, environmentId: env.id },
                {
                  metric: "cpu",
                  idempotencyKey: key(),
                  quantity: 6,
                  projectId,
                  environmentId: env.id,
                  recordedAt: hourAgo
                },
                { metric: "mem", idempotencyKey: key(), quantity: 100 }
              ]
            })
          )
          recordOf(yield* as("POST", "/usage", { metric: "cpu", idempotencyKey: key(), quantity: 10 }))
          const summary = (query: string) =>
            Effect.map(
              call(baseUrl, "GET", `/v1/organizations/${personal.id}/usage/summary?${query}`, { token }),
              (res) => ok(res, UsageSummary.fields)
            )
          const all = yield* rolledUp(baseUrl, token, personal.id, "metric=cpu", { totalQuantity: 28, totalRecords: 5 })
          assert.isTrue(all.rollups.every((r) => r.bucketType === "day" && r.metric === "cpu"))
          const byProject = yield* summary(`metric=cpu&projectId=${projectId}`)
          assert.strictEqual(byProject.totalQuantity, 15)
          const byEnv = yield* summary(`metric=cpu&projectId=${projectId}&environmentId=${env.id}&bucketType=hour`)
          assert.strictEqual(byEnv.totalQuantity, 11)
          assert.strictEqual(
            byEnv.rollups.length,
            new Date(hourAgo).getUTCHours() === new Date(now).getUTCHours()
              ? 1
              : 2
          )
          const starts = byEnv.rollups.map((r) => r.bucketStart)
          assert.deepStrictEqual(starts, [...starts].sort())
          const hours = yield* summary("metric=cpu&bucketType=hour")
          assert.strictEqual(hours.totalQuantity, 28)
        }))

      it.effect("summary 422s: no metric, bad bucketType, unparsable time, end before start, over 400 days", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          assert.property(invalidFields(yield* as("GET", "/usage/summary")), "metric")
          assert.property(invalidFields(yield* as("GET", "/usage/summary?metric=m&bucketType=week")), "bucketType")
          assert.property(invalidFields(yield* as("GET", "/usage/summary?metric=m&startTime=soon")), "startTime")
          assert.property(
            invalidFields(
              yield* as(
                "GET",
                "/usage/summary?metric=m&startTime=2026-01-02T00:00:00.000Z&endTime=2026-01-02T00:00:00.000Z"
              )
            ),
            "endTime"
          )
          assert.property(
            invalidFields(
              yield* as(
                "GET",
                "/usage/summary?metric=m&startTime=2025-01-01T00:00:00.000Z&endTime=2026-02-06T00:00:00.000Z"
              )
            ),
            "endTime"
          )
          ok(
            yield* as(
              "GET",
              "/usage/summary?metric=m&startTime=2025-01-01T00:00:00.000Z&endTime=2026-02-05T00:00:00.000Z"
            )
          )
        }))

      if (backend === "pglite") {
        it.effect("cpctl usage record | batch (NDJSON on stdin) | summary; a repeated key exits naming conflict", () =>
          Effect.gen(function*() {
            const { baseUrl, personal, projectId, token } = yield* owner
            const ws = ["-w", personal.id]
            const recorded = yield* cpctlAs(
              baseUrl,
              token,
              "--json",
              "usage",
              "record",
              "cli.calls",
              "--key",
              "one",
              "--quantity",
              "3",
              "--project",
              projectId,
              "--meta",
              "region=eu",
              ...ws
            )
            assert.strictEqual(recorded.exitCode, 0, recorded.stderr)
            assert.deepInclude(printedAs(recorded, UsageRecord), { quantity: 3, projectId, metadata: { region: "eu" } })
            const again = yield* cpctlAs(baseUrl, token, "usage", "record", "cli.calls", "--key", "one", ...ws)
            assert.notStrictEqual(again.exitCode, 0)
            assert.include(again.stderr, "conflict")
            const ndjson = [
              JSON.stringify({ metric: "cli.calls", idempotencyKey: "two", quantity: 4 }),
              "",
              JSON.stringify({ metric: "cli.calls", idempotencyKey: "one" }),
              JSON.stringify({ metric: "cli.calls", idempotencyKey: "three", quantity: -1 })
            ].join("\n")
            const batch = yield* cpctlRun(tokenEnv(baseUrl, token), ["--json", "usage", "batch", ...ws], ndjson)
            assert.strictEqual(batch.exitCode, 0, batch.stderr)
            const results = printedAs(batch, Schema.Array(Schema.Struct({ line: Schema.Number, ok: Schema.Boolean })))
            assert.deepStrictEqual(results.map((r) => [r.line, r.ok]), [[1, true], [3, false], [4, false]])
            const notJson = yield* cpctlRun(tokenEnv(baseUrl, token), ["usage", "batch", ...ws], "{nope")
            assert.strictEqual(notJson.exitCode, 2, notJson.stderr)
            yield* rolledUp(baseUrl, token, personal.id, "metric=cli.calls", { totalQuantity: 7, totalRecords: 2 })
            const summary = yield* cpctlAs(baseUrl, token, "--json", "usage", "summary", "cli.calls", ...ws)
            assert.strictEqual(summary.exitCode, 0, summary.stderr)
            assert.deepInclude(printedAs(summary, UsageSummary), { totalQuantity: 7, totalRecords: 2 })
            const human = yield* cpctlAs(baseUrl, token, "usage", "summary", "cli.calls", "--bucket", "hour", ...ws)
            assert.include(human.stdout, "total 7 from 2 records")
          }))
      }
    }
  )
}
