/**
 * The teams service on memory repositories under `TestClock`, with the edge's own workspace resolver: CRUD and slug
 * derivation, the grant tuple rules, the owner rule, who may join a team, and above all that a team's grants reach
 * its members (`via.kind: "team"`, cascading from an account root, a project grant only in its project) and stop with
 * the team. The layer graph is the server's own (`app.ts`) minus HTTP.
 */
import { type Actor, type ErrorDetails, type PermissionDecision, ProjectId, type TeamId } from "@cp/domain"
import { EventLogRepo, RoleBindingsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { newId } from "../../src/platform/ids.ts"
import { decide, effectiveAccess } from "../../src/platform/rbac.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { TeamsService } from "../../src/teams/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesLayer, seedMembership, seedProject, userActor } from "../support/services.ts"

const TestLayer = TeamsService.layer.pipe(Layer.provideMerge(areaServicesLayer))

/** The workspace as the edge resolves it for `actor`; fails the test when the actor cannot see it. */
const resolve = (ref: string, actor: Actor) =>
  Effect.flatMap(WorkspaceResolver, (resolver) => resolver.resolve(ref, actor)).pipe(Effect.map(Option.getOrThrow))

/** What the edge would show `actor` for one permission on the workspace (or a project in it). */
const decisionFor = (ref: string, actor: Actor, permission: PermissionDecision["action"], projectId?: string) =>
  Effect.map(
    Effect.flatMap(WorkspaceResolver, (resolver) => resolver.resolve(ref, actor)),
    Option.match({
      onNone: () => ({ action: permission, allow: false, via: null, visible: false }),
      onSome: (workspace) => ({ ...decide(workspace.grants, permission, projectId), visible: true })
    })
  )

/** A fresh owner with a fresh account root (its `Personal`-like first workspace). */
const newOwner = Effect.gen(function*() {
  const actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: `Root ${actor.userId.slice(-6)}` })
  return { actor, orgId: organization.id }
})

const flipCode = <A, E extends { readonly error: { readonly code: string; readonly details: ErrorDetails } }, R>(
  self: Effect.Effect<A, E, R>
) => Effect.map(Effect.flip(self), (error) => error.error)

