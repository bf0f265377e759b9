/**
 * Routing order (contract §4, issue 10 item 10): the credential first (401), then the workspace (404), then
 * everything else. A path id of any length and a malformed `Idempotency-Key` come after the credential; a long id
 * is a malformed id (404), never another method's path (405).
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const LONG_ID = `prj_${"A".repeat(120)}`
const BAD_TOKEN = "sps_ses_01JAAAAAAAAAAAAAAAAAAAAAAA.not-a-secret"

for (const backend of sqlBackends) {
  layer(testServerOver(databaseLayer(backend)), { excludeTestServices: true })(`routing order [${backend}]`, (it) => {
    it.effect("a path id over 100 characters or not UTF-8: 401 without a valid credential, 404 with one", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* signInWithPersonal(baseUrl, "route")
        const org = owner.personal.id
        const project = yield* createProject(baseUrl, owner.token, org)
        const paths: ReadonlyArray<readonly [method: string, path: string]> = [
          ["GET", `/v1/organizations/${org}/projects/${LONG_ID}`],
          ["DELETE", `/v1/organizations/${org}/projects/${LONG_ID}`],
          ["GET", `/v1/organizations/${org}/projects/${project}/environments/env_${"B".repeat(200)}`],
          ["PATCH", `/v1/organizations/${org}/teams/team_${"C".repeat(101)}`],
          ["DELETE", `/v1/organizations/${org}/members/mem_${"D".repeat(5000)}`],
          ["POST", `/v1/me/invitations/inv_${"E".repeat(150)}/accept`],
          ["GET", `/v1/organizations/${"s".repeat(150)}`],
          // Escapes that are not UTF-8: the router cannot read the path at all.
          ["GET", `/v1/organizations/${org}/projects/%ED%A0%80`],
          ["DELETE", `/v1/organizations/${org}/teams/%FF%00`],
          ["GET", "/v1/organizations/%ED%A0%80/members"]
        ]
        for (const [method, path] of paths) {
          const label = `${method} ${path.slice(0, 80)}`
          failed(yield* call(baseUrl, method, path), 401, "unauthenticated")
          failed(yield* call(baseUrl, method, path, { token: BAD_TOKEN }), 401, "unauthenticated")
          const res = yield* call(baseUrl, method, path, {
            token: owner.token,
            body: method === "GET" ? undefined : {}
          })
          assert.strictEqual(res.status, 404, `${label}: ${res.text}`)
          failed(res, 404, "not_found")
        }
        // A long workspace reference is an unknown workspace (404), on a route under it too.
        failed(
          yield* call(baseUrl, "GET", `/v1/organizations/${"w".repeat(120)}/projects`, { token: owner.token }),
          404,
          "not_found"
        )
      }))

    it.effect("a malformed Idempotency-Key without a valid credential: 401; with one: 422", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* signInWithPersonal(baseUrl, "idem")
        const headers = { "idempotency-key": "has spaces and ~" }
        const create = `/v1/organizations/${owner.personal.id}/projects`
        failed(yield* call(baseUrl, "POST", create, { body: { name: "P" }, headers }), 401, "unauthenticated")
        failed(
          yield* call(baseUrl, "POST", "/v1/organizations", { body: { name: "W" }, headers }),
          401,
          "unauthenticated"
        )
        failed(
          yield* call(baseUrl, "POST", create, { token: BAD_TOKEN, body: { name: "P" }, headers }),
          401,
          "unauthenticated"
        )
        const malformed = failed(
          yield* call(baseUrl, "POST", create, { token: owner.token, body: { name: "P" }, headers }),
          422,
          "validation_failed"
        )
        assert.deepInclude(malformed.details, { header: "Idempotency-Key", reason: "malformed" })
        // A route that needs no credential still checks the key.
        const anonymous = failed(
          yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email: owner.email }, headers }),
          422,
          "validation_failed"
        )
        assert.deepInclude(anonymous.details, { header: "Idempotency-Key", reason: "malformed" })
        // A well-formed key without a credential is still 401, and remembers nothing.
        const key = { "idempotency-key": `k-${owner.user.id}` }
        failed(yield* call(baseUrl, "POST", create, { body: { name: "P" }, headers: key }), 401, "unauthenticated")
        ok(yield* call(baseUrl, "POST", create, { token: owner.token, body: { name: "P" }, headers: key }))
      }))
  })
}
