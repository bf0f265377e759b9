/**
 * `cpctl refs|catalog|tfstate` end to end, as a real child process against a real server: refs set (with and without
 * a lost compare-and-swap), get, list and delete; catalog publish, head, history and entities; tfstate list, pull
 * and a force-unlock.
 */
import { CatalogEntity, CatalogHead, Environment, Ref, TfStateSummary } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs, printedAs } from "./support/cli.ts"
import { ok } from "./support/envelope.ts"
import { seedObject } from "./support/seed.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

layer(Layer.merge(testServerOver(databaseLayer("pglite")), NodeServices.layer), { excludeTestServices: true })(
  "cpctl refs, catalog and tfstate",
  (it) => {
    const setup = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const user = yield* signInWithPersonal(baseUrl, "statecli")
      const orgId = user.personal.id
      const projectId = yield* createProject(baseUrl, user.token, orgId)
      const store = (content: string) => seedObject(orgId, projectId, content)
      const cli = (...args: ReadonlyArray<string>) => cpctlAs(baseUrl, user.token, ...args, "-w", orgId)
      return { ...user, baseUrl, orgId, projectId, store, cli }
    })

    it.effect("refs and catalog commands", () =>
      Effect.gen(function*() {
        const { cli, projectId, store } = yield* setup
        const a = yield* store("a")
        const set = yield* cli("refs", "set", projectId, "refs/heads/main", a, "--expected-version", "0", "--json")
        assert.strictEqual(set.exitCode, 0, set.stderr)
        assert.strictEqual(printedAs(set, Ref).version, 1)
        const lost = yield* cli("refs", "set", projectId, "refs/heads/main", a, "--expected-version", "0")
        assert.strictEqual(lost.exitCode, 1)
        assert.include(lost.stderr, "error ref_conflict")
        const got = yield* cli("refs", "get", projectId, "refs/heads/main", "--json")
        assert.strictEqual(printedAs(got, Ref).digest, a)
        const listed = yield* cli("refs", "list", projectId, "--json")
        assert.deepStrictEqual(printedAs(listed, Schema.Array(Ref)).map((r) => r.name), ["refs/heads/main"])
        const deleted = yield* cli("refs", "delete", projectId, "refs/heads/main", "--yes")
        assert.strictEqual(deleted.exitCode, 0, deleted.stderr)

        const doc = yield* store(JSON.stringify({ entities: [{ kind: "service", name: "api", owner: "team-a" }] }))
        const published = yield* cli("catalog", "publish", projectId, doc, "--json")
        assert.strictEqual(printedAs(published, CatalogHead).version, 1)
        const head = yield* cli("catalog", "head", projectId, "--json")
        assert.strictEqual(printedAs(head, CatalogHead).digest, doc)
        const history = yield* cli("catalog", "history", projectId, "--json")
        assert.lengthOf(printedAs(history, Schema.Array(CatalogHead)), 1)
        const entities = yield* cli("catalog", "entities", "--owner", "team-a", "--json")
        assert.deepStrictEqual(printedAs(entities, Schema.Array(CatalogEntity)).map((e) => e.name), ["api"])
      }))

    it.effect("tfstate list, pull and unlock", () =>
      Effect.gen(function*() {
        const { baseUrl, cli, orgId, projectId, token } = yield* setup
        const project = `/v1/organizations/${orgId}/projects/${projectId}`
        const environment = ok(
          yield* call(baseUrl, "POST", `${project}/environments`, { token, body: { name: "Prod" } }),
          { environment: Environment }
        ).environment
        const url = `${project}/state/tfstate/app/${environment.slug}`
        const state = JSON.stringify({ version: 4, serial: 3, lineage: "l-1", resources: [] })
        assert.strictEqual((yield* call(baseUrl, "POST", url, { token, body: state })).status, 200)
        assert.strictEqual(
          (yield* call(baseUrl, "LOCK", url, { token, body: JSON.stringify({ ID: "held", Who: "ci" }) })).status,
          200
        )
        const listed = yield* cli("tfstate", "list", projectId, "--json")
        const [summary] = printedAs(listed, Schema.Array(TfStateSummary))
        assert.deepStrictEqual([summary?.component, summary?.locked, summary?.lock?.Who], ["app", true, "ci"])
        const pulled = yield* cli("tfstate", "pull", projectId, "app", environment.slug)
        assert.strictEqual(pulled.exitCode, 0, pulled.stderr)
        assert.strictEqual(pulled.stdout.trim(), state)
        const none = yield* cli("tfstate", "pull", projectId, "other", environment.slug)
        assert.strictEqual(none.exitCode, 1)
        assert.include(none.stderr, "error not_found")
        const unlocked = yield* cli("tfstate", "unlock", projectId, "app", environment.slug, "--yes")
        assert.strictEqual(unlocked.exitCode, 0, unlocked.stderr)
        const after = yield* cli("tfstate", "list", projectId, "--json")
        assert.isFalse(printedAs(after, Schema.Array(TfStateSummary))[0]?.locked)
      }))
  }
)
