/**
 * Projects and environments end to end over real HTTP and the typed client (spec: Project, environment; "Projects
 * and environments" endpoints; States and transitions; Limits `limit.projects`; Events): create with slug rules,
 * archive (never delete: the record stays readable), restore (no-op when active, 412 at the ceiling), environments,
 * every error, and the events with their audit entries. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL`
 * is set.
 */
import { Conflict, Environment, NotFound, PreconditionFailed, Project, ProjectId } from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs as cpctl, printedAs } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, nextCursor, ok, type Res, ULID } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `projects [${backend}]`,
    (it) => {
      const newUser = Effect.flatMap(TestServer, ({ baseUrl }) => signInWithPersonal(baseUrl, "prj"))

      type Api = (method: string, path: string, body?: unknown) => Effect.Effect<Res, never, TestServer>

      const api = (token: string, orgId: string): Api => (method, path, body) =>
        Effect.flatMap(
          TestServer,
          ({ baseUrl }) =>
            call(baseUrl, method, `/v1/organizations/${orgId}${path}`, body === undefined ? { token } : { token, body })
        )

      const eventsOf = (orgId: string, subjectId: string) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const events = yield* sql<{ type: string; actorType: string }>`
          select type, actor_type from events
          where org_id = ${orgId} and subject_id = ${subjectId} order by occurred_at, id`
          const audits = yield* sql<{ eventType: string }>`
          select event_type from audit_entries
          where org_id = ${orgId} and subject_id = ${subjectId} order by occurred_at, id`
          return {
            events: events.map((e) => e.type),
            actors: events.map((e) => e.actorType),
            audits: audits.map((a) => a.eventType)
          }
        }).pipe(Effect.orDie)

      /** A fresh user acting in its own `Personal` workspace. */
      const owner = Effect.map(newUser, (user) => ({ ...user, as: api(user.token, user.personal.id) }))

      const projectOf = (res: Res) => ok(res, { project: Project }).project
      const environmentOf = (res: Res) => ok(res, { environment: Environment }).environment
      const projectsOf = (res: Res) => ok(res, { projects: Schema.Array(Project) }).projects
      const environmentsOf = (res: Res) => ok(res, { environments: Schema.Array(Environment) }).environments

      /** Creates the free plan's five active projects (docs/decisions.md): the first of them. */
      const fillToTheCeiling = (as: Api) =>
        Effect.gen(function*() {
          const first = projectOf(yield* as("POST", "/projects", { name: "P1" }))
          for (const i of [2, 3, 4, 5]) projectOf(yield* as("POST", "/projects", { name: `P${i}` }))
          return first
        })

      it.effect("a created project has the wire shape; its slug derives from the name, -2 and -3 on collision", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const created = projectOf(yield* as("POST", "/projects", { name: "  Web App  " }))
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
            orgId: personal.id
          })
          assert.strictEqual(projectOf(yield* as("POST", "/projects", { name: "web app" })).slug, "web-app-2")
          assert.strictEqual(projectOf(yield* as("POST", "/projects", { name: "Web-App" })).slug, "web-app-3")
        }))

      it.effect("create: a taken slug is 409 on `slug`; a blank name, a bad slug, a missing name are 422", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          projectOf(yield* as("POST", "/projects", { name: "Web App" }))
          const taken = failed(yield* as("POST", "/projects", { name: "Other", slug: "web-app" }), 409, "conflict")
          assert.strictEqual(taken.details["field"], "slug")
          const invalid = invalidFields(yield* as("POST", "/projects", { name: " ", slug: "Not A Slug" }))
          assert.deepStrictEqual(Object.keys(invalid).sort(), ["name", "slug"])
          assert.property(invalidFields(yield* as("POST", "/projects", {})), "name")
        }))

      it.effect("the project list is newest first and pages by cursor; limit=0 is 422", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          for (const name of ["Web App", "web app", "Web-App"]) yield* as("POST", "/projects", { name })
          const all = projectsOf(yield* as("GET", "/projects"))
          assert.deepStrictEqual(all.map((p) => p.slug), ["web-app-3", "web-app-2", "web-app"])
          const cursor = nextCursor(yield* as("GET", "/projects?limit=2"))
          const page2 = projectsOf(yield* as("GET", `/projects?limit=2&cursor=${encodeURIComponent(cursor)}`))
          assert.deepStrictEqual(page2.map((p) => p.slug), ["web-app"])
          assert.property(invalidFields(yield* as("GET", "/projects?limit=0")), "limit")
        }))

      it.effect("get answers the project; an unknown or malformed project id is 404", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const created = projectOf(yield* as("POST", "/projects", { name: "Web App" }))
          assert.deepStrictEqual(ok(yield* as("GET", `/projects/${created.id}`)), { project: created })
          failed(yield* as("GET", `/projects/${newId("prj_", Date.now())}`), 404, "not_found")
          failed(yield* as("GET", "/projects/not-a-project"), 404, "not_found")
        }))

      it.effect("another workspace's project is 404 for reads and writes; slugs are per workspace", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const created = projectOf(yield* as("POST", "/projects", { name: "Web App" }))
          const stranger = yield* owner
          failed(yield* stranger.as("GET", `/projects/${created.id}`), 404, "not_found")
          failed(yield* stranger.as("DELETE", `/projects/${created.id}`), 404, "not_found")
          failed(yield* stranger.as("POST", `/projects/${created.id}/restore`), 404, "not_found")
          failed(yield* stranger.as("GET", `/projects/${created.id}/environments`), 404, "not_found")
          assert.strictEqual(
            projectOf(yield* stranger.as("POST", "/projects", { name: "x", slug: "web-app" })).slug,
            "web-app"
          )
        }))

      it.effect("a stranger does not see the workspace at all: 404", () =>
        Effect.gen(function*() {
          const { personal } = yield* owner
          const stranger = yield* newUser
          failed(yield* api(stranger.token, personal.id)("GET", "/projects"), 404, "not_found")
        }))

      it.effect("creating a project records project.created and its audit entry", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const created = projectOf(yield* as("POST", "/projects", { name: "Web App" }))
          const { audits, events } = yield* eventsOf(personal.id, created.id)
          assert.deepStrictEqual(events, ["project.created"])
          assert.deepStrictEqual(audits, ["project.created"])
        }))

      it.effect("limit.projects: a sixth active project is 412 naming the entitlement, the limit and the count", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          yield* fillToTheCeiling(as)
          const refused = failed(yield* as("POST", "/projects", { name: "P6" }), 412, "precondition_failed")
          assert.deepInclude(refused.details, { entitlement: "limit.projects", limit: 5, current: 5 })
        }))

      it.effect("archive keeps the record readable and listed; archiving again answers the same record", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const first = projectOf(yield* as("POST", "/projects", { name: "P1" }))
          const archived = projectOf(yield* as("DELETE", `/projects/${first.id}`))
          assert.deepInclude(archived, { id: first.id, status: "archived" })
          assert.match(archived.archivedAt ?? "", ISO_MS)
          assert.deepStrictEqual(projectOf(yield* as("GET", `/projects/${first.id}`)), archived)
          assert.deepStrictEqual(projectOf(yield* as("DELETE", `/projects/${first.id}`)), archived)
          assert.include(projectsOf(yield* as("GET", "/projects")).map((p) => p.status), "archived")
        }))

      it.effect("an archived project keeps its slug taken and its environments readable, and takes no new one", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const first = projectOf(yield* as("POST", "/projects", { name: "P1" }))
          projectOf(yield* as("DELETE", `/projects/${first.id}`))
          failed(yield* as("POST", "/projects", { name: "again", slug: first.slug }), 409, "conflict")
          failed(yield* as("POST", `/projects/${first.id}/environments`, { name: "dev" }), 409, "conflict")
          assert.deepStrictEqual(environmentsOf(yield* as("GET", `/projects/${first.id}/environments`)), [])
        }))

      it.effect("restore is 412 at the ceiling, reactivates below it, and is a no-op on an active project", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const first = yield* fillToTheCeiling(as)
          projectOf(yield* as("DELETE", `/projects/${first.id}`))
          // Archiving freed a slot: one more create fits, then the ceiling again blocks restore.
          const sixth = projectOf(yield* as("POST", "/projects", { name: "P6" }))
          const blocked = failed(yield* as("POST", `/projects/${first.id}/restore`), 412, "precondition_failed")
          assert.strictEqual(blocked.details["entitlement"], "limit.projects")
          ok(yield* as("DELETE", `/projects/${sixth.id}`))
          const restored = projectOf(yield* as("POST", `/projects/${first.id}/restore`))
          assert.deepInclude(restored, { status: "active", archivedAt: null, slug: first.slug })
          // Restoring an active project is a no-op (no event), even at the ceiling.
          assert.deepStrictEqual(projectOf(yield* as("POST", `/projects/${first.id}/restore`)), restored)

          const { audits, events } = yield* eventsOf(personal.id, first.id)
          assert.deepStrictEqual(events, ["project.created", "project.archived", "project.restored"])
          assert.deepStrictEqual(audits, events)
        }))

      /** An owner with two projects, and the environments path of the first. */
      const withProjects = Effect.gen(function*() {
        const user = yield* owner
        const project = projectOf(yield* user.as("POST", "/projects", { name: "Envs" }))
        const other = projectOf(yield* user.as("POST", "/projects", { name: "Other" }))
        return { ...user, project, other, base: `/projects/${project.id}/environments` }
      })

      it.effect("a created environment has the wire shape; its slug derives from the name, -2 on collision", () =>
        Effect.gen(function*() {
          const { as, base, project } = yield* withProjects
          const env = environmentOf(yield* as("POST", base, { name: "Staging" }))
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
          assert.strictEqual(environmentOf(yield* as("POST", base, { name: "staging" })).slug, "staging-2")
        }))

      it.effect("environment slugs are per project: 409 in the same one, fine in another; 422 and 404 on create", () =>
        Effect.gen(function*() {
          const { as, base, other } = yield* withProjects
          environmentOf(yield* as("POST", base, { name: "Staging" }))
          failed(yield* as("POST", base, { name: "x", slug: "staging" }), 409, "conflict")
          environmentOf(yield* as("POST", `/projects/${other.id}/environments`, { name: "x", slug: "staging" }))
          assert.property(invalidFields(yield* as("POST", base, { name: "" })), "name")
          failed(
            yield* as("POST", `/projects/${newId("prj_", Date.now())}/environments`, { name: "x" }),
            404,
            "not_found"
          )
        }))

      it.effect("environments list newest first and get by id under their own project only", () =>
        Effect.gen(function*() {
          const { as, base, other } = yield* withProjects
          const env = environmentOf(yield* as("POST", base, { name: "Staging" }))
          environmentOf(yield* as("POST", base, { name: "staging" }))
          const listed = environmentsOf(yield* as("GET", base))
          assert.deepStrictEqual(listed.map((e) => e.slug), ["staging-2", "staging"])
          assert.deepStrictEqual(ok(yield* as("GET", `${base}/${env.id}`)), { environment: env })
          failed(yield* as("GET", `/projects/${other.id}/environments/${env.id}`), 404, "not_found")
          failed(yield* as("DELETE", `/projects/${other.id}/environments/${env.id}`), 404, "not_found")
        }))

      it.effect("an archived environment stays readable; archiving again answers it; both recorded with audits", () =>
        Effect.gen(function*() {
          const { as, base, personal } = yield* withProjects
          const env = environmentOf(yield* as("POST", base, { name: "Staging" }))
          const archived = environmentOf(yield* as("DELETE", `${base}/${env.id}`))
          assert.deepInclude(archived, { status: "archived" })
          assert.match(archived.archivedAt ?? "", ISO_MS)
          assert.deepStrictEqual(environmentOf(yield* as("GET", `${base}/${env.id}`)), archived)
          assert.deepStrictEqual(environmentOf(yield* as("DELETE", `${base}/${env.id}`)), archived)
          const { audits, events } = yield* eventsOf(personal.id, env.id)
          assert.deepStrictEqual(events, ["environment.created", "environment.archived"])
          assert.deepStrictEqual(audits, events)
        }))

      it.effect("a viewer lists environments but creates neither them nor projects: 403 naming the permission", () =>
        Effect.gen(function*() {
          const { as, base, personal } = yield* withProjects
          environmentOf(yield* as("POST", base, { name: "Staging" }))
          environmentOf(yield* as("POST", base, { name: "staging" }))
          const viewer = yield* newUser
          yield* seedMember(personal.id, viewer.user.id, "viewer")
          const asViewer = api(viewer.token, personal.id)
          assert.lengthOf(environmentsOf(yield* asViewer("GET", base)), 2)
          assert.strictEqual(
            failed(yield* asViewer("POST", base, { name: "nope" }), 403, "forbidden").details["permission"],
            "environment.create"
          )
          assert.strictEqual(
            failed(yield* asViewer("POST", "/projects", { name: "nope" }), 403, "forbidden").details["permission"],
            "project.create"
          )
        }))

      /** A fresh owner's typed client, and its `Personal` workspace's id. */
      const typedClient = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser
        return { client: yield* clientFor(baseUrl, user.token), orgId: user.personal.id }
      })

      it.effect("typed client: every project and environment route", () =>
        Effect.gen(function*() {
          const { client, orgId } = yield* typedClient
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
        }))

      it.effect("typed client: a taken slug fails with Conflict, an unknown project with NotFound", () =>
        Effect.gen(function*() {
          const { client, orgId } = yield* typedClient
          yield* client.projects.create({ params: { orgId }, payload: { name: "Typed" } })
          assert.instanceOf(
            yield* Effect.flip(client.projects.create({ params: { orgId }, payload: { name: "x", slug: "typed" } })),
            Conflict
          )
          const projectId = ProjectId.make(newId("prj_", Date.now()))
          assert.instanceOf(yield* Effect.flip(client.projects.get({ params: { orgId, projectId } })), NotFound)
        }))

      it.effect("typed client: a project past limit.projects fails with PreconditionFailed", () =>
        Effect.gen(function*() {
          const { client, orgId } = yield* typedClient
          for (let i = 0; i < 5; i++) {
            yield* client.projects.create({ params: { orgId }, payload: { name: `Fill ${i}` } })
          }
          assert.instanceOf(
            yield* Effect.flip(client.projects.create({ params: { orgId }, payload: { name: "Too many" } })),
            PreconditionFailed
          )
        }))

      if (backend === "pglite") {
        it.effect("cpctl projects create|list|archive|restore; a taken slug exits non-zero naming conflict", () =>
          Effect.gen(function*() {
            const { baseUrl } = yield* TestServer
            const { token, personal } = yield* newUser
            const ws = ["--workspace", personal.id]
            const made = yield* cpctl(baseUrl, token, "--json", "projects", "create", "Cli Project", ...ws)
            assert.strictEqual(made.exitCode, 0, made.stderr)
            const project = printedAs(made, Project)
            assert.strictEqual(project.slug, "cli-project")
            const listed = yield* cpctl(baseUrl, token, "projects", "list", ...ws)
            assert.include(listed.stdout, "cli-project")
            const archived = yield* cpctl(baseUrl, token, "--json", "projects", "archive", project.id, ...ws, "--yes")
            assert.strictEqual(printedAs(archived, Project).status, "archived")
            const restored = yield* cpctl(baseUrl, token, "--json", "projects", "restore", project.id, ...ws)
            assert.strictEqual(printedAs(restored, Project).status, "active")
            const dup = yield* cpctl(baseUrl, token, "projects", "create", "x", "--slug", "cli-project", ...ws)
            assert.notStrictEqual(dup.exitCode, 0)
            assert.include(dup.stderr, "conflict")
          }))

        it.effect("cpctl envs create|list|archive", () =>
          Effect.gen(function*() {
            const { baseUrl } = yield* TestServer
            const { token, personal, as } = yield* owner
            const project = projectOf(yield* as("POST", "/projects", { name: "Cli Project" }))
            const ws = ["--workspace", personal.id]
            const env = yield* cpctl(
              baseUrl,
              token,
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
            const environment = printedAs(env, Environment)
            assert.include((yield* cpctl(baseUrl, token, "envs", "list", project.id, ...ws)).stdout, "pr-1")
            const envGone = yield* cpctl(
              baseUrl,
              token,
              "--json",
              "envs",
              "archive",
              project.id,
              environment.id,
              ...ws,
              "-y"
            )
            assert.strictEqual(printedAs(envGone, Environment).status, "archived")
          }))
      }
    }
  )
}
