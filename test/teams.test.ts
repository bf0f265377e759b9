/**
 * Teams end to end over real HTTP and the typed client (spec: team resources, Teams endpoints, the effective-access
 * row of Workspaces, Authentication 6; contract §4 Response data shape, team DELETE; §5 team grants): CRUD with slug
 * rules, members, role grants named by their tuple (a DELETE with a JSON body), every error, and the point of it all:
 * a team's grants reach its members with `via.kind: "team"` and stop when the team goes. Runs on PGlite, and on
 * PostgreSQL too when `DATABASE_URL` is set; the `cpctl teams` / `cpctl access explain` commands run on PGlite.
 */
import { Conflict, NotFound, Team, TeamRoleGrant } from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs as cpctl } from "./support/cli.ts"
import { failed, ok } from "./support/envelope.ts"
import { seedBinding, seedMember } from "./support/seed.ts"
import { call, clientFor, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const backends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const projectId = () => newId("prj_", Date.now())

for (const backend of backends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `teams [${backend}]`,
    (it) => {
      /** A fresh user with its `Personal` account root. */
      const newUser = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { personal, ...session } = yield* signInWithPersonal(baseUrl, "team")
        return { ...session, personal: personal as { id: string; slug: string; workspaceRef: string } }
      })

      /** Raw HTTP under one workspace as one caller. */
      const api = (token: string, orgId: string) => (method: string, path: string, body?: unknown) =>
        Effect.flatMap(
          TestServer,
          ({ baseUrl }) =>
            call(baseUrl, method, `/v1/organizations/${orgId}${path}`, body === undefined ? { token } : { token, body })
        )

      /** What each permission is allowed through, for a caller (or, as the owner, for `subjectId`). */
      const accessOf = (token: string, orgId: string, query = "") =>
        Effect.map(
          api(token, orgId)("GET", `/effective-access${query}`),
          (res) => new Map<string, any>(ok(res).permissions.map((d: any) => [d.action, d]))
        )

      it.effect("CRUD: the team shape, derived and explicit slugs, 409, 422, 404, and DELETE answers deleted", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser
          const as = api(owner.token, owner.personal.id)

          const created = ok(yield* as("POST", "/teams", { name: "  Platform Team  " })).team
          assert.deepStrictEqual(Object.keys(created).sort(), ["createdAt", "id", "name", "slug", "status"])
          assert.match(created.id, new RegExp(`^team_${ULID}$`))
          assert.match(created.createdAt, ISO_MS)
          assert.deepInclude(created, { name: "Platform Team", slug: "platform-team", status: "active" })
          assert.strictEqual(ok(yield* as("POST", "/teams", { name: "platform team" })).team.slug, "platform-team-2")
          const explicit = ok(yield* as("POST", "/teams", { name: "Ops", slug: "ops" })).team
          const taken = failed(yield* as("POST", "/teams", { name: "Other", slug: "ops" }), 409, "conflict")
          assert.strictEqual(taken.details.field, "slug")
          // Slugs are per workspace: another workspace may use the same one.
          const stranger = yield* newUser
          ok(yield* api(stranger.token, stranger.personal.id)("POST", "/teams", { name: "Ops", slug: "ops" }))

          const invalid = failed(
            yield* as("POST", "/teams", { name: " ", slug: "Not A Slug" }),
            422,
            "validation_failed"
          )
          assert.deepStrictEqual(Object.keys(invalid.details.fields).sort(), ["name", "slug"])
          assert.property(failed(yield* as("POST", "/teams", {}), 422, "validation_failed").details.fields, "name")
          failed(yield* as("POST", "/teams", "{not json"), 400, "bad_request")
          failed(
            yield* call(baseUrl, "POST", `/v1/organizations/${owner.personal.id}/teams`, {
              token: owner.token,
              body: "name=x",
              headers: { "content-type": "text/plain" }
            }),
            415,
            "unsupported"
          )

          // List: newest first, paged by cursor; limit outside 1..100 is 422.
          const all = ok(yield* as("GET", "/teams")).teams
          assert.deepStrictEqual(all.map((t: any) => t.slug), ["ops", "platform-team-2", "platform-team"])
          assert.deepStrictEqual(all[0], explicit, "list entries equal the create answer")
          const page1 = yield* as("GET", "/teams?limit=2")
          const cursor = (page1.json as any).meta.cursor
          assert.isString(cursor)
          const page2 = yield* as("GET", `/teams?limit=2&cursor=${encodeURIComponent(cursor)}`)
          assert.deepStrictEqual(ok(page2).teams.map((t: any) => t.slug), ["platform-team"])
          assert.isNull((page2.json as any).meta.cursor)
          assert.property(failed(yield* as("GET", "/teams?limit=0"), 422, "validation_failed").details.fields, "limit")
          const stolen = yield* api(stranger.token, stranger.personal.id)(
            "GET",
            `/teams?cursor=${encodeURIComponent(cursor)}`
          )
          assert.property(failed(stolen, 422, "validation_failed").details.fields, "cursor")

          // Get, by the alias and a slug reference too; 404 for unknown, malformed and other workspaces' teams.
          assert.deepStrictEqual(ok(yield* as("GET", `/teams/${created.id}`)), { team: created })
          const viaAlias = yield* call(baseUrl, "GET", `/v1/workspaces/${owner.personal.slug}/teams/${created.id}`, {
            token: owner.token
          })
          assert.strictEqual(ok(viaAlias).team.id, created.id)
          for (const id of [newId("team_", Date.now()), "nope", "team_123"]) {
            failed(yield* as("GET", `/teams/${id}`), 404, "not_found")
          }
          const foreign = ok(yield* api(stranger.token, stranger.personal.id)("GET", "/teams")).teams[0]
          failed(yield* as("GET", `/teams/${foreign.id}`), 404, "not_found")
          failed(yield* as("PATCH", `/teams/${foreign.id}`, { name: "Mine now" }), 404, "not_found")
          failed(yield* as("DELETE", `/teams/${foreign.id}`), 404, "not_found")

          // Patch name and/or slug.
          const renamed = ok(yield* as("PATCH", `/teams/${created.id}`, { name: "Platform", slug: "platform" })).team
          assert.deepStrictEqual(renamed, { ...created, name: "Platform", slug: "platform" })
          assert.deepStrictEqual(ok(yield* as("PATCH", `/teams/${created.id}`, {})).team, renamed)
          failed(yield* as("PATCH", `/teams/${created.id}`, { slug: "ops" }), 409, "conflict")
          assert.deepStrictEqual(
            Object.keys(
              failed(yield* as("PATCH", `/teams/${created.id}`, { slug: "-x", name: "" }), 422, "validation_failed")
                .details.fields
            ).sort(),
            ["name", "slug"]
          )

          // Delete: nothing remains, so `{ deleted: true }`; afterwards the team is 404 everywhere.
          assert.deepStrictEqual(ok(yield* as("DELETE", `/teams/${created.id}`)), { deleted: true })
          failed(yield* as("GET", `/teams/${created.id}`), 404, "not_found")
          failed(yield* as("DELETE", `/teams/${created.id}`), 404, "not_found")
          failed(yield* as("GET", `/teams/${created.id}/members`), 404, "not_found")

          // The typed client decodes every answer.
          const client = yield* clientFor(baseUrl, owner.token)
          const orgId = owner.personal.id
          const made = yield* client.teams.create({ params: { orgId }, payload: { name: "Typed" } })
          assert.strictEqual(made.team.slug, "typed")
          const listed = yield* client.teams.list({ params: { orgId }, query: { limit: 1 } })
          assert.deepStrictEqual(listed.data.teams, [made.team])
          assert.isString(listed.cursor)
          const got = yield* client.teams.get({ params: { orgId, teamId: made.team.id } })
          assert.deepStrictEqual(got, made)
          const patched = yield* client.teams.update({
            params: { orgId, teamId: made.team.id },
            payload: { slug: "typed-2" }
          })
          assert.strictEqual(patched.team.slug, "typed-2")
          assert.deepStrictEqual(yield* client.teams.delete({ params: { orgId, teamId: made.team.id } }), {
            deleted: true
          })
          const gone = yield* Effect.flip(client.teams.get({ params: { orgId, teamId: made.team.id } }))
          assert.instanceOf(gone, NotFound)
          const dup = yield* Effect.flip(
            client.teams.create({ params: { orgId }, payload: { name: "x", slug: "ops" } })
          )
          assert.instanceOf(dup, Conflict)
        }))

      it.effect("members: add a user (default) or a service principal, list, remove; 404, 409 and 422", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser
          const orgId = owner.personal.id
          const as = api(owner.token, orgId)
          const team = ok(yield* as("POST", "/teams", { name: "Members" })).team
          const member = yield* newUser
          yield* seedMember(orgId, member.user.id, null)
          const sp = newId("sp_", Date.now())
          yield* seedBinding(orgId, "service_principal", sp, "viewer")

          const added = ok(yield* as("POST", `/teams/${team.id}/members`, { subjectId: member.user.id })).member
          assert.deepStrictEqual(Object.keys(added).sort(), ["createdAt", "status", "subjectId", "subjectType"])
          assert.deepInclude(added, { subjectId: member.user.id, subjectType: "user", status: "active" })
          assert.match(added.createdAt, ISO_MS)
          const spAdded = ok(
            yield* as("POST", `/teams/${team.id}/members`, { subjectId: sp, subjectType: "service_principal" })
          )
          assert.strictEqual(spAdded.member.subjectType, "service_principal")

          failed(yield* as("POST", `/teams/${team.id}/members`, { subjectId: member.user.id }), 409, "conflict")
          const outsider = yield* newUser
          const notMember = failed(
            yield* as("POST", `/teams/${team.id}/members`, { subjectId: outsider.user.id }),
            404,
            "not_found"
          )
          assert.strictEqual(notMember.details.subjectId, outsider.user.id)
          for (
            const [body, field] of [
              [{}, "subjectId"],
              [{ subjectId: "" }, "subjectId"],
              [{ subjectId: member.user.id, subjectType: "robot" }, "subjectType"],
              [{ subjectId: "usr_not_an_id" }, "subjectId"],
              [{ subjectId: member.user.id, subjectType: "service_principal" }, "subjectId"]
            ] as const
          ) {
            const error = failed(yield* as("POST", `/teams/${team.id}/members`, body), 422, "validation_failed")
            assert.deepStrictEqual(Object.keys(error.details.fields), [field], JSON.stringify(body))
          }
          failed(
            yield* as("POST", `/teams/${newId("team_", Date.now())}/members`, { subjectId: member.user.id }),
            404,
            "not_found"
          )

          const listed = ok(yield* as("GET", `/teams/${team.id}/members`)).members
          assert.deepStrictEqual(listed.map((m: any) => m.subjectId), [sp, member.user.id])
          assert.deepStrictEqual(listed[1], added)

          assert.deepStrictEqual(ok(yield* as("DELETE", `/teams/${team.id}/members/${sp}`)), { deleted: true })
          failed(yield* as("DELETE", `/teams/${team.id}/members/${sp}`), 404, "not_found")
          failed(yield* as("DELETE", `/teams/${team.id}/members/not-a-subject`), 404, "not_found")

          const client = yield* clientFor(baseUrl, owner.token)
          const page = yield* client.teams.listMembers({ params: { orgId, teamId: team.id }, query: {} })
          assert.deepStrictEqual(page.data.members.map((m) => m.subjectId), [member.user.id])
          const removed = yield* client.teams.removeMember({
            params: { orgId, teamId: team.id, subjectId: member.user.id }
          })
          assert.deepStrictEqual(removed, { deleted: true })
          const readded = yield* client.teams.addMember({
            params: { orgId, teamId: team.id },
            payload: { subjectId: member.user.id }
          })
          assert.strictEqual(readded.member.subjectType, "user")
        }))

      it.effect("grants: POST and DELETE by tuple (a DELETE with a JSON body), GET lists them; every 4xx", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser
          const root = owner.personal.id
          const as = api(owner.token, root)
          const team = ok(yield* as("POST", "/teams", { name: "Grants" })).team
          const project = yield* createProject(baseUrl, owner.token, root)

          const granted = ok(
            yield* as("POST", "/team-roles", { teamId: team.id, role: "builder", scopeKind: "organization" })
          )
          assert.deepStrictEqual(granted, {
            grant: { teamId: team.id, role: "builder", scopeKind: "organization", scopeRef: null }
          })
          const onProject = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: project }
          assert.deepStrictEqual(ok(yield* as("POST", "/team-roles", onProject)), { grant: onProject })
          const accountWide = { teamId: team.id, role: "billing_admin", scopeKind: "account", scopeRef: null }
          assert.deepStrictEqual(ok(yield* as("POST", "/team-roles", accountWide)), { grant: accountWide })
          failed(
            yield* as("POST", "/team-roles", { teamId: team.id, role: "builder", scopeKind: "organization" }),
            409,
            "conflict"
          )

          const fieldsOf = (res: any) => Object.keys(failed(res, 422, "validation_failed").details.fields).sort()
          const bad = (body: Record<string, unknown>) => as("POST", "/team-roles", { teamId: team.id, ...body })
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "builder", scopeKind: "galaxy" })), ["scopeKind"])
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "emperor", scopeKind: "organization" })), ["role"])
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "project_admin", scopeKind: "project" })), ["scopeRef"])
          assert.include(
            failed(yield* bad({ role: "project_admin", scopeKind: "project" }), 422, "validation_failed").details.fields
              .scopeRef[0],
            "required"
          )
          assert.deepStrictEqual(
            fieldsOf(yield* bad({ role: "viewer", scopeKind: "organization", scopeRef: project })),
            ["scopeRef"]
          )
          assert.deepStrictEqual(
            fieldsOf(yield* bad({ role: "project_admin", scopeKind: "project", scopeRef: "nope" })),
            ["scopeRef"]
          )
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "admin", scopeKind: "project", scopeRef: project })), [
            "role"
          ])
          assert.deepStrictEqual(
            fieldsOf(yield* as("POST", "/team-roles", { teamId: "team_x", role: "admin", scopeKind: "organization" })),
            ["teamId"]
          )
          assert.deepStrictEqual(fieldsOf(yield* as("POST", "/team-roles", {})), ["role", "scopeKind", "teamId"])
          failed(
            yield* as("POST", "/team-roles", {
              teamId: newId("team_", Date.now()),
              role: "viewer",
              scopeKind: "organization"
            }),
            404,
            "not_found"
          )
          // `account` exists only on an account root.
          const child =
            ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: owner.token, body: { name: "Child" } }))
              .organization
          const childTeam = ok(yield* api(owner.token, child.id)("POST", "/teams", { name: "Child team" })).team
          const onChild = failed(
            yield* api(owner.token, child.id)("POST", "/team-roles", {
              teamId: childTeam.id,
              role: "viewer",
              scopeKind: "account"
            }),
            422,
            "validation_failed"
          )
          assert.deepStrictEqual(onChild.details.fields, { scopeKind: ["'account' is valid only on an account root"] })
          // A team of another workspace (even the owner's own child) is not found here.
          failed(
            yield* as("POST", "/team-roles", { teamId: childTeam.id, role: "viewer", scopeKind: "organization" }),
            404,
            "not_found"
          )

          const listed = ok(yield* as("GET", `/team-roles?teamId=${team.id}`)).grants
          assert.deepStrictEqual(listed, [accountWide, onProject, granted.grant])
          assert.deepStrictEqual(ok(yield* as("GET", "/team-roles")).grants, listed)
          failed(yield* as("GET", `/team-roles?teamId=${newId("team_", Date.now())}`), 404, "not_found")

          // Revoke by the same tuple in a DELETE body; the typed router decodes it like a POST body.
          assert.deepStrictEqual(ok(yield* as("DELETE", "/team-roles", onProject)), { deleted: true })
          failed(yield* as("DELETE", "/team-roles", onProject), 404, "not_found")
          // Without a body there is no tuple at all: the body as a whole (`_`) is missing.
          assert.deepStrictEqual(fieldsOf(yield* as("DELETE", "/team-roles")), ["_"])
          assert.deepStrictEqual(
            fieldsOf(
              yield* as("DELETE", "/team-roles", { teamId: team.id, role: "project_viewer", scopeKind: "project" })
            ),
            [
              "scopeRef"
            ]
          )
          failed(yield* as("DELETE", "/team-roles", "{oops"), 400, "bad_request")
          failed(
            yield* call(baseUrl, "DELETE", `/v1/organizations/${root}/team-roles`, {
              token: owner.token,
              body: "x",
              headers: { "content-type": "text/plain" }
            }),
            415,
            "unsupported"
          )

          // The typed client sends the tuple in the DELETE body too.
          const client = yield* clientFor(baseUrl, owner.token)
          const tuple = { teamId: team.id, role: "builder", scopeKind: "organization" } as const
          assert.deepStrictEqual(yield* client.teams.revoke({ params: { orgId: root }, payload: tuple }), {
            deleted: true
          })
          const again = yield* Effect.flip(client.teams.revoke({ params: { orgId: root }, payload: tuple }))
          assert.instanceOf(again, NotFound)
          const regranted = yield* client.teams.grant({
            params: { orgId: root },
            payload: { ...tuple, scopeRef: null }
          })
          assert.deepStrictEqual(Schema.encodeSync(TeamRoleGrant)(regranted.grant), { ...tuple, scopeRef: null })
          const page = yield* client.teams.listGrants({ params: { orgId: root }, query: { teamId: team.id, limit: 1 } })
          assert.lengthOf(page.data.grants, 1)
          assert.isString(page.cursor)
        }))

      it.effect("a project grant's scopeRef must name a project of this workspace; revoking by tuple does not ask", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser
          const root = owner.personal.id
          const as = api(owner.token, root)
          const team = ok(yield* as("POST", "/teams", { name: "Ghosts" })).team
          const child =
            ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: owner.token, body: { name: "Other" } }))
              .organization
          const elsewhere = yield* createProject(baseUrl, owner.token, child.id)

          // Well-formed, but unknown here: never created, or a project of another workspace the caller owns.
          for (const scopeRef of [projectId(), elsewhere]) {
            const tuple = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef }
            const error = failed(yield* as("POST", "/team-roles", tuple), 422, "validation_failed")
            assert.deepStrictEqual(error.details.fields, { scopeRef: ["names no project in this workspace"] }, scopeRef)
            // Revoking such a tuple answers as for any grant the team does not hold.
            failed(yield* as("DELETE", "/team-roles", tuple), 404, "not_found")
          }
          // The other field checks come first and answer as before.
          const wrongRole = failed(
            yield* as("POST", "/team-roles", {
              teamId: team.id,
              role: "admin",
              scopeKind: "project",
              scopeRef: projectId()
            }),
            422,
            "validation_failed"
          )
          assert.deepStrictEqual(Object.keys(wrongRole.details.fields), ["role"])
          assert.deepStrictEqual(ok(yield* as("GET", "/team-roles")).grants, [], "no refused grant was stored")

          // An archived project still exists: it may be granted on, and the grant revoked by its tuple.
          const archived = yield* createProject(baseUrl, owner.token, root)
          ok(yield* as("DELETE", `/projects/${archived}`))
          const onArchived = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: archived }
          assert.deepStrictEqual(ok(yield* as("POST", "/team-roles", onArchived)), { grant: onArchived })
          assert.deepStrictEqual(ok(yield* as("DELETE", "/team-roles", onArchived)), { deleted: true })

          // A grant on a project unknown here (one stored before grants were checked) is still revoked by its tuple.
          const sql = yield* SqlClient.SqlClient
          const ghost = projectId()
          yield* sql`
            insert into team_role_grants (id, team_id, role, scope_kind, scope_ref, created_at)
            values (${randomUUID()}, ${team.id}, 'project_viewer', 'project', ${ghost}, ${new Date()})`.pipe(
            Effect.orDie
          )
          const onGhost = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: ghost }
          assert.deepStrictEqual(ok(yield* as("DELETE", "/team-roles", onGhost)), { deleted: true })
          assert.deepStrictEqual(ok(yield* as("GET", "/team-roles")).grants, [])
        }))

      it.effect("a team's grants reach its members (via team in effective access) and stop with the team", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser
          const root = owner.personal.id
          const child =
            ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: owner.token, body: { name: "Kid" } }))
              .organization
          const as = api(owner.token, root)
          const [member, projectOnly] = [yield* newUser, yield* newUser]
          yield* seedMember(root, member.user.id, null)
          yield* seedMember(root, projectOnly.user.id, null)
          // A membership without any role shows nothing.
          failed(yield* api(member.token, root)("GET", ""), 404, "not_found")

          const builders = ok(yield* as("POST", "/teams", { name: "Builders" })).team
          const viewers = ok(yield* as("POST", "/teams", { name: "Project viewers" })).team
          ok(yield* as("POST", `/teams/${builders.id}/members`, { subjectId: member.user.id }))
          ok(yield* as("POST", `/teams/${viewers.id}/members`, { subjectId: projectOnly.user.id }))
          ok(yield* as("POST", "/team-roles", { teamId: builders.id, role: "builder", scopeKind: "organization" }))
          ok(yield* as("POST", "/team-roles", { teamId: builders.id, role: "billing_admin", scopeKind: "account" }))
          const project = yield* createProject(baseUrl, owner.token, root)
          ok(
            yield* as("POST", "/team-roles", {
              teamId: viewers.id,
              role: "project_viewer",
              scopeKind: "project",
              scopeRef: project
            })
          )

          // Self: the workspace is visible and the team shows as the provenance.
          ok(yield* api(member.token, root)("GET", ""))
          const own = yield* accessOf(member.token, root)
          assert.deepStrictEqual(own.get("project.create"), {
            action: "project.create",
            allow: true,
            via: { kind: "team", role: "builder", scopeKind: "organization", scopeRef: null, teamId: builders.id }
          })
          assert.deepStrictEqual(own.get("billing.manage").via, {
            kind: "team",
            role: "billing_admin",
            scopeKind: "account",
            scopeRef: null,
            teamId: builders.id
          })
          assert.deepStrictEqual(own.get("team.create"), { action: "team.create", allow: false, via: null })
          // The team's permissions are enforced, not just shown: builders read teams but cannot create one.
          ok(yield* api(member.token, root)("GET", "/teams"))
          failed(yield* api(member.token, root)("POST", "/teams", { name: "Nope" }), 403, "forbidden")

          // Roles held on the account root cascade to the child workspace, keeping the team's id.
          const cascaded = yield* accessOf(member.token, child.id)
          assert.deepStrictEqual(cascaded.get("billing.manage").via, {
            kind: "account_cascade",
            role: "billing_admin",
            scopeKind: "account",
            scopeRef: null,
            teamId: builders.id
          })
          assert.strictEqual(cascaded.get("project.create").via.kind, "account_cascade")

          // A project grant applies inside its project only, and never cascades.
          const inProject = yield* accessOf(projectOnly.token, root, `?projectId=${project}`)
          assert.deepStrictEqual(inProject.get("project.read").via, {
            kind: "team",
            role: "project_viewer",
            scopeKind: "project",
            scopeRef: project,
            teamId: viewers.id
          })
          assert.isFalse(inProject.get("project.list").allow, "a workspace permission is not a project one")
          assert.isFalse((yield* accessOf(projectOnly.token, root)).get("project.read").allow)
          assert.isFalse(
            (yield* accessOf(projectOnly.token, root, `?projectId=${projectId()}`)).get("project.read").allow
          )
          failed(yield* api(projectOnly.token, child.id)("GET", "/effective-access"), 404, "not_found")

          // Another subject, as the owner sees it.
          const inspected = yield* accessOf(owner.token, root, `?subjectId=${projectOnly.user.id}&projectId=${project}`)
          assert.strictEqual(inspected.get("project.read").via.teamId, viewers.id)
          const inspectedChild = yield* accessOf(owner.token, child.id, `?subjectId=${member.user.id}`)
          assert.strictEqual(inspectedChild.get("billing.read").via.kind, "account_cascade")

          // Deleting the team ends its grants on the next request: the member sees the workspace no more.
          ok(yield* as("DELETE", `/teams/${builders.id}`))
          failed(yield* api(member.token, root)("GET", ""), 404, "not_found")
          failed(yield* api(member.token, child.id)("GET", ""), 404, "not_found")
          failed(yield* as("GET", `/effective-access?subjectId=${member.user.id}`), 404, "not_found")
          // Leaving the workspace ends what a team gave, even with the team membership still on file.
          const sql = yield* SqlClient.SqlClient
          yield* sql`delete from members where org_id = ${root} and subject_id = ${projectOnly.user.id}`.pipe(
            Effect.orDie
          )
          failed(yield* api(projectOnly.token, root)("GET", `/effective-access?projectId=${project}`), 404, "not_found")
        }))

      it.effect("an admin cannot grant a role stronger than its own; every change lands on the event log", () =>
        Effect.gen(function*() {
          const owner = yield* newUser
          const admin = yield* newUser
          const orgId = owner.personal.id
          yield* seedMember(orgId, admin.user.id, "admin")
          const asAdmin = api(admin.token, orgId)
          const team = ok(yield* asAdmin("POST", "/teams", { name: "Admins" })).team
          ok(yield* asAdmin("POST", `/teams/${team.id}/members`, { subjectId: admin.user.id }))
          const denied = failed(
            yield* asAdmin("POST", "/team-roles", { teamId: team.id, role: "owner", scopeKind: "organization" }),
            403,
            "forbidden"
          )
          assert.deepStrictEqual(denied.details, { reason: "exceeds_caller", role: "owner" })
          ok(yield* asAdmin("POST", "/team-roles", { teamId: team.id, role: "admin", scopeKind: "organization" }))
          ok(yield* asAdmin("PATCH", `/teams/${team.id}`, { name: "Admin team" }))
          ok(yield* asAdmin("DELETE", "/team-roles", { teamId: team.id, role: "admin", scopeKind: "organization" }))
          ok(yield* asAdmin("DELETE", `/teams/${team.id}/members/${admin.user.id}`))
          ok(yield* asAdmin("DELETE", `/teams/${team.id}`))

          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ type: string; actorId: string; subjectId: string; data: any }>`
            select type, actor_id, subject_id, data from events
            where org_id = ${orgId} and type like 'team.%' order by occurred_at, id`.pipe(Effect.orDie)
          assert.deepStrictEqual(rows.map((row) => row.type), [
            "team.created",
            "team.member.added",
            "team.role.granted",
            "team.updated",
            "team.role.revoked",
            "team.member.removed",
            "team.deleted"
          ])
          for (const row of rows) {
            assert.strictEqual(row.actorId, admin.user.id)
            assert.strictEqual(row.subjectId, team.id)
          }
          const data = (type: string) => {
            const raw = rows.find((row) => row.type === type)?.data
            return typeof raw === "string" ? JSON.parse(raw) : raw
          }
          assert.deepStrictEqual(data("team.role.granted"), {
            teamId: team.id,
            role: "admin",
            scopeKind: "organization",
            scopeRef: null
          })
          assert.deepStrictEqual(data("team.member.added"), {
            teamId: team.id,
            subjectType: "user",
            subjectId: admin.user.id
          })
          assert.deepInclude(data("team.updated"), { name: "Admin team", previousName: "Admins" })
        }))

      if (backend === "pglite") {
        it.effect("cpctl teams and cpctl access explain", () =>
          Effect.gen(function*() {
            const { baseUrl } = yield* TestServer
            const owner = yield* newUser
            const member = yield* newUser
            const ws = owner.personal.slug
            yield* seedMember(owner.personal.id, member.user.id, null)
            const run = (token: string, ...args: ReadonlyArray<string>) => cpctl(baseUrl, token, ...args)

            const created = yield* run(owner.token, "teams", "create", "Release Crew", "--workspace", ws, "--json")
            assert.strictEqual(created.exitCode, 0, created.stderr)
            const { team } = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({ team: Team })))(
              created.stdout
            )
            assert.strictEqual(team.slug, "release-crew")

            const listed = yield* run(owner.token, "teams", "list", "-w", ws)
            assert.strictEqual(listed.exitCode, 0, listed.stderr)
            assert.match(listed.stdout, /^ID\s+SLUG\s+NAME\s+STATUS\s+CREATED\n/)
            assert.include(listed.stdout, `${team.id}  release-crew  Release Crew  active`)

            const added = yield* run(owner.token, "teams", "add-member", team.id, member.user.id, "-w", ws)
            assert.strictEqual(added.exitCode, 0, added.stderr)
            assert.include(added.stdout, `${member.user.id}  user`)
            const granted = yield* run(owner.token, "teams", "grant", team.id, "viewer", "-w", ws)
            assert.strictEqual(granted.exitCode, 0, granted.stderr)
            assert.include(granted.stdout, `${team.id}  viewer  organization`)

            const explained = yield* run(member.token, "access", "explain", "-w", ws, "--allowed")
            assert.strictEqual(explained.exitCode, 0, explained.stderr)
            assert.match(explained.stdout, /^ACTION\s+ALLOW\s+VIA\n/)
            assert.match(
              explained.stdout,
              new RegExp(`organization\\.read\\s+yes\\s+team:viewer@organization \\(${team.id}\\)`)
            )
            assert.notInclude(explained.stdout, "team.create")
            const ofMember = yield* run(
              owner.token,
              "access",
              "explain",
              "-w",
              ws,
              "--subject",
              member.user.id,
              "--json"
            )
            const decisions = JSON.parse(ofMember.stdout).permissions as Array<any>
            assert.strictEqual(decisions.find((d) => d.action === "organization.member.list").via.teamId, team.id)

            const revoked = yield* run(owner.token, "teams", "revoke", team.id, "viewer", "-w", ws)
            assert.strictEqual(revoked.exitCode, 0, revoked.stderr)
            const again = yield* run(owner.token, "teams", "revoke", team.id, "viewer", "-w", ws)
            assert.strictEqual(again.exitCode, 1)
            assert.match(again.stderr, /^error not_found: /)
            const deleted = yield* run(owner.token, "teams", "delete", team.id, "-w", ws)
            assert.strictEqual(deleted.exitCode, 0, deleted.stderr)
            const denied = yield* run(member.token, "access", "explain", "-w", ws)
            assert.deepStrictEqual([denied.exitCode, denied.stderr], [1, "error not_found: Workspace not found\n"])
          }))
      }
    }
  )
}
