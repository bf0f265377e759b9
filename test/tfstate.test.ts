/**
 * The Terraform `http` backend end to end over real HTTP (run-state.md §6, contract §4): raw state bytes, versions and
 * `?version=`, LOCK idempotent for the same ID, 423 with the holder's LockInfo, a write without the lock's ID refused
 * while locked, UNLOCK by another ID 409, an empty UNLOCK as force-unlock, two clients locking at once (one 200, one
 * 423), Basic credentials with the token as password, 405 for LOCK elsewhere, and the audit entries. On PGlite, and
 * PostgreSQL when `DATABASE_URL` is set.
 */
import { Environment, TfStateSummary, TfStateVersion } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok, type Res } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const lockInfo = (id: string, who = "ada@laptop") =>
  JSON.stringify({
    ID: id,
    Operation: "OperationTypeApply",
    Info: "",
    Who: who,
    Version: "1.11.4",
    Created: "2026-11-28T10:00:00.000000Z",
    Path: ""
  })

const stateDoc = (serial: number, lineage = "6d4c0a1e-lineage") =>
  JSON.stringify({ version: 4, terraform_version: "1.11.4", serial, lineage, outputs: {}, resources: [] }, null, 2)

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `tfstate [${backend}]`,
    (it) => {
      /** A fresh owner, project and environment; `tf` calls the state's URL with raw bodies. */
      const setup = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "tf")
        const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
        const project = `/v1/organizations/${user.personal.id}/projects/${projectId}`
        const environment = ok(
          yield* call(baseUrl, "POST", `${project}/environments`, { token: user.token, body: { name: "Staging" } }),
          { environment: Environment }
        ).environment
        const url = `${project}/state/tfstate/network/${environment.slug}`
        const tf = (method: string, suffix = "", body?: string, headers: Record<string, string> = {}) =>
          call(baseUrl, method, `${url}${suffix}`, {
            token: user.token,
            ...(body === undefined ? {} : { body, headers: { "content-type": "application/json", ...headers } }),
            ...(body === undefined ? { headers } : {})
          })
        return { ...user, baseUrl, project, environment, url, tf }
      })

      const raw = (res: Res, status: number, body: string) => {
        assert.strictEqual(res.status, status, res.text)
        assert.strictEqual(res.text, body)
      }

      it.effect("GET before any state is 404 with an empty body; POST stores the bytes as they were sent", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          raw(yield* tf("GET"), 404, "")
          const state = stateDoc(1)
          raw(yield* tf("POST", "", state), 200, "")
          const read = yield* tf("GET")
          raw(read, 200, state)
          assert.match(read.headers.get("content-type") ?? "", /^application\/json/)
          raw(yield* tf("POST", "", stateDoc(2)), 200, "")
          raw(yield* tf("GET"), 200, stateDoc(2))
          raw(yield* tf("GET", "?version=1"), 200, state)
          raw(yield* tf("GET", "?version=9"), 404, "")
          const versions = ok(yield* tf("GET", "/versions"), { versions: Schema.Array(TfStateVersion) }).versions
          assert.deepStrictEqual(versions.map((v) => [v.version, v.serial, v.lineage]), [
            [2, 2, "6d4c0a1e-lineage"],
            [1, 1, "6d4c0a1e-lineage"]
          ])
          assert.strictEqual(versions[1]?.size, Buffer.byteLength(state))
          assert.strictEqual(versions[0]?.createdBy.kind, "user")
        }))

      it.effect("DELETE removes the state; its versions stay readable", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          raw(yield* tf("POST", "", stateDoc(1)), 200, "")
          raw(yield* tf("DELETE"), 200, "")
          raw(yield* tf("GET"), 404, "")
          raw(yield* tf("GET", "?version=1"), 200, stateDoc(1))
          const versions = ok(yield* tf("GET", "/versions"), { versions: Schema.Array(TfStateVersion) }).versions
          assert.deepStrictEqual(versions.map((v) => v.version), [1])
          raw(yield* tf("POST", "", stateDoc(2)), 200, "")
          raw(yield* tf("GET"), 200, stateDoc(2))
        }))

      it.effect("LOCK is idempotent for the same ID; another ID meets 423 with the holder's LockInfo as sent", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          const mine = lockInfo("lock-a")
          raw(yield* tf("LOCK", "", mine), 200, "")
          raw(yield* tf("LOCK", "", mine), 200, "")
          const other = yield* tf("LOCK", "", lockInfo("lock-b", "bob@ci"))
          raw(other, 423, mine)
          assert.match(other.headers.get("content-type") ?? "", /^application\/json/)
          // The state list shows the holder.
          const states = ok(yield* tf("GET", "/../.."), { states: Schema.Array(TfStateSummary) }).states
          assert.deepStrictEqual(states.map((s) => [s.component, s.locked, s.lock?.ID]), [["network", true, "lock-a"]])
        }))

      it.effect("while locked, POST without the lock's ID (or with another) is 423 and stores nothing", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          const mine = lockInfo("lock-a")
          raw(yield* tf("LOCK", "", mine), 200, "")
          raw(yield* tf("POST", "", stateDoc(1)), 423, mine)
          raw(yield* tf("POST", "?ID=lock-z", stateDoc(1)), 423, mine)
          raw(yield* tf("DELETE"), 423, mine)
          raw(yield* tf("GET"), 404, "")
          raw(yield* tf("POST", "?ID=lock-a", stateDoc(1)), 200, "")
          raw(yield* tf("GET"), 200, stateDoc(1))
        }))

      it.effect("UNLOCK by the holder releases; by another ID is 409 with the holder; an empty body forces it", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          const mine = lockInfo("lock-a")
          raw(yield* tf("LOCK", "", mine), 200, "")
          raw(yield* tf("UNLOCK", "", lockInfo("lock-b")), 409, mine)
          raw(yield* tf("UNLOCK", "", mine), 200, "")
          raw(yield* tf("LOCK", "", lockInfo("lock-b")), 200, "")
          raw(yield* tf("UNLOCK", "", ""), 200, "")
          raw(yield* tf("LOCK", "", mine), 200, "")
        }))

      it.effect("two clients locking at once: exactly one 200, the other 423 with the winner's LockInfo", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          for (let round = 0; round < 5; round++) {
            const a = lockInfo(`a-${round}`)
            const b = lockInfo(`b-${round}`)
            const [ra, rb] = yield* Effect.all([tf("LOCK", "", a), tf("LOCK", "", b)], { concurrency: 2 })
            assert.deepStrictEqual([ra.status, rb.status].sort(), [200, 423])
            const winner = ra.status === 200 ? a : b
            assert.strictEqual((ra.status === 423 ? ra : rb).text, winner)
            raw(yield* tf("UNLOCK", "", winner), 200, "")
          }
        }))

      it.effect("a LockInfo that is not JSON with an ID is 422 in the envelope", () =>
        Effect.gen(function*() {
          const { tf } = yield* setup
          failed(yield* tf("LOCK", "", "not json"), 422, "validation_failed")
          failed(yield* tf("LOCK", "", "{}"), 422, "validation_failed")
          failed(yield* tf("UNLOCK", "", "[1]"), 422, "validation_failed")
        }))

      it.effect("Basic credentials carry the token as password on the state routes only", () =>
        Effect.gen(function*() {
          const { baseUrl, project, token, url } = yield* setup
          const basic = (password: string) => `Basic ${Buffer.from(`terraform:${password}`).toString("base64")}`
          raw(
            yield* call(baseUrl, "POST", url, {
              body: stateDoc(1),
              headers: { authorization: basic(token), "content-type": "application/json" }
            }),
            200,
            ""
          )
          raw(yield* call(baseUrl, "GET", url, { headers: { authorization: basic(token) } }), 200, stateDoc(1))
          failed(
            yield* call(baseUrl, "GET", url, { headers: { authorization: basic("sps_ses_wrong") } }),
            401,
            "unauthenticated"
          )
          failed(yield* call(baseUrl, "GET", url), 401, "unauthenticated")
          // Elsewhere Basic credentials are not a way in.
          failed(
            yield* call(baseUrl, "GET", `${project}/environments`, { headers: { authorization: basic(token) } }),
            401,
            "unauthenticated"
          )
        }))

      it.effect("LOCK and UNLOCK on any other path are 405 unsupported", () =>
        Effect.gen(function*() {
          const { baseUrl, project, token, url } = yield* setup
          for (const path of [project, `${url}/versions`, "/v1/nowhere", "/health"]) {
            for (const method of ["LOCK", "UNLOCK"]) {
              failed(yield* call(baseUrl, method, path, { token, body: lockInfo("x") }), 405, "unsupported")
            }
          }
        }))

      it.effect("an unknown or archived environment and a malformed component are 404 in the envelope", () =>
        Effect.gen(function*() {
          const { baseUrl, environment, project, token, url } = yield* setup
          const at = (path: string, method = "GET") => call(baseUrl, method, path, { token })
          failed(yield* at(`${project}/state/tfstate/network/nowhere`), 404, "not_found")
          failed(yield* at(`${project}/state/tfstate/Bad.Component/${environment.slug}`), 404, "not_found")
          failed(
            yield* call(baseUrl, "LOCK", `${project}/state/tfstate/network/nowhere`, {
              token,
              body: lockInfo("x")
            }),
            404,
            "not_found"
          )
          ok(yield* call(baseUrl, "DELETE", `${project}/environments/${environment.id}`, { token }))
          failed(yield* at(url), 404, "not_found")
        }))

      it.effect("the contract-version gate comes first; lock and state changes are audit entries", () =>
        Effect.gen(function*() {
          const { baseUrl, personal, tf, token } = yield* setup
          failed(yield* tf("GET", "", undefined, { "svc-contract-version": "3" }), 409, "contract_version_unsupported")
          const id = `lock-${randomUUID()}`
          raw(yield* tf("LOCK", "", lockInfo(id)), 200, "")
          raw(yield* tf("POST", `?ID=${id}`, stateDoc(1)), 200, "")
          raw(yield* tf("UNLOCK", "", ""), 200, "")
          const audit = yield* call(baseUrl, "GET", `/v1/organizations/${personal.id}/audit?category=runstate`, {
            token
          })
          const types = ok(audit, { auditEntries: Schema.Array(Schema.Struct({ eventType: Schema.String })) })
            .auditEntries
            .map((entry) => entry.eventType)
          assert.deepStrictEqual(types.slice(0, 3), [
            "state.tfstate.unlocked",
            "state.tfstate.written",
            "state.tfstate.locked"
          ])
        }))
    }
  )
}
