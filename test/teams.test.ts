/**
 * Teams end to end over real HTTP and the typed client (spec: team resources, Teams endpoints, the effective-access
 * row of Workspaces, Authentication 6; contract §4 Response data shape, team DELETE; §5 team grants): CRUD with slug
 * rules, members, role grants named by their tuple (a DELETE with a JSON body), every error, and the point of it all:
 * a team's grants reach its members with `via.kind: "team"` and stop when the team goes. Runs on PGlite, and on
 * PostgreSQL too when `DATABASE_URL` is set; the `cpctl teams` / `cpctl access explain` commands run on PGlite.
 */
import {
  Conflict,
  NotFound,
  Organization,
  PermissionDecision,
  Team,
  TeamId,
  TeamMember,
  TeamRoleGrant
} from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { decisionByAction } from "./support/access.ts"
import { cpctlAs as cpctl, printedAs, tableRow } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, metaOf, nextCursor, ok, type Res, ULID } from "./support/envelope.ts"
import { seedBinding, seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createApiKey, createProject, setDisplayName, signInWithPersonal } from "./support/session.ts"

const projectId = () => newId("prj_", Date.now())

const teamOf = (res: Res) => ok(res, { team: Team }).team
const teamsOf = (res: Res) => ok(res, { teams: Schema.Array(Team) }).teams
const memberOf = (res: Res) => ok(res, { member: TeamMember }).member
const grantsOf = (res: Res) => ok(res, { grants: Schema.Array(TeamRoleGrant) }).grants
/** The fields a 422 answer names, sorted. */
const fieldsOf = (res: Res) => Object.keys(invalidFields(res)).sort()

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `teams [${backend}]`,
    (it) => {
      /** A fresh user with its `Personal` account root. */
      const newUser = Effect.flatMap(TestServer, ({ baseUrl }) => signInWithPersonal(baseUrl, "team"))

      /** Raw HTTP under one workspace as one caller. */
      const api = (token: string, orgId: string) => (method: string, path: string, body?: unknown) =>
        Effect.flatMap(
          TestServer,
          ({ baseUrl }) =>
            call(baseUrl, method, `/v1/organizations/${orgId}${path}`, body === undefined ? { token } : { token, body })
        )

      /** A fresh user acting in its own `Personal` workspace (the account root). */
      const owner = Effect.map(
        newUser,
        (user) => ({ ...user, root: user.personal.id, as: api(user.token, user.personal.id) })
      )

      /** A child workspace of the caller's account, created over HTTP. */
      const childOf = (token: string, name: string) =>
        Effect.flatMap(
          TestServer,
          ({ baseUrl }) =>
            Effect.map(
              call(baseUrl, "POST", "/v1/organizations", { token, body: { name } }),
              (res) => ok(res, { organization: Organization }).organization
            )
        )

      /** What each permission is allowed through, for a caller (or, as the owner, for `subjectId`). */
      const accessOf = (token: string, orgId: string, query = "") =>
        Effect.map(api(token, orgId)("GET", `/effective-access${query}`), decisionByAction)

      /** An owner with the teams "Platform Team", "platform team" (slug platform-team-2) and "Ops" (slug ops). */
      const withThreeTeams = Effect.gen(function*() {
        const user = yield* owner
        const created = teamOf(yield* user.as("POST", "/teams", { name: "  Platform Team  " }))
        const second = teamOf(yield* user.as("POST", "/teams", { name: "platform team" }))
        const explicit = teamOf(yield* user.as("POST", "/teams", { name: "Ops", slug: "ops" }))
        return { ...user, created, second, explicit }
      })

      it.effect("a created team has the wire shape; its slug derives from the name, -2 on collision", () =>
        Effect.gen(function*() {
          const { created, second } = yield* withThreeTeams
          assert.deepStrictEqual(Object.keys(created).sort(), ["createdAt", "id", "name", "slug", "status"])
          assert.match(created.id, new RegExp(`^team_${ULID}$`))
          assert.match(created.createdAt, ISO_MS)
          assert.deepInclude(created, { name: "Platform Team", slug: "platform-team", status: "active" })
          assert.strictEqual(second.slug, "platform-team-2")
        }))

      it.effect("create: an explicit slug taken in this workspace is 409 on `slug`; another workspace may use it", () =>
        Effect.gen(function*() {
          const { as } = yield* withThreeTeams
          const taken = failed(yield* as("POST", "/teams", { name: "Other", slug: "ops" }), 409, "conflict")
          assert.strictEqual(taken.details["field"], "slug")
          const stranger = yield* owner
          teamOf(yield* stranger.as("POST", "/teams", { name: "Ops", slug: "ops" }))
        }))

      it.effect("create: bad fields are 422 naming each, malformed JSON 400, a text/plain body 415", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, root, token } = yield* owner
          assert.deepStrictEqual(fieldsOf(yield* as("POST", "/teams", { name: " ", slug: "Not A Slug" })), [
            "name",
            "slug"
          ])
          assert.property(invalidFields(yield* as("POST", "/teams", {})), "name")
          failed(yield* as("POST", "/teams", "{not json"), 400, "bad_request")
          failed(
            yield* call(baseUrl, "POST", `/v1/organizations/${root}/teams`, {
              token,
              body: "name=x",
              headers: { "content-type": "text/plain" }
            }),
            415,
            "unsupported"
          )
        }))

      it.effect("teams list newest first, paged by cursor; a bad limit or another workspace's cursor is 422", () =>
        Effect.gen(function*() {
          const { as, explicit } = yield* withThreeTeams
          const all = teamsOf(yield* as("GET", "/teams"))
          assert.deepStrictEqual(all.map((t) => t.slug), ["ops", "platform-team-2", "platform-team"])
          assert.deepStrictEqual(all[0], explicit, "list entries equal the create answer")
          const cursor = nextCursor(yield* as("GET", "/teams?limit=2"))
          const page2 = yield* as("GET", `/teams?limit=2&cursor=${encodeURIComponent(cursor)}`)
          assert.deepStrictEqual(teamsOf(page2).map((t) => t.slug), ["platform-team"])
          assert.isNull(metaOf(page2).cursor)
          assert.property(invalidFields(yield* as("GET", "/teams?limit=0")), "limit")
          const stranger = yield* owner
          const stolen = yield* stranger.as("GET", `/teams?cursor=${encodeURIComponent(cursor)}`)
          assert.property(invalidFields(stolen), "cursor")
        }))

      it.effect("get answers the team, through the alias and a slug reference too; other teams are 404", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, created, personal, token } = yield* withThreeTeams
          assert.deepStrictEqual(ok(yield* as("GET", `/teams/${created.id}`)), { team: created })
          const viaAlias = yield* call(baseUrl, "GET", `/v1/workspaces/${personal.slug}/teams/${created.id}`, { token })
          assert.strictEqual(teamOf(viaAlias).id, created.id)
          for (const id of [newId("team_", Date.now()), "nope", "team_123"]) {
            failed(yield* as("GET", `/teams/${id}`), 404, "not_found")
          }
        }))

      it.effect("another workspace's team is 404 on get, patch and delete", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const stranger = yield* owner
          const foreign = teamOf(yield* stranger.as("POST", "/teams", { name: "Ops", slug: "ops" }))
          failed(yield* as("GET", `/teams/${foreign.id}`), 404, "not_found")
          failed(yield* as("PATCH", `/teams/${foreign.id}`, { name: "Mine now" }), 404, "not_found")
          failed(yield* as("DELETE", `/teams/${foreign.id}`), 404, "not_found")
        }))

      it.effect("patch renames and reslugs, an empty patch changes nothing; a taken slug 409, bad fields 422", () =>
        Effect.gen(function*() {
          const { as, created } = yield* withThreeTeams
          const renamed = teamOf(yield* as("PATCH", `/teams/${created.id}`, { name: "Platform", slug: "platform" }))
          assert.deepStrictEqual(renamed, { ...created, name: "Platform", slug: "platform" })
          assert.deepStrictEqual(teamOf(yield* as("PATCH", `/teams/${created.id}`, {})), renamed)
          failed(yield* as("PATCH", `/teams/${created.id}`, { slug: "ops" }), 409, "conflict")
          assert.deepStrictEqual(fieldsOf(yield* as("PATCH", `/teams/${created.id}`, { slug: "-x", name: "" })), [
            "name",
            "slug"
          ])
        }))

      it.effect("delete answers { deleted: true }; afterwards the team and its members are 404", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const created = teamOf(yield* as("POST", "/teams", { name: "Platform Team" }))
          assert.deepStrictEqual(ok(yield* as("DELETE", `/teams/${created.id}`)), { deleted: true })
          failed(yield* as("GET", `/teams/${created.id}`), 404, "not_found")
          failed(yield* as("DELETE", `/teams/${created.id}`), 404, "not_found")
          failed(yield* as("GET", `/teams/${created.id}/members`), 404, "not_found")
        }))

      it.effect("typed client: create, list, get, update, delete; NotFound once deleted, Conflict on taken slug", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { root: orgId, token } = yield* withThreeTeams
          const client = yield* clientFor(baseUrl, token)
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

      /** An owner's team "Members", a member of the workspace without a role, and a service principal with one. */
      const withTeamAndMembers = Effect.gen(function*() {
        const user = yield* owner
        const team = teamOf(yield* user.as("POST", "/teams", { name: "Members" }))
        const member = yield* newUser
        yield* seedMember(user.root, member.user.id, null)
        const sp = newId("sp_", Date.now())
        yield* seedBinding(user.root, "service_principal", sp, "viewer")
        return { ...user, team, member, sp, members: `/teams/${team.id}/members` }
      })

      it.effect("members: a user is added by default, a service principal when named; the member's wire shape", () =>
        Effect.gen(function*() {
          const { as, member, members, sp } = yield* withTeamAndMembers
          const added = memberOf(yield* as("POST", members, { subjectId: member.user.id }))
          // The spec's fields plus the subject's email and display name (docs/decisions.md).
          assert.deepStrictEqual(
            Object.keys(added).sort(),
            ["createdAt", "displayName", "email", "status", "subjectId", "subjectType"]
          )
          assert.deepInclude(added, { subjectId: member.user.id, subjectType: "user", status: "active" })
          assert.match(added.createdAt, ISO_MS)
          const spAdded = memberOf(yield* as("POST", members, { subjectId: sp, subjectType: "service_principal" }))
          assert.strictEqual(spAdded.subjectType, "service_principal")
        }))

      it.effect("members carry the subject's email and display name: a user's profile, a key's principal", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, member, members, root, token } = yield* withTeamAndMembers
          yield* setDisplayName(baseUrl, member.token, "Mel Member")
          const key = yield* createApiKey(baseUrl, token, root, "ci runner")
          const user = { subjectId: member.user.id, email: member.email, displayName: "Mel Member" }
          const principal = { subjectId: key.servicePrincipal.id, email: null, displayName: "API Key: ci runner" }
          assert.deepInclude(memberOf(yield* as("POST", members, { subjectId: member.user.id })), user)
          assert.deepInclude(
            memberOf(
              yield* as("POST", members, { subjectId: key.servicePrincipal.id, subjectType: "service_principal" })
            ),
            principal
          )
          const listed = ok(yield* as("GET", members), { members: Schema.Array(TeamMember) }).members
          assert.deepStrictEqual(
            listed.map(({ displayName, email, subjectId }) => ({ subjectId, email, displayName })),
            [
              principal,
              user
            ]
          )
        }))

      it.effect("members: a member twice is 409; a workspace outsider 404 naming it; bad bodies 422; no team 404", () =>
        Effect.gen(function*() {
          const { as, member, members } = yield* withTeamAndMembers
          memberOf(yield* as("POST", members, { subjectId: member.user.id }))
          failed(yield* as("POST", members, { subjectId: member.user.id }), 409, "conflict")
          const outsider = yield* newUser
          const notMember = failed(yield* as("POST", members, { subjectId: outsider.user.id }), 404, "not_found")
          assert.strictEqual(notMember.details["subjectId"], outsider.user.id)
          for (
            const [body, field] of [
              [{}, "subjectId"],
              [{ subjectId: "" }, "subjectId"],
              [{ subjectId: member.user.id, subjectType: "robot" }, "subjectType"],
              [{ subjectId: "usr_not_an_id" }, "subjectId"],
              [{ subjectId: member.user.id, subjectType: "service_principal" }, "subjectId"]
            ] as const
          ) {
            assert.deepStrictEqual(
              Object.keys(invalidFields(yield* as("POST", members, body))),
              [field],
              JSON.stringify(body)
            )
          }
          failed(
            yield* as("POST", `/teams/${newId("team_", Date.now())}/members`, { subjectId: member.user.id }),
            404,
            "not_found"
          )
        }))

      it.effect("members list newest first; removing answers { deleted: true }, then 404, as for an unknown one", () =>
        Effect.gen(function*() {
          const { as, member, members, sp } = yield* withTeamAndMembers
          const added = memberOf(yield* as("POST", members, { subjectId: member.user.id }))
          memberOf(yield* as("POST", members, { subjectId: sp, subjectType: "service_principal" }))
          const listed = ok(yield* as("GET", members), { members: Schema.Array(TeamMember) }).members
          assert.deepStrictEqual(listed.map((m) => m.subjectId), [sp, member.user.id])
          assert.deepStrictEqual(listed[1], added)
          assert.deepStrictEqual(ok(yield* as("DELETE", `${members}/${sp}`)), { deleted: true })
          failed(yield* as("DELETE", `${members}/${sp}`), 404, "not_found")
          failed(yield* as("DELETE", `${members}/not-a-subject`), 404, "not_found")
        }))

      it.effect("typed client: list, remove and add team members", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, member, members, root: orgId, team, token } = yield* withTeamAndMembers
          memberOf(yield* as("POST", members, { subjectId: member.user.id }))
          const client = yield* clientFor(baseUrl, token)
          const teamId = TeamId.make(team.id)
          const page = yield* client.teams.listMembers({ params: { orgId, teamId }, query: {} })
          assert.deepStrictEqual(page.data.members.map((m) => m.subjectId), [member.user.id])
          const removed = yield* client.teams.removeMember({
            params: { orgId, teamId, subjectId: member.user.id }
          })
          assert.deepStrictEqual(removed, { deleted: true })
          const readded = yield* client.teams.addMember({
            params: { orgId, teamId },
            payload: { subjectId: member.user.id }
          })
          assert.strictEqual(readded.member.subjectType, "user")
        }))

      /** An owner's team "Grants" and a project of the owner's workspace. */
      const withGrantTeam = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* owner
        const team = teamOf(yield* user.as("POST", "/teams", { name: "Grants" }))
        const project = yield* createProject(baseUrl, user.token, user.root)
        return { ...user, team, project }
      })

      /** The team's grants at organization, project and account scope, granted in that order. */
      const grantThree = Effect.gen(function*() {
        const setup = yield* withGrantTeam
        const { as, project, team } = setup
        const organizationWide = {
          teamId: team.id,
          role: "builder",
          scopeKind: "organization",
          scopeRef: null
        } as const
        const grantAnswer = (res: Res) => ok(res, { grant: TeamRoleGrant })
        const granted = grantAnswer(
          yield* as("POST", "/team-roles", { teamId: team.id, role: "builder", scopeKind: "organization" })
        )
        const onProject = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: project } as const
        const onProjectAnswer = grantAnswer(yield* as("POST", "/team-roles", onProject))
        const accountWide = { teamId: team.id, role: "billing_admin", scopeKind: "account", scopeRef: null } as const
        const accountWideAnswer = grantAnswer(yield* as("POST", "/team-roles", accountWide))
        return { ...setup, granted, onProjectAnswer, accountWideAnswer, organizationWide, onProject, accountWide }
      })

      it.effect("grants: POST answers the tuple at organization, project and account scope; the same again 409", () =>
        Effect.gen(function*() {
          const { accountWide, accountWideAnswer, as, granted, onProject, onProjectAnswer, organizationWide, team } =
            yield* grantThree
          assert.deepStrictEqual(granted, { grant: organizationWide })
          assert.deepStrictEqual(onProjectAnswer, { grant: onProject })
          assert.deepStrictEqual(accountWideAnswer, { grant: accountWide })
          failed(
            yield* as("POST", "/team-roles", { teamId: team.id, role: "builder", scopeKind: "organization" }),
            409,
            "conflict"
          )
        }))

      it.effect("grants: a bad scope, role, scopeRef or teamId is 422 naming that field", () =>
        Effect.gen(function*() {
          const { as, project, team } = yield* withGrantTeam
          const bad = (body: Record<string, unknown>) => as("POST", "/team-roles", { teamId: team.id, ...body })
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "builder", scopeKind: "galaxy" })), ["scopeKind"])
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "emperor", scopeKind: "organization" })), ["role"])
          assert.deepStrictEqual(fieldsOf(yield* bad({ role: "project_admin", scopeKind: "project" })), ["scopeRef"])
          assert.include(
            invalidFields(yield* bad({ role: "project_admin", scopeKind: "project" }))["scopeRef"]?.[0],
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
        }))

      it.effect("grants: an unknown team, or one of another workspace, is 404; `account` only on an account root", () =>
        Effect.gen(function*() {
          const { as, token } = yield* withGrantTeam
          failed(
            yield* as("POST", "/team-roles", {
              teamId: newId("team_", Date.now()),
              role: "viewer",
              scopeKind: "organization"
            }),
            404,
            "not_found"
          )
          const child = yield* childOf(token, "Child")
          const childTeam = teamOf(yield* api(token, child.id)("POST", "/teams", { name: "Child team" }))
          const onChild = invalidFields(
            yield* api(token, child.id)("POST", "/team-roles", {
              teamId: childTeam.id,
              role: "viewer",
              scopeKind: "account"
            })
          )
          assert.deepStrictEqual(onChild, { scopeKind: ["'account' is valid only on an account root"] })
          // A team of another workspace (even the owner's own child) is not found here.
          failed(
            yield* as("POST", "/team-roles", { teamId: childTeam.id, role: "viewer", scopeKind: "organization" }),
            404,
            "not_found"
          )
        }))

      it.effect("grants: GET lists them newest first, for one team or all; an unknown teamId is 404", () =>
        Effect.gen(function*() {
          const { accountWide, as, granted, onProject, team } = yield* grantThree
          const listed = grantsOf(yield* as("GET", `/team-roles?teamId=${team.id}`))
          assert.deepStrictEqual(listed, [accountWide, onProject, granted.grant])
          assert.deepStrictEqual(grantsOf(yield* as("GET", "/team-roles")), listed)
          failed(yield* as("GET", `/team-roles?teamId=${newId("team_", Date.now())}`), 404, "not_found")
        }))

      it.effect("grants: DELETE revokes by the tuple in its JSON body; a missing or partial tuple 422, 400, 415", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, onProject, root, team, token } = yield* grantThree
          // The typed router decodes the DELETE body like a POST body.
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
              token,
              body: "x",
              headers: { "content-type": "text/plain" }
            }),
            415,
            "unsupported"
          )
        }))

      it.effect("typed client: revoke sends the tuple in the DELETE body (NotFound the second time); grant, list", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { root, team, token } = yield* grantThree
          const client = yield* clientFor(baseUrl, token)
          const teamId = TeamId.make(team.id)
          const tuple = { teamId, role: "builder", scopeKind: "organization" } as const
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
          const page = yield* client.teams.listGrants({ params: { orgId: root }, query: { teamId, limit: 1 } })
          assert.lengthOf(page.data.grants, 1)
          assert.isString(page.cursor)
        }))

      it.effect("a project grant's scopeRef names a project of this workspace; revoking by tuple does not ask", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, token } = yield* owner
          const team = teamOf(yield* as("POST", "/teams", { name: "Ghosts" }))
          const child = yield* childOf(token, "Other")
          const elsewhere = yield* createProject(baseUrl, token, child.id)

          // Well-formed, but unknown here: never created, or a project of another workspace the caller owns.
          for (const scopeRef of [projectId(), elsewhere]) {
            const tuple = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef }
            const error = invalidFields(yield* as("POST", "/team-roles", tuple))
            assert.deepStrictEqual(error, { scopeRef: ["names no project in this workspace"] }, scopeRef)
            // Revoking such a tuple answers as for any grant the team does not hold.
            failed(yield* as("DELETE", "/team-roles", tuple), 404, "not_found")
          }
          // The other field checks come first and answer as before.
          const wrongRole = invalidFields(
            yield* as("POST", "/team-roles", {
              teamId: team.id,
              role: "admin",
              scopeKind: "project",
              scopeRef: projectId()
            })
          )
          assert.deepStrictEqual(Object.keys(wrongRole), ["role"])
          assert.deepStrictEqual(grantsOf(yield* as("GET", "/team-roles")), [], "no refused grant was stored")
        }))

      it.effect("an archived project still exists: it may be granted on, and the grant revoked by its tuple", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { as, root, token } = yield* owner
          const team = teamOf(yield* as("POST", "/teams", { name: "Ghosts" }))
          const archived = yield* createProject(baseUrl, token, root)
          ok(yield* as("DELETE", `/projects/${archived}`))
          const onArchived = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: archived }
          assert.deepStrictEqual(ok(yield* as("POST", "/team-roles", onArchived)), { grant: onArchived })
          assert.deepStrictEqual(ok(yield* as("DELETE", "/team-roles", onArchived)), { deleted: true })
        }))

      it.effect("a grant on a project unknown here (stored before grants were checked) is revoked by its tuple", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const team = teamOf(yield* as("POST", "/teams", { name: "Ghosts" }))
          const sql = yield* SqlClient.SqlClient
          const ghost = projectId()
          yield* sql`
            insert into team_role_grants (id, team_id, role, scope_kind, scope_ref, created_at)
            values (${randomUUID()}, ${team.id}, 'project_viewer', 'project', ${ghost}, ${new Date()})`.pipe(
            Effect.orDie
          )
          const onGhost = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: ghost }
          assert.deepStrictEqual(ok(yield* as("DELETE", "/team-roles", onGhost)), { deleted: true })
          assert.deepStrictEqual(grantsOf(yield* as("GET", "/team-roles")), [])
        }))

      it.effect("a membership without any role shows nothing: the workspace is 404", () =>
        Effect.gen(function*() {
          const { root } = yield* owner
          const member = yield* newUser
          yield* seedMember(root, member.user.id, null)
          failed(yield* api(member.token, root)("GET", ""), 404, "not_found")
        }))

      /**
       * An owner's account root with a child workspace; two members without roles of their own: `member` on the
       * team "Builders" (builder on the workspace, billing_admin on the account) and `projectOnly` on "Project
       * viewers" (project_viewer on one project).
       */
      const withTeamGrants = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* owner
        const { as, root } = user
        const child = yield* childOf(user.token, "Kid")
        const [member, projectOnly] = [yield* newUser, yield* newUser]
        yield* seedMember(root, member.user.id, null)
        yield* seedMember(root, projectOnly.user.id, null)
        const builders = teamOf(yield* as("POST", "/teams", { name: "Builders" }))
        const viewers = teamOf(yield* as("POST", "/teams", { name: "Project viewers" }))
        ok(yield* as("POST", `/teams/${builders.id}/members`, { subjectId: member.user.id }))
        ok(yield* as("POST", `/teams/${viewers.id}/members`, { subjectId: projectOnly.user.id }))
        ok(yield* as("POST", "/team-roles", { teamId: builders.id, role: "builder", scopeKind: "organization" }))
        ok(yield* as("POST", "/team-roles", { teamId: builders.id, role: "billing_admin", scopeKind: "account" }))
        const project = yield* createProject(baseUrl, user.token, root)
        ok(
          yield* as("POST", "/team-roles", {
            teamId: viewers.id,
            role: "project_viewer",
            scopeKind: "project",
            scopeRef: project
          })
        )
        return { ...user, child, member, projectOnly, builders, viewers, project }
      })

      it.effect("a team member sees the workspace, with the team as the provenance of each permission", () =>
        Effect.gen(function*() {
          const { builders, member, root } = yield* withTeamGrants
          ok(yield* api(member.token, root)("GET", ""))
          const own = yield* accessOf(member.token, root)
          assert.deepStrictEqual(own("project.create"), {
            action: "project.create",
            allow: true,
            via: { kind: "team", role: "builder", scopeKind: "organization", scopeRef: null, teamId: builders.id }
          })
          assert.deepStrictEqual(own("billing.manage").via, {
            kind: "team",
            role: "billing_admin",
            scopeKind: "account",
            scopeRef: null,
            teamId: builders.id
          })
          assert.deepStrictEqual(own("team.create"), { action: "team.create", allow: false, via: null })
        }))

      it.effect("a team's permissions are enforced, not just shown: builders read teams but cannot create one", () =>
        Effect.gen(function*() {
          const { member, root } = yield* withTeamGrants
          ok(yield* api(member.token, root)("GET", "/teams"))
          failed(yield* api(member.token, root)("POST", "/teams", { name: "Nope" }), 403, "forbidden")
        }))

      it.effect("roles a team holds on the account root cascade to the child workspace, keeping the team's id", () =>
        Effect.gen(function*() {
          const { builders, child, member } = yield* withTeamGrants
          const cascaded = yield* accessOf(member.token, child.id)
          assert.deepStrictEqual(cascaded("billing.manage").via, {
            kind: "account_cascade",
            role: "billing_admin",
            scopeKind: "account",
            scopeRef: null,
            teamId: builders.id
          })
          assert.strictEqual(cascaded("project.create").via?.kind, "account_cascade")
        }))

      it.effect("a team's project grant applies inside its project only, and never cascades", () =>
        Effect.gen(function*() {
          const { child, project, projectOnly, root, viewers } = yield* withTeamGrants
          const inProject = yield* accessOf(projectOnly.token, root, `?projectId=${project}`)
          assert.deepStrictEqual(inProject("project.read").via, {
            kind: "team",
            role: "project_viewer",
            scopeKind: "project",
            scopeRef: project,
            teamId: viewers.id
          })
          assert.isFalse(inProject("project.list").allow, "a workspace permission is not a project one")
          assert.isFalse((yield* accessOf(projectOnly.token, root))("project.read").allow)
          // A project the workspace does not have is refused, not answered for (issue 10 item 11).
          assert.property(
            invalidFields(yield* api(projectOnly.token, root)("GET", `/effective-access?projectId=${projectId()}`)),
            "projectId"
          )
          failed(yield* api(projectOnly.token, child.id)("GET", "/effective-access"), 404, "not_found")
        }))

      it.effect("the owner sees the team provenance of another subject's access", () =>
        Effect.gen(function*() {
          const { child, member, project, projectOnly, root, token, viewers } = yield* withTeamGrants
          const inspected = yield* accessOf(token, root, `?subjectId=${projectOnly.user.id}&projectId=${project}`)
          assert.strictEqual(inspected("project.read").via?.teamId, viewers.id)
          const inspectedChild = yield* accessOf(token, child.id, `?subjectId=${member.user.id}`)
          assert.strictEqual(inspectedChild("billing.read").via?.kind, "account_cascade")
        }))

      it.effect("deleting the team ends its grants on the next request: the member sees the workspace no more", () =>
        Effect.gen(function*() {
          const { as, builders, child, member, root } = yield* withTeamGrants
          ok(yield* as("DELETE", `/teams/${builders.id}`))
          failed(yield* api(member.token, root)("GET", ""), 404, "not_found")
          failed(yield* api(member.token, child.id)("GET", ""), 404, "not_found")
          failed(yield* as("GET", `/effective-access?subjectId=${member.user.id}`), 404, "not_found")
        }))

      it.effect("leaving the workspace ends what a team gave, even with the team membership still on file", () =>
        Effect.gen(function*() {
          const { project, projectOnly, root } = yield* withTeamGrants
          const sql = yield* SqlClient.SqlClient
          yield* sql`delete from members where org_id = ${root} and subject_id = ${projectOnly.user.id}`.pipe(
            Effect.orDie
          )
          failed(yield* api(projectOnly.token, root)("GET", `/effective-access?projectId=${project}`), 404, "not_found")
        }))

      /** An owner's workspace with an admin, who creates the team "Admins" and joins it. */
      const withAdminTeam = Effect.gen(function*() {
        const { root } = yield* owner
        const admin = yield* newUser
        yield* seedMember(root, admin.user.id, "admin")
        const asAdmin = api(admin.token, root)
        const team = teamOf(yield* asAdmin("POST", "/teams", { name: "Admins" }))
        ok(yield* asAdmin("POST", `/teams/${team.id}/members`, { subjectId: admin.user.id }))
        return { root, admin, asAdmin, team }
      })

      it.effect("an admin cannot grant a team a role stronger than its own: 403 exceeds_caller", () =>
        Effect.gen(function*() {
          const { asAdmin, team } = yield* withAdminTeam
          const denied = failed(
            yield* asAdmin("POST", "/team-roles", { teamId: team.id, role: "owner", scopeKind: "organization" }),
            403,
            "forbidden"
          )
          assert.deepStrictEqual(denied.details, { reason: "exceeds_caller", role: "owner" })
        }))

      it.effect("every team change lands on the event log, with the actor, the team and what changed", () =>
        Effect.gen(function*() {
          const { admin, asAdmin, root, team } = yield* withAdminTeam
          ok(yield* asAdmin("POST", "/team-roles", { teamId: team.id, role: "admin", scopeKind: "organization" }))
          ok(yield* asAdmin("PATCH", `/teams/${team.id}`, { name: "Admin team" }))
          ok(yield* asAdmin("DELETE", "/team-roles", { teamId: team.id, role: "admin", scopeKind: "organization" }))
          ok(yield* asAdmin("DELETE", `/teams/${team.id}/members/${admin.user.id}`))
          ok(yield* asAdmin("DELETE", `/teams/${team.id}`))

          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ type: string; actorId: string; subjectId: string; data: unknown }>`
            select type, actor_id, subject_id, data from events
            where org_id = ${root} and type like 'team.%' order by occurred_at, id`.pipe(Effect.orDie)
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
          const data = (type: string): unknown => {
            const raw = rows.find((row) => row.type === type)?.data
            return typeof raw === "string" ? JSON.parse(raw) : raw
          }
          // webhooks.md §1: the team as the API returns it, plus what the event adds; `previous` on updates.
          const field = (raw: unknown, key: string): unknown =>
            typeof raw === "object" && raw !== null && key in raw
              ? Object.entries(raw).find(([k]) => k === key)?.[1]
              : undefined
          assert.deepInclude(field(data("team.role.granted"), "team"), { id: team.id, status: "active" })
          assert.deepInclude(data("team.role.granted"), {
            roleGrant: { teamId: team.id, role: "admin", scopeKind: "organization", scopeRef: null }
          })
          assert.deepInclude(field(data("team.member.added"), "member"), {
            subjectId: admin.user.id,
            subjectType: "user",
            status: "active"
          })
          assert.deepInclude(field(data("team.updated"), "team"), { name: "Admin team" })
          assert.deepInclude(data("team.updated"), { previous: { name: "Admins" } })
        }))

      if (backend === "pglite") {
        it.effect("cpctl teams create, list, add-member, grant, revoke (not_found the second time) and delete", () =>
          Effect.gen(function*() {
            const { baseUrl } = yield* TestServer
            const { personal, root, token } = yield* owner
            const member = yield* newUser
            const ws = personal.slug
            yield* seedMember(root, member.user.id, null)
            const run = (...args: ReadonlyArray<string>) => cpctl(baseUrl, token, ...args)

            const created = yield* run("teams", "create", "Release Crew", "--workspace", ws, "--json")
            assert.strictEqual(created.exitCode, 0, created.stderr)
            const team = Schema.decodeUnknownSync(Schema.fromJsonString(Team))(created.stdout)
            assert.strictEqual(team.slug, "release-crew")

            const listed = yield* run("teams", "list", "-w", ws)
            assert.strictEqual(listed.exitCode, 0, listed.stderr)
            assert.match(listed.stdout, /^ID\s+SLUG\s+NAME\s+STATUS\s+CREATED\n/)
            assert.include(listed.stdout, `${team.id}  release-crew  Release Crew  active`)

            yield* setDisplayName(baseUrl, member.token, "Rel Member")
            const added = yield* run("teams", "add-member", team.id, member.user.id, "-w", ws)
            assert.strictEqual(added.exitCode, 0, added.stderr)
            assert.match(added.stdout, /^SUBJECT\s+EMAIL\s+NAME\s+TYPE\s+STATUS\s+ADDED\n/)
            const row = [member.user.id, member.email, "Rel Member", "user", "active"]
            assert.deepStrictEqual(tableRow(added.stdout, member.user.id).slice(0, 5), row)
            const teamMembers = yield* run("teams", "members", "release-crew", "-w", ws)
            assert.strictEqual(teamMembers.exitCode, 0, teamMembers.stderr)
            assert.deepStrictEqual(tableRow(teamMembers.stdout, member.user.id).slice(0, 5), row)
            const granted = yield* run("teams", "grant", team.id, "viewer", "-w", ws)
            assert.strictEqual(granted.exitCode, 0, granted.stderr)
            assert.include(granted.stdout, `${team.id}  viewer  organization`)
            const grants = yield* run("teams", "grants", "-w", ws)
            assert.include(grants.stdout, "release-crew  viewer  organization")

            const revoked = yield* run("teams", "revoke", "release-crew", "viewer", "-w", ws, "--yes")
            assert.strictEqual(revoked.exitCode, 0, revoked.stderr)
            const again = yield* run("teams", "revoke", team.id, "viewer", "-w", ws, "--yes")
            assert.strictEqual(again.exitCode, 1)
            assert.match(again.stderr, /^error not_found: /)
            const deleted = yield* run("teams", "delete", team.id, "-w", ws, "--yes")
            assert.strictEqual(deleted.exitCode, 0, deleted.stderr)
          }))

        it.effect("cpctl access explain: the caller's allowed actions, a subject's as JSON; 404 when teamless", () =>
          Effect.gen(function*() {
            const { baseUrl } = yield* TestServer
            const { as, personal, root, token } = yield* owner
            const member = yield* newUser
            const ws = personal.slug
            yield* seedMember(root, member.user.id, null)
            const team = teamOf(yield* as("POST", "/teams", { name: "Release Crew" }))
            memberOf(yield* as("POST", `/teams/${team.id}/members`, { subjectId: member.user.id }))
            ok(yield* as("POST", "/team-roles", { teamId: team.id, role: "viewer", scopeKind: "organization" }))

            const explained = yield* cpctl(baseUrl, member.token, "access", "explain", "-w", ws, "--allowed")
            assert.strictEqual(explained.exitCode, 0, explained.stderr)
            assert.match(explained.stdout, /^ACTION\s+ALLOW\s+VIA\n/)
            assert.match(
              explained.stdout,
              new RegExp(`organization\\.read\\s+yes\\s+team:viewer@organization \\(${team.id}\\)`)
            )
            assert.notInclude(explained.stdout, "team.create")
            const ofMember = yield* cpctl(
              baseUrl,
              token,
              "access",
              "explain",
              "-w",
              ws,
              "--subject",
              member.user.id,
              "--json"
            )
            const decisions = printedAs(ofMember, Schema.Array(PermissionDecision))
            assert.strictEqual(decisions.find((d) => d.action === "organization.member.list")?.via?.teamId, team.id)

            ok(yield* as("DELETE", `/teams/${team.id}`))
            const denied = yield* cpctl(baseUrl, member.token, "access", "explain", "-w", ws)
            assert.deepStrictEqual([denied.exitCode, denied.stderr], [1, "error not_found: Workspace not found\n"])
          }))
      }
    }
  )
}
