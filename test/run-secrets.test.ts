/**
 * Run secrets end to end (run-state.md §3): resolve for the run's environment (environment → project → workspace),
 * lease-bound (no lease, another job, a stale epoch: `lease_lost`), audited with the names and never the values; output
 * secrets create then rotate environment-scope secrets, and need a run with an environment (422 otherwise).
 */
import { Environment, Run, Secret } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { monotonicFactory } from "ulid"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, invalidFields, ok } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const ulid = monotonicFactory()

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `run secrets [${backend}]`,
    (it) => {
      it.effect("resolve is lease-bound, nearest scope wins, audited without values; output creates then rotates", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const user = yield* signInWithPersonal(baseUrl, "rsec")
          const orgId = user.personal.id
          const as = (method: string, path: string, body?: unknown) =>
            call(baseUrl, method, `/v1/organizations/${orgId}${path}`, {
              token: user.token,
              ...(body === undefined ? {} : { body })
            })
          const projectId = yield* createProject(baseUrl, user.token, orgId)
          const environmentId = ok(yield* as("POST", `/projects/${projectId}/environments`, { name: "Prod" }), {
            environment: Environment
          }).environment.id
          const secret = (path: string, secretKey: string, value: string) =>
            Effect.map(
              as("POST", `${path}/config/secrets`, { secretKey, value, displayName: secretKey }),
              (res) => ok(res, { secret: Secret })
            )
          yield* secret("", "ALPHA", "org-alpha")
          yield* secret("", "BETA", "org-beta")
          yield* secret(`/projects/${projectId}`, "BETA", "project-beta")
          yield* secret(`/projects/${projectId}`, "GAMMA", "project-gamma")
          yield* secret(`/projects/${projectId}/environments/${environmentId}`, "GAMMA", "env-gamma")
          const state = `/projects/${projectId}/state/runs`
          const runId = ulid()
          ok(yield* as("POST", state, { runId, environmentId, jobs: [{ jobId: "a" }, { jobId: "b" }] }), { run: Run })
          const resolve = (body: Record<string, unknown>) =>
            as("POST", `${state}/${runId}/secrets/resolve`, {
              runnerId: "r1",
              leaseEpoch: 1,
              jobId: "a",
              names: ["ALPHA", "BETA", "GAMMA", "DELTA"],
              ...body
            })
          failed(yield* resolve({}), 409, "lease_lost")
          ok(yield* as("POST", `${state}/${runId}/jobs/a:claim`, { runnerId: "r1" }))
          failed(yield* resolve({ jobId: "b" }), 409, "lease_lost")
          failed(yield* resolve({ leaseEpoch: 2 }), 409, "lease_lost")
          failed(yield* resolve({ runnerId: "r2" }), 409, "lease_lost")
          const resolved = ok(yield* resolve({}), {
            secrets: Schema.Record(Schema.String, Schema.String),
            missing: Schema.Array(Schema.String)
          })
          assert.deepStrictEqual(resolved.secrets, { ALPHA: "org-alpha", BETA: "project-beta", GAMMA: "env-gamma" })
          assert.deepStrictEqual(resolved.missing, ["DELTA"])
          assert.property(invalidFields(yield* resolve({ names: [] })), "names")
          const sql = yield* SqlClient.SqlClient
          const audits = yield* sql<{ eventType: string; payload: unknown }>`
            select event_type, payload from audit_entries where org_id = ${orgId} and event_type = 'secret.value.used'`
          assert.strictEqual(audits.length, 1)
          const text = JSON.stringify(audits)
          assert.include(text, "GAMMA")
          for (const value of ["org-alpha", "project-beta", "env-gamma"]) assert.notInclude(text, value)

          const output = (secrets: Record<string, string>) =>
            as("POST", `${state}/${runId}/output-secrets`, { runnerId: "r1", leaseEpoch: 1, jobId: "a", secrets })
          const first = ok(yield* output({ OUT_TOKEN: "v1" }), { secrets: Schema.Array(Secret) }).secrets
          assert.deepStrictEqual(first.map((s) => [s.secretKey, s.scopeKind, s.environmentId, s.version]), [
            ["OUT_TOKEN", "environment", environmentId, 1]
          ])
          const second = ok(yield* output({ OUT_TOKEN: "v2" }), { secrets: Schema.Array(Secret) }).secrets
          assert.strictEqual(second[0]?.version, 2)
          assert.strictEqual(second[0]?.id, first[0]?.id)
          const again = ok(yield* resolve({ names: ["OUT_TOKEN"] }), {
            secrets: Schema.Record(Schema.String, Schema.String),
            missing: Schema.Array(Schema.String)
          })
          assert.deepStrictEqual(again.secrets, { OUT_TOKEN: "v2" })
          failed(
            yield* as("POST", `${state}/${runId}/output-secrets`, {
              runnerId: "r1",
              leaseEpoch: 1,
              jobId: "b",
              secrets: { X: "y" }
            }),
            409,
            "lease_lost"
          )
          // A run without an environment has nowhere to publish.
          const bare = ulid()
          ok(yield* as("POST", state, { runId: bare, jobs: [{ jobId: "a" }] }))
          ok(yield* as("POST", `${state}/${bare}/jobs/a:claim`, { runnerId: "r1" }))
          const refused = invalidFields(
            yield* as("POST", `${state}/${bare}/output-secrets`, {
              runnerId: "r1",
              leaseEpoch: 1,
              jobId: "a",
              secrets: { X: "y" }
            })
          )
          assert.property(refused, "runId")
        }).pipe(Effect.orDie))
    }
  )
}
