/**
 * Projects and environments end to end over real HTTP and the typed client (spec: Project, environment; "Projects
 * and environments" endpoints; States and transitions; Limits `limit.projects`; Events): create with slug rules,
 * archive (never delete: the record stays readable), restore (no-op when active, 412 at the ceiling), environments,
 * every error, and the events with their audit entries. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL`
 * is set.
 */
import { Conflict, NotFound, PreconditionFailed } from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs as cpctl } from "./support/cli.ts"
import { failed, ok } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, TestServer, testServerOver } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

const backends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

for (const backend of backends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `projects [${backend}]`,
    (it) => {
      const newUser = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { personal, ...session } = yield* signInWithPersonal(baseUrl, "prj")
        return { ...session, personal: personal as { id: string; slug: string } }
      })

      const api = (token: string, orgId: string) => (method: string, path: string, body?: unknown) =>
        Effect.flatMap(
          TestServer,
          ({ baseUrl }) =>
            call(baseUrl, method, `/v1/organizations/${orgId}${path}`, body === undefined ? { token } : { token, body })
        )

      const eventsOf = (orgId: string, subjectId: string) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const events = yield* sql<{ type: string; actorType: string }>`
          select type, actor_type from events where org_id = ${orgId} and subject_id = ${subjectId} order by occurred_at, id`
          const audits = yield* sql<{ eventType: string }>`
          select event_type from audit_entries where org_id = ${orgId} and subject_id = ${subjectId} order by occurred_at, id`
          return {
            events: events.map((e) => e.type),
            actors: events.map((e) => e.actorType),
            audits: audits.map((a) => a.eventType)
          }
        }).pipe(Effect.orDie)

      it.effect("projects: shape, derived and explicit slugs, 409, 422, list paging, get, 404 elsewhere", () =>
        Effect.gen(function*() {
          const owner = yield* newUser
          const as = api(owner.token, owner.personal.id)

          const created = ok(yield* as("POST", "/projects", { name: "  Web App  " })).project
          assert.deepStrictEqual(
            Object.keys(created).sort(),
            ["archivedAt", "createdAt", "id", "name", "orgId", "slug", "status", "updatedAt"]
          )
          assert.match(created.id, new RegExp(`^prj_${ULID}$`))
          assert.match(created.createdAt, ISO_MS)
          assert.deepInclude(created, {
            name: "Web App",
            slug: "web-app",
            status: "active",
            archivedAt: null,
            orgId: owner.personal.id
          })
          assert.strictEqual(ok(yield* as("POST", "/projects", { name: "web app" })).project.slug, "web-app-2")
          assert.strictEqual(ok(yield* as("POST", "/projects", { name: "Web-App" })).project.slug, "web-app-3")
          const taken = failed(yield* as("POST", "/projects", { name: "Other", slug: "web-app" }), 409, "conflict")
          assert.strictEqual(taken.details.field, "slug")
          const invalid = failed(
            yield* as("POST", "/projects", { name: " ", slug: "Not A Slug" }),
            422,
            "validation_failed"
          )
          assert.deepStrictEqual(Object.keys(invalid.details.fields).sort(), ["name", "slug"])
          assert.property(failed(yield* as("POST", "/projects", {}), 422, "validation_failed").details.fields, "name")

          const all = ok(yield* as("GET", "/projects")).projects
          assert.deepStrictEqual(all.map((p: any) => p.slug), ["web-app-3", "web-app-2", "web-app"])
          const page1 = yield* as("GET", "/projects?limit=2")
          const cursor = (page1.json as any).meta.cursor
          assert.isString(cursor)
          const page2 = ok(yield* as("GET", `/projects?limit=2&cursor=${encodeURIComponent(cursor)}`)).projects
          assert.deepStrictEqual(page2.map((p: any) => p.slug), ["web-app"])
          assert.property(
            failed(yield* as("GET", "/projects?limit=0"), 422, "validation_failed").details.fields,
            "limit"
          )

          assert.deepStrictEqual(ok(yield* as("GET", `/projects/${created.id}`)), { project: created })
          failed(yield* as("GET", `/projects/${newId("prj_", Date.now())}`), 404, "not_found")
          failed(yield* as("GET", "/projects/not-a-project"), 404, "not_found")
          // Another workspace's project is not there, for reads and writes alike.
          const stranger = yield* newUser
          const theirs = api(stranger.token, stranger.personal.id)
          failed(yield* theirs("GET", `/projects/${created.id}`), 404, "not_found")
          failed(yield* theirs("DELETE", `/projects/${created.id}`), 404, "not_found")
          failed(yield* theirs("POST", `/projects/${created.id}/restore`), 404, "not_found")
          failed(yield* theirs("GET", `/projects/${created.id}/environments`), 404, "not_found")
          // And slugs are per workspace.
          assert.strictEqual(
            ok(yield* theirs("POST", "/projects", { name: "x", slug: "web-app" })).project.slug,
            "web-app"
          )
          // Nor does a stranger see our workspace at all.
          failed(yield* api(stranger.token, owner.personal.id)("GET", "/projects"), 404, "not_found")

          const { audits, events } = yield* eventsOf(owner.personal.id, created.id)
          assert.deepStrictEqual(events, ["project.created"])
          assert.deepStrictEqual(audits, ["project.created"])
        }))

      it.effect("archive keeps the record readable; restore is a no-op when active; limit.projects gives 412", () =>
        Effect.gen(function*() {
          const owner = yield* newUser
          const as = api(owner.token, owner.personal.id)
          const made = []
          for (let i = 1; i <= 5; i++) made.push(ok(yield* as("POST", "/projects", { name: `P${i}` })).project)
          // The free plan allows five active projects (docs/decisions.md).
          const refused = failed(yield* as("POST", "/projects", { name: "P6" }), 412, "precondition_failed")
          assert.deepInclude(refused.details, { entitlement: "limit.projects", limit: 5, current: 5 })

          const first = made[0]
          const archived = ok(yield* as("DELETE", `/projects/${first.id}`)).project
          assert.deepInclude(archived, { id: first.id, status: "archived" })
          assert.match(archived.archivedAt, ISO_MS)
          // Still readable, still listed; archiving again answers the same record.
          assert.deepStrictEqual(ok(yield* as("GET", `/projects/${first.id}`)).project, archived)
          assert.deepStrictEqual(ok(yield* as("DELETE", `/projects/${first.id}`)).project, archived)
          assert.include(ok(yield* as("GET", "/projects")).projects.map((p: any) => p.status), "archived")
          // An archived project's slug stays taken.
          failed(yield* as("POST", "/projects", { name: "again", slug: first.slug }), 409, "conflict")
          // Its environments stay readable, but it takes no new one.
          failed(yield* as("POST", `/projects/${first.id}/environments`, { name: "dev" }), 409, "conflict")
          assert.deepStrictEqual(ok(yield* as("GET", `/projects/${first.id}/environments`)).environments, [])

          // Archiving freed a slot: one more create fits, then the ceiling again blocks restore.
          const sixth = ok(yield* as("POST", "/projects", { name: "P6" })).project
          const blocked = failed(yield* as("POST", `/projects/${first.id}/restore`), 412, "precondition_failed")
          assert.strictEqual(blocked.details.entitlement, "limit.projects")
          ok(yield* as("DELETE", `/projects/${sixth.id}`))
          const restored = ok(yield* as("POST", `/projects/${first.id}/restore`)).project
          assert.deepInclude(restored, { status: "active", archivedAt: null, slug: first.slug })
          // Restoring an active project is a no-op (no event), even at the ceiling.
          assert.deepStrictEqual(ok(yield* as("POST", `/projects/${first.id}/restore`)).project, restored)

          const { audits, events } = yield* eventsOf(owner.personal.id, first.id)
          assert.deepStrictEqual(events, ["project.created", "project.archived", "project.restored"])
          assert.deepStrictEqual(audits, events)
        }))

      it.effect("environments: create, slugs per project, list, get, archive; 404 across projects; permissions", () =>
        Effect.gen(function*() {
          const owner = yield* newUser
          const as = api(owner.token, owner.personal.id)
          const project = ok(yield* as("POST", "/projects", { name: "Envs" })).project
          const other = ok(yield* as("POST", "/projects", { name: "Other" })).project
          const base = `/projects/${project.id}/environments`

          const env = ok(yield* as("POST", base, { name: "Staging" })).environment
          assert.deepStrictEqual(
            Object.keys(env).sort(),
            [
              "archivedAt",
              "createdAt",
              "id",
              "lastActiveAt",
              "name",
              "orgId",
              "projectId",
              "slug",
              "status",
              "updatedAt"
            ]
          )
          assert.match(env.id, new RegExp(`^env_${ULID}$`))
          assert.deepInclude(env, {
            slug: "staging",
            status: "active",
            lastActiveAt: null,
            archivedAt: null,
            projectId: project.id
          })
          assert.strictEqual(ok(yield* as("POST", base, { name: "staging" })).environment.slug, "staging-2")
          failed(yield* as("POST", base, { name: "x", slug: "staging" }), 409, "conflict")
          // The same slug in another project is fine.
          ok(yield* as("POST", `/projects/${other.id}/environments`, { name: "x", slug: "staging" }))
          assert.property(
            failed(yield* as("POST", base, { name: "" }), 422, "validation_failed").details.fields,
            "name"
          )
          failed(
            yield* as("POST", `/projects/${newId("prj_", Date.now())}/environments`, { name: "x" }),
            404,
            "not_found"
          )

          const listed = ok(yield* as("GET", base)).environments
          assert.deepStrictEqual(listed.map((e: any) => e.slug), ["staging-2", "staging"])
          assert.deepStrictEqual(ok(yield* as("GET", `${base}/${env.id}`)), { environment: env })
          // An environment is named under its own project only.
          failed(yield* as("GET", `/projects/${other.id}/environments/${env.id}`), 404, "not_found")
          failed(yield* as("DELETE", `/projects/${other.id}/environments/${env.id}`), 404, "not_found")

          const archived = ok(yield* as("DELETE", `${base}/${env.id}`)).environment
          assert.deepInclude(archived, { status: "archived" })
          assert.match(archived.archivedAt, ISO_MS)
          assert.deepStrictEqual(ok(yield* as("GET", `${base}/${env.id}`)).environment, archived)
          assert.deepStrictEqual(ok(yield* as("DELETE", `${base}/${env.id}`)).environment, archived)
          const { audits, events } = yield* eventsOf(owner.personal.id, env.id)
          assert.deepStrictEqual(events, ["environment.created", "environment.archived"])
          assert.deepStrictEqual(audits, events)

          // A viewer reads but neither creates nor archives (403 naming the permission).
          const viewer = yield* newUser
          yield* seedMember(owner.personal.id, viewer.user.id, "viewer")
          const asViewer = api(viewer.token, owner.personal.id)
          assert.lengthOf(ok(yield* asViewer("GET", base)).environments, 2)
          assert.strictEqual(
            failed(yield* asViewer("POST", base, { name: "nope" }), 403, "forbidden").details.permission,
            "environment.create"
          )
          assert.strictEqual(
            failed(yield* asViewer("POST", "/projects", { name: "nope" }), 403, "forbidden").details.permission,
            "project.create"
          )
        }))

      it.effect("typed client: every route, and the error classes", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser
          const client = yield* clientFor(baseUrl, owner.token)
          const orgId = owner.personal.id
          const made = yield* client.projects.create({ params: { orgId }, payload: { name: "Typed" } })
          assert.strictEqual(made.project.slug, "typed")
          const listed = yield* client.projects.list({ params: { orgId }, query: {} })
          assert.deepStrictEqual(listed.data.projects, [made.project])
          const projectId = made.project.id
          assert.deepStrictEqual(yield* client.projects.get({ params: { orgId, projectId } }), made)
          const env = yield* client.projects.createEnvironment({
            params: { orgId, projectId },
            payload: { name: "Prod" }
          })
          const envs = yield* client.projects.listEnvironments({ params: { orgId, projectId }, query: {} })
          assert.deepStrictEqual(envs.data.environments, [env.environment])
          const environmentId = env.environment.id
          assert.deepStrictEqual(
            yield* client.projects.getEnvironment({ params: { orgId, projectId, environmentId } }),
            env
          )
          const gone = yield* client.projects.archiveEnvironment({ params: { orgId, projectId, environmentId } })
          assert.strictEqual(gone.environment.status, "archived")
          const archived = yield* client.projects.archive({ params: { orgId, projectId } })
          assert.strictEqual(archived.project.status, "archived")
          const restored = yield* client.projects.restore({ params: { orgId, projectId } })
          assert.strictEqual(restored.project.status, "active")
          assert.instanceOf(
            yield* Effect.flip(client.projects.create({ params: { orgId }, payload: { name: "x", slug: "typed" } })),
            Conflict
          )
          assert.instanceOf(
            yield* Effect.flip(client.projects.get({ params: { orgId, projectId: newId("prj_", Date.now()) as any } })),
            NotFound
          )
          for (let i = 0; i < 4; i++) {
            yield* client.projects.create({ params: { orgId }, payload: { name: `Fill ${i}` } })
          }
          assert.instanceOf(
            yield* Effect.flip(client.projects.create({ params: { orgId }, payload: { name: "Too many" } })),
            PreconditionFailed
          )
        }))

      if (backend === "pglite") {
        it.effect("cpctl projects list|create|archive|restore and envs list|create|archive", () =>
          Effect.gen(function*() {
            const { baseUrl } = yield* TestServer
            const owner = yield* newUser
            const ws = ["--workspace", owner.personal.id]
            const made = yield* cpctl(baseUrl, owner.token, "--json", "projects", "create", "Cli Project", ...ws)
            assert.strictEqual(made.exitCode, 0, made.stderr)
            const project = JSON.parse(made.stdout).project
            assert.strictEqual(project.slug, "cli-project")
            const listed = yield* cpctl(baseUrl, owner.token, "projects", "list", ...ws)
            assert.include(listed.stdout, "cli-project")
            const env = yield* cpctl(
              baseUrl,
              owner.token,
              "--json",
              "envs",
              "create",
              project.id,
              "Preview",
              "--slug",
              "pr-1",
              ...ws
            )
            assert.strictEqual(env.exitCode, 0, env.stderr)
            const environment = JSON.parse(env.stdout).environment
            assert.include((yield* cpctl(baseUrl, owner.token, "envs", "list", project.id, ...ws)).stdout, "pr-1")
            const envGone = yield* cpctl(
              baseUrl,
              owner.token,
              "--json",
              "envs",
              "archive",
              project.id,
              environment.id,
              ...ws
            )
            assert.strictEqual(JSON.parse(envGone.stdout).environment.status, "archived")
            const archived = yield* cpctl(baseUrl, owner.token, "--json", "projects", "archive", project.id, ...ws)
            assert.strictEqual(JSON.parse(archived.stdout).project.status, "archived")
            const restored = yield* cpctl(baseUrl, owner.token, "--json", "projects", "restore", project.id, ...ws)
            assert.strictEqual(JSON.parse(restored.stdout).project.status, "active")
            const dup = yield* cpctl(baseUrl, owner.token, "projects", "create", "x", "--slug", "cli-project", ...ws)
            assert.notStrictEqual(dup.exitCode, 0)
            assert.include(dup.stderr, "conflict")
          }))
      }
    }
  )
}
