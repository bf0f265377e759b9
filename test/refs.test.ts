/**
 * Refs and the catalog head end to end over real HTTP (run-state.md §5): percent-encoded names, compare-and-swap
 * versions with 409 `ref_conflict` and its details, two clients racing one swap (exactly one wins), a digest that is
 * not stored (404 `object_missing`), the catalog head's CAS and history, the entity read model a published catalog
 * document fills with its filters, and the project-scoped entity route's 501. Objects are seeded as the object store
 * writes them. On PGlite, and PostgreSQL when `DATABASE_URL` is set.
 */
import { CatalogEntity, CatalogHead, Ref, RepoFacet, StateTrigger } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, nextCursor, ok, pageOf } from "./support/envelope.ts"
import { seedObject } from "./support/seed.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const digestOf = (bytes: Buffer) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `refs and catalog [${backend}]`,
    (it) => {
      const setup = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "refs")
        const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
        const org = `/v1/organizations/${user.personal.id}`
        const as = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
          call(baseUrl, method, `${org}${path}`, {
            token: user.token,
            ...(body === undefined ? {} : { body }),
            ...(headers === undefined ? {} : { headers })
          })
        const state = (method: string, path: string, body?: unknown) =>
          as(method, `/projects/${projectId}/state${path}`, body)
        /** Stores `content` as the object store does: its digest. */
        const store = (content: string) => seedObject(user.personal.id, projectId, content)
        return { ...user, baseUrl, projectId, as, state, store }
      })

      const refOf = (res: Parameters<typeof ok>[0]) => ok(res, { ref: Ref }).ref

      it.effect("set, get and list refs by percent-encoded name; versions count up; delete", () =>
        Effect.gen(function*() {
          const { state, store } = yield* setup
          const a = yield* store("a")
          const b = yield* store("b")
          const first = refOf(yield* state("PUT", "/refs/refs%2Fheads%2Fmain", { digest: a }))
          assert.deepStrictEqual([first.name, first.digest, first.version, first.updatedBy.kind], [
            "refs/heads/main",
            a,
            1,
            "user"
          ])
          assert.strictEqual(refOf(yield* state("PUT", "/refs/refs%2Fheads%2Fmain", { digest: b })).version, 2)
          refOf(yield* state("PUT", "/refs/refs%2Ftags%2Fv1", { digest: a }))
          refOf(yield* state("PUT", "/refs/latest", { digest: a }))
          const got = refOf(yield* state("GET", "/refs/refs%2Fheads%2Fmain"))
          assert.deepStrictEqual([got.digest, got.version], [b, 2])
          const all = ok(yield* state("GET", "/refs"), { refs: Schema.Array(Ref) }).refs
          assert.deepStrictEqual(all.map((r) => r.name), ["latest", "refs/heads/main", "refs/tags/v1"])
          const tags = ok(yield* state("GET", "/refs?prefix=refs%2Ft"), { refs: Schema.Array(Ref) }).refs
          assert.deepStrictEqual(tags.map((r) => r.name), ["refs/tags/v1"])
          assert.deepStrictEqual(ok(yield* state("DELETE", "/refs/latest"), { deleted: Schema.Boolean }), {
            deleted: true
          })
          failed(yield* state("GET", "/refs/latest"), 404, "not_found")
          failed(yield* state("DELETE", "/refs/latest"), 404, "not_found")
        }))

      it.effect("a lost compare-and-swap is 409 ref_conflict with the current version and digest", () =>
        Effect.gen(function*() {
          const { state, store } = yield* setup
          const a = yield* store("a")
          const b = yield* store("b")
          refOf(yield* state("PUT", "/refs/main", { digest: a, expectedVersion: 0 }))
          const exists = failed(
            yield* state("PUT", "/refs/main", { digest: b, expectedVersion: 0 }),
            409,
            "ref_conflict"
          )
          assert.deepStrictEqual(exists.details, { currentVersion: 1, currentDigest: a })
          const stale = failed(
            yield* state("PUT", "/refs/main", { digest: b, expectedVersion: 5 }),
            409,
            "ref_conflict"
          )
          assert.deepStrictEqual(stale.details, { currentVersion: 1, currentDigest: a })
          assert.strictEqual(refOf(yield* state("PUT", "/refs/main", { digest: b, expectedVersion: 1 })).version, 2)
          const missing = failed(
            yield* state("PUT", "/refs/other", { digest: b, expectedVersion: 3 }),
            409,
            "ref_conflict"
          )
          assert.deepStrictEqual(missing.details, { currentVersion: 0, currentDigest: null })
          failed(yield* state("DELETE", "/refs/main?expectedVersion=1"), 409, "ref_conflict")
          ok(yield* state("DELETE", "/refs/main?expectedVersion=2"))
        }))

      it.effect("two clients swapping one ref from the same version: exactly one wins", () =>
        Effect.gen(function*() {
          const { state, store } = yield* setup
          const base = yield* store("base")
          refOf(yield* state("PUT", "/refs/race", { digest: base }))
          for (let round = 0; round < 5; round++) {
            const x = yield* store(`x${round}`)
            const y = yield* store(`y${round}`)
            const version = round + 1
            const [rx, ry] = yield* Effect.all([
              state("PUT", "/refs/race", { digest: x, expectedVersion: version }),
              state("PUT", "/refs/race", { digest: y, expectedVersion: version })
            ], { concurrency: 2 })
            assert.deepStrictEqual([rx.status, ry.status].sort(), [200, 409], `${rx.text} ${ry.text}`)
            const winner = rx.status === 200 ? x : y
            const loser = failed(rx.status === 409 ? rx : ry, 409, "ref_conflict")
            assert.deepStrictEqual(loser.details, { currentVersion: version + 1, currentDigest: winner })
            assert.strictEqual(refOf(yield* state("GET", "/refs/race")).digest, winner)
          }
        }))

      it.effect("a digest that is not stored is 404 object_missing; bad names are 422 or 404", () =>
        Effect.gen(function*() {
          const { state } = yield* setup
          const absent = digestOf(Buffer.from(randomUUID()))
          const error = failed(yield* state("PUT", "/refs/main", { digest: absent }), 404, "object_missing")
          assert.strictEqual(error.details["digest"], absent)
          failed(yield* state("PUT", "/catalog/head", { digest: absent }), 404, "object_missing")
          failed(yield* state("GET", "/catalog/head"), 404, "not_found")
          failed(yield* state("PUT", "/refs/main", { digest: "md5:abc" }), 422, "validation_failed")
          for (const name of ["a..b", "%2Fleading", "trailing%2F", "sp%20ace"]) {
            failed(yield* state("GET", `/refs/${name}`), 404, "not_found")
          }
        }))

      it.effect("the catalog head: CAS, history newest first with a cursor, entities with filters", () =>
        Effect.gen(function*() {
          const { as, projectId, state, store } = yield* setup
          const v1 = yield* store(JSON.stringify({
            entities: [
              { kind: "service", name: "api", owner: "team-a", environment: "prod", description: "The API" },
              { kind: "service", name: "web", owner: "team-b", description: "Front end" },
              { kind: "library", name: "shared", metadata: { lang: "ts" } }
            ]
          }))
          const h1 = ok(yield* state("PUT", "/catalog/head", { digest: v1 }), { head: CatalogHead }).head
          assert.deepStrictEqual([h1.digest, h1.version, h1.publishedBy.kind], [v1, 1, "user"])
          const v2 = yield* store(JSON.stringify({ entities: [{ kind: "service", name: "api", owner: "team-a" }] }))
          const lost = failed(
            yield* state("PUT", "/catalog/head", { digest: v2, expectedDigest: v2 }),
            409,
            "ref_conflict"
          )
          assert.deepStrictEqual(lost.details, { currentVersion: 1, currentDigest: v1 })

          const entities = (query: string) =>
            Effect.map(
              as("GET", `/catalog/entities${query}`),
              (res) => ok(res, { entities: Schema.Array(CatalogEntity) }).entities
            )
          assert.deepStrictEqual((yield* entities("")).map((e) => `${e.kind}:${e.name}`), [
            "library:shared",
            "service:api",
            "service:web"
          ])
          assert.deepStrictEqual((yield* entities("?kind=service&owner=team-a")).map((e) => e.name), ["api"])
          assert.deepStrictEqual((yield* entities("?q=Front")).map((e) => e.name), ["web"])
          assert.deepStrictEqual((yield* entities("?environment=prod")).map((e) => e.name), ["api"])
          const [shared] = yield* entities(`?project=${projectId}&kind=library`)
          assert.strictEqual(shared?.projectId, projectId)
          assert.deepStrictEqual(shared?.metadata, { lang: "ts" })
          assert.lengthOf(yield* entities(`?project=${shared?.projectSlug ?? ""}`), 3)
          assert.lengthOf(yield* entities("?project=no-such-project"), 0)

          ok(yield* state("PUT", "/catalog/head", { digest: v2, expectedDigest: v1 }))
          assert.deepStrictEqual((yield* entities("")).map((e) => e.name), ["api"])
          // A head that is not a catalog document leaves the entities as they were.
          const plain = yield* store("not a catalog")
          const h3 = ok(yield* state("PUT", "/catalog/head", { digest: plain }), { head: CatalogHead }).head
          assert.strictEqual(h3.version, 3)
          assert.strictEqual(ok(yield* state("GET", "/catalog/head"), { head: CatalogHead }).head.digest, plain)
          assert.lengthOf(yield* entities(""), 1)

          const page1 = yield* state("GET", "/catalog/heads/history?limit=2")
          const first = pageOf(page1, { heads: Schema.Array(CatalogHead) })
          assert.deepStrictEqual(first.data.heads.map((h) => h.version), [3, 2])
          const page2 = yield* state("GET", `/catalog/heads/history?limit=2&cursor=${nextCursor(page1)}`)
          assert.deepStrictEqual(pageOf(page2, { heads: Schema.Array(CatalogHead) }).data.heads.map((h) => h.version), [
            1
          ])

          failed(yield* as("GET", `/projects/${projectId}/catalog/entities`), 501, "not_implemented")
        }))

      it.effect("repo facets: the linked project's repository, last run, catalog head and entity count", () =>
        Effect.gen(function*() {
          const { as, projectId, state, store } = yield* setup
          const project = ok(yield* as("GET", `/projects/${projectId}`), {
            project: Schema.Struct({ slug: Schema.String })
          }).project
          ok(
            yield* as("POST", "/cli/links", { remoteUrl: "https://github.com/Acme/App.git", projectSlug: project.slug })
          )
          const doc = yield* store(JSON.stringify({ entities: [{ kind: "service", name: "api" }] }))
          ok(yield* state("PUT", "/catalog/head", { digest: doc }))
          const runId = "01JD0000000000000000000001"
          ok(yield* state("POST", "/runs", { runId, jobs: [{ jobId: "build" }] }))
          const facets = ok(yield* as("GET", "/repo-facets"), { repoFacets: Schema.Array(RepoFacet) }).repoFacets
          assert.deepStrictEqual(facets.map((f) => [f.projectId, f.repoFullName, f.lastRunStatus, f.catalogHead]), [
            [projectId, "Acme/App", "queued", doc]
          ])
          const one = ok(yield* as("GET", `/repo-facets/${projectId}`), { repoFacet: RepoFacet }).repoFacet
          assert.deepStrictEqual([one.projectSlug, one.entityCount, one.defaultBranch], [project.slug, 1, null])
          failed(yield* as("GET", "/repo-facets/prj_01ARZ3NDEKTSV4RRFFQ69G5FAV"), 404, "not_found")
        }))

      it.effect("triggers: the project's scm.* events newest first with a cursor, nothing else", () =>
        Effect.gen(function*() {
          const { personal, projectId, state } = yield* setup
          const sql = yield* SqlClient.SqlClient
          const record = (type: string, at: number, project: string | null, data: Record<string, unknown>) =>
            sql`
              insert into events (id, org_id, type, occurred_at, actor_type, actor_id, subject_kind, subject_id,
                project_id, data)
              values (${randomUUID()}::uuid, ${personal.id}, ${type}, ${new Date(Date.UTC(2026, 10, 1, 0, 0, at))},
                'system', 'system', 'repository', 'acme/app', ${project}, ${JSON.stringify(data)}::jsonb)`.pipe(
              Effect.orDie
            )
          yield* record("scm.push", 1, projectId, { repoFullName: "acme/app", ref: "refs/heads/main", sha: "a1" })
          yield* record("scm.pull_request.opened", 2, projectId, { repoFullName: "acme/app", ref: "refs/pull/7" })
          yield* record("scm.push", 3, null, { repoFullName: "acme/other", ref: "refs/heads/main", sha: "b2" })
          yield* record("project.created", 4, projectId, {})
          yield* record("scm.push", 5, projectId, { repoFullName: "acme/app", ref: "refs/heads/dev", sha: "c3" })
          const first = yield* state("GET", "/triggers?limit=2")
          const page = pageOf(first, { triggers: Schema.Array(StateTrigger) })
          assert.deepStrictEqual(page.data.triggers.map((t) => [t.eventType, t.ref, t.sha]), [
            ["scm.push", "refs/heads/dev", "c3"],
            ["scm.pull_request.opened", "refs/pull/7", null]
          ])
          assert.strictEqual(page.data.triggers[0]?.repoFullName, "acme/app")
          const rest = pageOf(
            yield* state("GET", `/triggers?limit=2&cursor=${nextCursor(first)}`),
            { triggers: Schema.Array(StateTrigger) }
          )
          assert.deepStrictEqual(rest.data.triggers.map((t) => t.sha), ["a1"])
          assert.strictEqual(rest.cursor, null)
        }))
    }
  )
}