describe("TeamsService", () => {
  it.effect("create derives a slug unique in the workspace; an explicit taken slug is 409; list pages newest first", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, orgId } = yield* newOwner
      const workspace = yield* resolve(orgId, actor)
      const first = (yield* teams.create(actor, workspace, { name: "  Platform Team  " })).team
      assert.deepStrictEqual(first, {
        id: first.id,
        name: "Platform Team",
        slug: "platform-team",
        status: "active",
        createdAt: new Date(0)
      })
      yield* TestClock.adjust(1000)
      const second = (yield* teams.create(actor, workspace, { name: "platform team" })).team
      assert.strictEqual(second.slug, "platform-team-2")
      assert.strictEqual(second.createdAt.getTime(), 1000)
      const fallback = (yield* teams.create(actor, workspace, { name: "!!!" })).team
      assert.strictEqual(fallback.slug, "team")
      const conflict = yield* flipCode(teams.create(actor, workspace, { name: "Again", slug: "platform-team" }))
      assert.strictEqual(conflict.code, "conflict")

      // Another workspace has its own slugs.
      const other = yield* newOwner
      const elsewhere = yield* teams.create(other.actor, yield* resolve(other.orgId, other.actor), {
        name: "Platform Team"
      })
      assert.strictEqual(elsewhere.team.slug, "platform-team")

      const page1 = yield* teams.list(workspace, { limit: 2 })
      assert.deepStrictEqual(page1.data.teams.map((team) => team.id), [fallback.id, second.id])
      assert.isString(page1.cursor)
      const page2 = yield* teams.list(workspace, { limit: 2, cursor: page1.cursor ?? "" })
      assert.deepStrictEqual(page2.data.teams.map((team) => team.id), [first.id])
      assert.isNull(page2.cursor)
      // A cursor of this list is not one of another workspace's.
      const misuse = yield* flipCode(
        teams.list(yield* resolve(other.orgId, other.actor), { cursor: page1.cursor ?? "" })
      )
      assert.strictEqual(misuse.code, "validation_failed")

      const events = yield* (yield* EventLogRepo).listEvents({ orgId })
      const created = events.filter((event) => event.type === "team.created")
      assert.lengthOf(created, 3)
      assert.deepStrictEqual(created.find((event) => event.subjectId === first.id)?.data, {
        teamId: first.id,
        name: "Platform Team",
        slug: "platform-team"
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("get, update and delete stay inside their workspace; a deleted team is 404 and its slug is free", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, orgId } = yield* newOwner
      const workspace = yield* resolve(orgId, actor)
      const team = (yield* teams.create(actor, workspace, { name: "Core" })).team
      yield* teams.create(actor, workspace, { name: "Edge" })
      const other = yield* newOwner
      const otherWorkspace = yield* resolve(other.orgId, other.actor)
      assert.strictEqual((yield* flipCode(teams.get(otherWorkspace, team.id))).code, "not_found")
      assert.strictEqual(
        (yield* flipCode(teams.update(other.actor, otherWorkspace, team.id, { name: "x" }))).code,
        "not_found"
      )
      assert.strictEqual((yield* flipCode(teams.delete(other.actor, otherWorkspace, team.id))).code, "not_found")

      const renamed =
        (yield* teams.update(actor, workspace, team.id, { name: "Core Platform", slug: "core-platform" })).team
      assert.deepStrictEqual(renamed, { ...team, name: "Core Platform", slug: "core-platform" })
      assert.deepStrictEqual(
        (yield* teams.update(actor, workspace, team.id, {})).team,
        renamed,
        "an empty patch changes nothing"
      )
      assert.strictEqual((yield* flipCode(teams.update(actor, workspace, team.id, { slug: "edge" }))).code, "conflict")
      assert.deepStrictEqual((yield* teams.get(workspace, team.id)).team, renamed)

      assert.deepStrictEqual(yield* teams.delete(actor, workspace, team.id), { deleted: true })
      assert.strictEqual((yield* flipCode(teams.get(workspace, team.id))).code, "not_found")
      assert.strictEqual((yield* flipCode(teams.delete(actor, workspace, team.id))).code, "not_found")
      assert.strictEqual(
        (yield* teams.create(actor, workspace, { name: "x", slug: "core-platform" })).team.slug,
        "core-platform"
      )
      const types = (yield* (yield* EventLogRepo).listEvents({ orgId })).map((event) => event.type).filter((t) =>
        t.startsWith("team.")
      )
      assert.deepStrictEqual([...types].sort(), [
        "team.created",
        "team.created",
        "team.created",
        "team.deleted",
        "team.updated"
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a team's grants reach every member with via team, and stop when the team is deleted", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor: owner, orgId } = yield* newOwner
      const workspace = yield* resolve(orgId, owner)
      const [alice, bob] = [userActor(), userActor()]
      yield* seedMembership(orgId, alice, "viewer")
      yield* seedMembership(orgId, bob, undefined) // a member with no role of its own: the team is all it has
      assert.isFalse((yield* decisionFor(orgId, bob, "organization.read")).visible)

      const team = (yield* teams.create(owner, workspace, { name: "Builders" })).team
      for (const member of [alice, bob]) yield* teams.addMember(owner, workspace, team.id, { subjectId: member.userId })
      const grant = yield* teams.grant(owner, workspace, {
        teamId: team.id,
        role: "builder",
        scopeKind: "organization"
      })
      assert.deepStrictEqual(grant, {
        grant: { teamId: team.id, role: "builder", scopeKind: "organization", scopeRef: null }
      })

      const teamVia = {
        kind: "team",
        role: "builder",
        scopeKind: "organization",
        scopeRef: null,
        teamId: team.id
      } as const
      const aliceCreate = yield* decisionFor(orgId, alice, "project.create")
      assert.deepStrictEqual(aliceCreate.via, teamVia)
      // A direct grant outranks the team's for a permission both give.
      assert.strictEqual((yield* decisionFor(orgId, alice, "organization.read")).via?.kind, "direct")
      const bobRead = yield* decisionFor(orgId, bob, "organization.read")
      assert.isTrue(bobRead.visible)
      assert.deepStrictEqual(bobRead.via, teamVia)
      assert.isFalse((yield* decisionFor(orgId, bob, "team.create")).allow)

      yield* teams.delete(owner, workspace, team.id)
      assert.isFalse((yield* decisionFor(orgId, alice, "project.create")).allow)
      assert.isFalse((yield* decisionFor(orgId, bob, "organization.read")).visible, "bob sees the workspace no more")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("account and workspace grants on an account root cascade to children; a project grant stays in its project", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const workspaces = yield* WorkspacesService
      const { actor: owner, orgId: rootId } = yield* newOwner
      const child = (yield* workspaces.create(owner, { name: "Child" })).organization
      const root = yield* resolve(rootId, owner)
      const member = userActor()
      yield* seedMembership(rootId, member, undefined)
      const team = (yield* teams.create(owner, root, { name: "Finance" })).team
      yield* teams.addMember(owner, root, team.id, { subjectId: member.userId })
      yield* teams.grant(owner, root, { teamId: team.id, role: "billing_admin", scopeKind: "account" })
      const project = yield* seedProject(rootId)
      yield* teams.grant(owner, root, {
        teamId: team.id,
        role: "project_viewer",
        scopeKind: "project",
        scopeRef: project
      })

      const onRoot = yield* decisionFor(rootId, member, "billing.manage")
      assert.deepStrictEqual(onRoot.via, {
        kind: "team",
        role: "billing_admin",
        scopeKind: "account",
        scopeRef: null,
        teamId: team.id
      })
      const onChild = yield* decisionFor(child.id, member, "billing.manage")
      assert.deepStrictEqual(onChild.via, {
        kind: "account_cascade",
        role: "billing_admin",
        scopeKind: "account",
        scopeRef: null,
        teamId: team.id
      })
      // The project grant: in its project on the root only, never elsewhere, never cascaded.
      assert.isTrue((yield* decisionFor(rootId, member, "project.read", project)).allow)
      assert.strictEqual((yield* decisionFor(rootId, member, "project.read", project)).via?.kind, "team")
      assert.isFalse((yield* decisionFor(rootId, member, "project.read")).allow)
      assert.isFalse((yield* decisionFor(rootId, member, "project.read", ProjectId.make(newId("prj_", 0)))).allow)
      assert.isFalse((yield* decisionFor(child.id, member, "project.read", project)).allow)

      // Effective access for another subject shows the same provenance.
      const { permissions } = yield* workspaces.effectiveAccess(owner, yield* resolve(child.id, owner), {
        subjectId: member.userId
      })
      const billing = permissions.find((decision) => decision.action === "billing.read")
      assert.strictEqual(billing?.via?.kind, "account_cascade")
      assert.strictEqual(billing?.via?.teamId, team.id)
      assert.deepStrictEqual(
        effectiveAccess((yield* resolve(child.id, member)).grants).filter((d) => d.allow).map((d) => d.action).sort(),
        ["billing.manage", "billing.read", "organization.metering.read", "organization.read"]
      )
    }).pipe(Effect.provide(TestLayer)))

  it.effect("grant tuples: scopeRef exactly for projects and of this workspace, project roles only on projects, account only on a root", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const workspaces = yield* WorkspacesService
      const { actor, orgId } = yield* newOwner
      const childId = (yield* workspaces.create(actor, { name: "Child" })).organization.id
      const [root, child] = [yield* resolve(orgId, actor), yield* resolve(childId, actor)]
      const team = (yield* teams.create(actor, child, { name: "T" })).team
      const project = yield* seedProject(childId)
      const fieldsOf = (workspace: typeof root, tuple: Parameters<TeamsService["Service"]["grant"]>[2]) =>
        Effect.map(flipCode(teams.grant(actor, workspace, tuple)), (error) => {
          assert.strictEqual(error.code, "validation_failed")
          return error.details["fields"] as Record<string, ReadonlyArray<string>>
        })
      assert.deepStrictEqual(yield* fieldsOf(child, { teamId: team.id, role: "project_admin", scopeKind: "project" }), {
        scopeRef: ["is required when scopeKind is 'project'"]
      })
      assert.deepStrictEqual(
        yield* fieldsOf(child, { teamId: team.id, role: "viewer", scopeKind: "organization", scopeRef: project }),
        { scopeRef: ["must be absent unless scopeKind is 'project'"] }
      )
      assert.deepStrictEqual(
        Object.keys(
          yield* fieldsOf(child, { teamId: team.id, role: "admin", scopeKind: "project", scopeRef: project })
        ),
        ["role"]
      )
      assert.deepStrictEqual(
        Object.keys(yield* fieldsOf(child, { teamId: team.id, role: "project_viewer", scopeKind: "account" })).sort(),
        ["role", "scopeKind"]
      )
      assert.deepStrictEqual(yield* fieldsOf(child, { teamId: team.id, role: "viewer", scopeKind: "account" }), {
        scopeKind: ["'account' is valid only on an account root"]
      })
      // A well-formed scopeRef must name a project of this workspace to be granted on (never one of another workspace);
      // revoking by tuple does not ask, so a tuple the team does not hold is the usual 404.
      for (const scopeRef of [ProjectId.make(newId("prj_", 0)), yield* seedProject(orgId)]) {
        const tuple = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef } as const
        assert.deepStrictEqual(yield* fieldsOf(child, tuple), { scopeRef: ["names no project in this workspace"] })
        assert.strictEqual((yield* flipCode(teams.revoke(actor, child, tuple))).code, "not_found")
      }
      // A team of another workspace is not found, even by an owner.
      const rootTeam = (yield* teams.create(actor, root, { name: "R" })).team
      const notHere = yield* flipCode(
        teams.grant(actor, child, { teamId: rootTeam.id, role: "viewer", scopeKind: "organization" })
      )
      assert.strictEqual(notHere.code, "not_found")

      // Valid tuples; the same twice is 409; revoke by tuple (scopeRef null or absent alike), then 404.
      yield* teams.grant(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization", scopeRef: null })
      yield* teams.grant(actor, child, {
        teamId: team.id,
        role: "project_admin",
        scopeKind: "project",
        scopeRef: project
      })
      const again = yield* flipCode(
        teams.grant(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization" })
      )
      assert.strictEqual(again.code, "conflict")
      const listed = yield* teams.listGrants(child, { teamId: team.id })
      assert.deepStrictEqual(listed.data.grants.map((g) => `${g.role}:${g.scopeRef}`), [
        `project_admin:${project}`,
        "viewer:null"
      ])
      assert.deepStrictEqual(
        yield* teams.revoke(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization" }),
        {
          deleted: true
        }
      )
      const gone = yield* flipCode(
        teams.revoke(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization" })
      )
      assert.strictEqual(gone.code, "not_found")
      yield* teams.revoke(actor, child, {
        teamId: team.id,
        role: "project_admin",
        scopeKind: "project",
        scopeRef: project
      })
      assert.deepStrictEqual((yield* teams.listGrants(child, {})).data.grants, [])
      const types = (yield* (yield* EventLogRepo).listEvents({ orgId: childId })).map((event) => event.type)
      assert.deepStrictEqual(types.filter((type) => type.startsWith("team.role.")).sort(), [
        "team.role.granted",
        "team.role.granted",
        "team.role.revoked",
        "team.role.revoked"
      ])
      // An archived project still exists: it may be granted on.
      const archived = yield* seedProject(childId, "archived")
      const onArchived = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: archived } as const
      assert.deepStrictEqual(yield* teams.grant(actor, child, onArchived), { grant: onArchived })
      yield* teams.revoke(actor, child, onArchived)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("nobody hands out through a team more than it holds: an admin cannot make owners or billing admins", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor: owner, orgId } = yield* newOwner
      const admin = userActor()
      const member = userActor()
      yield* seedMembership(orgId, admin, "admin")
      yield* seedMembership(orgId, member, "viewer")
      const [asOwner, asAdmin] = [yield* resolve(orgId, owner), yield* resolve(orgId, admin)]
      const team = (yield* teams.create(admin, asAdmin, { name: "Admins" })).team
      yield* teams.addMember(admin, asAdmin, team.id, { subjectId: admin.userId })
      const ownerTuple = { teamId: team.id, role: "owner", scopeKind: "organization" } as const
      const denied = yield* flipCode(teams.grant(admin, asAdmin, ownerTuple))
      assert.deepStrictEqual([denied.code, denied.details], ["forbidden", { reason: "exceeds_caller", role: "owner" }])
      // billing_admin holds billing.manage, which an admin does not.
      const billing = yield* flipCode(
        teams.grant(admin, asAdmin, { teamId: team.id, role: "billing_admin", scopeKind: "organization" })
      )
      assert.deepStrictEqual(billing.details, { reason: "exceeds_caller", role: "billing_admin" })
      assert.isFalse(
        (yield* decisionFor(orgId, admin, "billing.manage")).allow,
        "the admin did not become an owner through the team"
      )
      // Roles within the admin's own reach are its to grant, on projects too.
      yield* teams.grant(admin, asAdmin, { teamId: team.id, role: "admin", scopeKind: "organization" })
      yield* teams.grant(admin, asAdmin, {
        teamId: team.id,
        role: "project_admin",
        scopeKind: "project",
        scopeRef: yield* seedProject(orgId)
      })

      yield* teams.grant(owner, asOwner, ownerTuple)
      assert.strictEqual((yield* decisionFor(orgId, admin, "billing.manage")).via?.kind, "team")
      // The team now makes owners: another admin may not change who is in it, nor delete it, nor revoke the grant.
      const plainAdmin = userActor()
      yield* seedMembership(orgId, plainAdmin, "admin")
      const asPlainAdmin = yield* resolve(orgId, plainAdmin)
      for (
        const attempt of [
          Effect.asVoid(teams.addMember(plainAdmin, asPlainAdmin, team.id, { subjectId: member.userId })),
          Effect.asVoid(teams.removeMember(plainAdmin, asPlainAdmin, team.id, admin.userId)),
          Effect.asVoid(teams.delete(plainAdmin, asPlainAdmin, team.id)),
          Effect.asVoid(teams.revoke(plainAdmin, asPlainAdmin, ownerTuple))
        ]
      ) {
        assert.strictEqual((yield* flipCode(attempt)).code, "forbidden")
      }
      // Renaming it is fine.
      yield* teams.update(plainAdmin, asPlainAdmin, team.id, { name: "Owners" })
      yield* teams.revoke(owner, asOwner, ownerTuple)
      yield* teams.delete(plainAdmin, asPlainAdmin, team.id)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("who may join: members of the workspace, by the right kind of id, once; not a project-scoped key", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const bindings = yield* RoleBindingsRepo
      const { actor: owner, orgId } = yield* newOwner
      const workspace = yield* resolve(orgId, owner)
      const team = (yield* teams.create(owner, workspace, { name: "T" })).team
      const add = (subjectId: string, subjectType?: "user" | "service_principal") =>
        teams.addMember(
          owner,
          workspace,
          team.id,
          subjectType === undefined ? { subjectId } : { subjectId, subjectType }
        )

      const member = userActor()
      yield* seedMembership(orgId, member, undefined)
      yield* TestClock.adjust(5)
      const added = yield* add(member.userId)
      assert.deepStrictEqual(added, {
        member: { subjectId: member.userId, subjectType: "user", status: "active", createdAt: new Date(5) }
      })
      assert.strictEqual((yield* flipCode(add(member.userId))).code, "conflict")
      assert.strictEqual((yield* flipCode(add(userActor().userId))).code, "not_found", "not a member of the workspace")
      const other = yield* newOwner
      assert.strictEqual((yield* flipCode(add(other.actor.userId))).code, "not_found", "a member of another workspace")
      for (const [subjectId, subjectType] of [["usr_nope", undefined], [member.userId, "service_principal"]] as const) {
        const error = yield* flipCode(add(subjectId, subjectType))
        assert.deepStrictEqual([error.code, Object.keys(error.details["fields"] as object)], ["validation_failed", [
          "subjectId"
        ]])
      }

      const sp = newId("sp_", 0)
      const spBinding = (scopeKind: "organization" | "project", subjectId: string) =>
        bindings.insert({
          id: crypto.randomUUID(),
          orgId,
          subjectType: "service_principal",
          subjectId,
          role: scopeKind === "project" ? "project_viewer" : "builder",
          scopeKind,
          scopeRef: scopeKind === "project" ? newId("prj_", 0) : null,
          createdAt: new Date(0)
        }).pipe(Effect.orDie)
      assert.strictEqual((yield* flipCode(add(sp, "service_principal"))).code, "not_found")
      yield* spBinding("organization", sp)
      yield* TestClock.adjust(5)
      assert.strictEqual((yield* add(sp, "service_principal")).member.subjectType, "service_principal")
      const projectKey = newId("sp_", 0)
      yield* spBinding("project", projectKey)
      assert.strictEqual((yield* flipCode(add(projectKey, "service_principal"))).code, "validation_failed")

      const members = yield* teams.listMembers(workspace, team.id, { limit: 1 })
      assert.deepStrictEqual(members.data.members.map((m) => m.subjectId), [sp])
      const rest = yield* teams.listMembers(workspace, team.id, { cursor: members.cursor ?? "" })
      assert.deepStrictEqual(rest.data.members.map((m) => m.subjectId), [member.userId])

      assert.deepStrictEqual(yield* teams.removeMember(owner, workspace, team.id, sp), { deleted: true })
      for (const subjectId of [sp, "garbage", userActor().userId]) {
        assert.strictEqual(
          (yield* flipCode(teams.removeMember(owner, workspace, team.id, subjectId))).code,
          "not_found"
        )
      }
      const missing = newId("team_", 0) as TeamId
      assert.strictEqual((yield* flipCode(teams.listMembers(workspace, missing, {}))).code, "not_found")
      assert.strictEqual(
        (yield* flipCode(teams.addMember(owner, workspace, missing, { subjectId: member.userId }))).code,
        "not_found"
      )
    }).pipe(Effect.provide(TestLayer)))
})
