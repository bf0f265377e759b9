/**
 * The teams service on memory repositories under `TestClock`, with the edge's own workspace resolver: CRUD and slug
 * derivation, the grant tuple rules, the owner rule, who may join a team, and above all that a team's grants reach
 * its members (`via.kind: "team"`, cascading from an account root, a project grant only in its project) and stop with
 * the team. The layer graph is the server's own (`app.ts`) minus HTTP.
 */
import {
  type Actor,
  Conflict,
  Forbidden,
  NotFound,
  type OrgId,
  type PermissionDecision,
  type TeamRoleTuple,
  ValidationFailed
} from "@cp/domain"
import { EventLogRepo, RoleBindingsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { mint } from "../../src/platform/ids.ts"
import { decide, effectiveAccess } from "../../src/platform/rbac.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { TeamsService } from "../../src/teams/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { fieldsOf } from "../support/errors.ts"
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

/** A fresh owner with a fresh account root (its `Personal`-like first workspace), as the edge resolves it. */
const newOwner = Effect.gen(function*() {
  const actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: `Root ${actor.userId.slice(-6)}` })
  return { actor, orgId: organization.id, workspace: yield* resolve(organization.id, actor) }
})

/** A fresh owner's workspace with one team, `Core`. */
const withTeam = Effect.gen(function*() {
  const owner = yield* newOwner
  const team = (yield* (yield* TeamsService).create(owner.actor, owner.workspace, { name: "Core" })).team
  return { ...owner, team }
})

/** The types of the team events recorded on a workspace, sorted. */
const teamEventTypes = (orgId: OrgId, prefix = "team.") =>
  Effect.map(
    Effect.flatMap(EventLogRepo, (log) => log.listEvents({ orgId })),
    (events) => events.map((event) => event.type).filter((type) => type.startsWith(prefix)).sort()
  )

describe("TeamsService create and list", () => {
  it.effect("create trims the name and derives the slug from it", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace } = yield* newOwner
      const first = (yield* teams.create(actor, workspace, { name: "  Platform Team  " })).team
      assert.deepStrictEqual(first, {
        id: first.id,
        name: "Platform Team",
        slug: "platform-team",
        status: "active",
        createdAt: new Date(0)
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a derived slug takes the next free suffix, or `team` when the name has no slug characters", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace } = yield* newOwner
      yield* teams.create(actor, workspace, { name: "Platform Team" })
      yield* TestClock.adjust(1000)
      const second = (yield* teams.create(actor, workspace, { name: "platform team" })).team
      assert.strictEqual(second.slug, "platform-team-2")
      assert.strictEqual(second.createdAt.getTime(), 1000)
      assert.strictEqual((yield* teams.create(actor, workspace, { name: "!!!" })).team.slug, "team")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an explicit slug taken in the workspace is a Conflict; another workspace has its own slugs", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace } = yield* newOwner
      yield* teams.create(actor, workspace, { name: "Platform Team" })
      const conflict = yield* Effect.flip(teams.create(actor, workspace, { name: "Again", slug: "platform-team" }))
      assert.instanceOf(conflict, Conflict)
      const other = yield* newOwner
      const elsewhere = yield* teams.create(other.actor, other.workspace, { name: "Platform Team" })
      assert.strictEqual(elsewhere.team.slug, "platform-team")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("list pages the workspace's teams newest first behind a cursor bound to the workspace", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace } = yield* newOwner
      const created = []
      for (const name of ["A", "B", "C"]) {
        created.push((yield* teams.create(actor, workspace, { name })).team)
        yield* TestClock.adjust(1000)
      }
      const [first, second, third] = created
      const page1 = yield* teams.list(workspace, { limit: 2 })
      assert.deepStrictEqual(page1.data.teams.map((team) => team.id), [third?.id, second?.id])
      assert.isString(page1.cursor)
      const page2 = yield* teams.list(workspace, { limit: 2, cursor: page1.cursor ?? "" })
      assert.deepStrictEqual(page2.data.teams.map((team) => team.id), [first?.id])
      assert.isNull(page2.cursor)
      const other = yield* newOwner
      const misuse = yield* Effect.flip(teams.list(other.workspace, { cursor: page1.cursor ?? "" }))
      assert.instanceOf(misuse, ValidationFailed)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("create records team.created with the team as the API returns it", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, orgId, workspace } = yield* newOwner
      const team = (yield* teams.create(actor, workspace, { name: "Platform Team" })).team
      const events = yield* (yield* EventLogRepo).listEvents({ orgId })
      const created = events.filter((event) => event.type === "team.created")
      assert.lengthOf(created, 1)
      assert.deepStrictEqual(created[0]?.data, {
        team: { ...team, createdAt: team.createdAt.toISOString() }
      })
      assert.strictEqual(team.slug, "platform-team")
    }).pipe(Effect.provide(TestLayer)))
})

describe("TeamsService get, update and delete", () => {
  it.effect("another workspace's team is NotFound to get, update and delete", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { team } = yield* withTeam
      const other = yield* newOwner
      assert.instanceOf(yield* Effect.flip(teams.get(other.workspace, team.id)), NotFound)
      assert.instanceOf(
        yield* Effect.flip(teams.update(other.actor, other.workspace, team.id, { name: "x" })),
        NotFound
      )
      assert.instanceOf(yield* Effect.flip(teams.delete(other.actor, other.workspace, team.id)), NotFound)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("update renames and re-slugs; an empty patch changes nothing", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace, team } = yield* withTeam
      const patch = { name: "Core Platform", slug: "core-platform" }
      const renamed = (yield* teams.update(actor, workspace, team.id, patch)).team
      assert.deepStrictEqual(renamed, { ...team, ...patch })
      const unchanged = (yield* teams.update(actor, workspace, team.id, {})).team
      assert.deepStrictEqual(unchanged, renamed, "an empty patch changes nothing")
      assert.deepStrictEqual((yield* teams.get(workspace, team.id)).team, renamed)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("update to a slug taken in the workspace is a Conflict and changes nothing", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace, team } = yield* withTeam
      yield* teams.create(actor, workspace, { name: "Edge" })
      assert.instanceOf(yield* Effect.flip(teams.update(actor, workspace, team.id, { slug: "edge" })), Conflict)
      assert.deepStrictEqual((yield* teams.get(workspace, team.id)).team, team)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a deleted team is NotFound, and its slug is free again", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, workspace, team } = yield* withTeam
      assert.deepStrictEqual(yield* teams.delete(actor, workspace, team.id), { deleted: true })
      assert.instanceOf(yield* Effect.flip(teams.get(workspace, team.id)), NotFound)
      assert.instanceOf(yield* Effect.flip(teams.delete(actor, workspace, team.id)), NotFound)
      const again = yield* teams.create(actor, workspace, { name: "x", slug: team.slug })
      assert.strictEqual(again.team.slug, "core")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("create, update and delete each record their event", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, orgId, workspace, team } = yield* withTeam
      yield* teams.update(actor, workspace, team.id, { name: "Core Platform" })
      yield* teams.delete(actor, workspace, team.id)
      assert.deepStrictEqual(yield* teamEventTypes(orgId), ["team.created", "team.deleted", "team.updated"])
    }).pipe(Effect.provide(TestLayer)))
})

/** An owner's workspace with `alice` (a viewer) and `bob` (a member with no role of its own). */
const twoMembers = Effect.gen(function*() {
  const owner = yield* newOwner
  const [alice, bob] = [userActor(), userActor()]
  yield* seedMembership(owner.orgId, alice, "viewer")
  yield* seedMembership(owner.orgId, bob, undefined)
  return { ...owner, alice, bob }
})

/** The team `Builders` with both members, granted `builder` on the workspace. */
const buildersOf = Effect.fnUntraced(function*(setup: Effect.Success<typeof twoMembers>) {
  const teams = yield* TeamsService
  const team = (yield* teams.create(setup.actor, setup.workspace, { name: "Builders" })).team
  for (const member of [setup.alice, setup.bob]) {
    yield* teams.addMember(setup.actor, setup.workspace, team.id, { subjectId: member.userId })
  }
  const grant = yield* teams.grant(setup.actor, setup.workspace, {
    teamId: team.id,
    role: "builder",
    scopeKind: "organization"
  })
  const via = { kind: "team", role: "builder", scopeKind: "organization", scopeRef: null, teamId: team.id } as const
  return { team, grant, via }
})

describe("TeamsService: a team's grants reach its members", () => {
  it.effect("a grant answers its tuple; it reaches a member with via team, and a direct grant outranks it", () =>
    Effect.gen(function*() {
      const setup = yield* twoMembers
      const { team, grant, via } = yield* buildersOf(setup)
      assert.deepStrictEqual(grant, {
        grant: { teamId: team.id, role: "builder", scopeKind: "organization", scopeRef: null }
      })
      assert.deepStrictEqual((yield* decisionFor(setup.orgId, setup.alice, "project.create")).via, via)
      assert.strictEqual((yield* decisionFor(setup.orgId, setup.alice, "organization.read")).via?.kind, "direct")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a member with no role of its own sees the workspace through the team, and no more than it gives", () =>
    Effect.gen(function*() {
      const setup = yield* twoMembers
      assert.isFalse((yield* decisionFor(setup.orgId, setup.bob, "organization.read")).visible)
      const { via } = yield* buildersOf(setup)
      const bobRead = yield* decisionFor(setup.orgId, setup.bob, "organization.read")
      assert.isTrue(bobRead.visible)
      assert.deepStrictEqual(bobRead.via, via)
      assert.isFalse((yield* decisionFor(setup.orgId, setup.bob, "team.create")).allow)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("deleting the team ends what it gave", () =>
    Effect.gen(function*() {
      const setup = yield* twoMembers
      const { team } = yield* buildersOf(setup)
      yield* (yield* TeamsService).delete(setup.actor, setup.workspace, team.id)
      assert.isFalse((yield* decisionFor(setup.orgId, setup.alice, "project.create")).allow)
      const bobRead = yield* decisionFor(setup.orgId, setup.bob, "organization.read")
      assert.isFalse(bobRead.visible, "bob sees the workspace no more")
    }).pipe(Effect.provide(TestLayer)))
})

/** An account root with a child, and a member of the root in team `Finance`: billing on the account, and a project. */
const financeTeam = Effect.gen(function*() {
  const teams = yield* TeamsService
  const workspaces = yield* WorkspacesService
  const { actor: owner, orgId: rootId, workspace: root } = yield* newOwner
  const child = (yield* workspaces.create(owner, { name: "Child" })).organization
  const member = userActor()
  yield* seedMembership(rootId, member, undefined)
  const team = (yield* teams.create(owner, root, { name: "Finance" })).team
  yield* teams.addMember(owner, root, team.id, { subjectId: member.userId })
  yield* teams.grant(owner, root, { teamId: team.id, role: "billing_admin", scopeKind: "account" })
  const project = yield* seedProject(rootId)
  yield* teams.grant(owner, root, { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: project })
  return { owner, rootId, childId: child.id, member, team, project }
})

describe("TeamsService: grants on an account root", () => {
  it.effect("an account grant reaches the member on the root with via team", () =>
    Effect.gen(function*() {
      const { rootId, member, team } = yield* financeTeam
      const onRoot = yield* decisionFor(rootId, member, "billing.manage")
      assert.deepStrictEqual(onRoot.via, {
        kind: "team",
        role: "billing_admin",
        scopeKind: "account",
        scopeRef: null,
        teamId: team.id
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("and cascades to the root's children as account_cascade, keeping the team's id", () =>
    Effect.gen(function*() {
      const { childId, member, team } = yield* financeTeam
      const onChild = yield* decisionFor(childId, member, "billing.manage")
      assert.deepStrictEqual(onChild.via, {
        kind: "account_cascade",
        role: "billing_admin",
        scopeKind: "account",
        scopeRef: null,
        teamId: team.id
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a project grant applies in its project on the root only: never elsewhere, never cascaded", () =>
    Effect.gen(function*() {
      const { rootId, childId, member, project } = yield* financeTeam
      assert.isTrue((yield* decisionFor(rootId, member, "project.read", project)).allow)
      assert.strictEqual((yield* decisionFor(rootId, member, "project.read", project)).via?.kind, "team")
      assert.isFalse((yield* decisionFor(rootId, member, "project.read")).allow)
      assert.isFalse((yield* decisionFor(rootId, member, "project.read", mint.project(0))).allow)
      assert.isFalse((yield* decisionFor(childId, member, "project.read", project)).allow)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("effective access for another subject shows the same provenance", () =>
    Effect.gen(function*() {
      const { owner, childId, member, team } = yield* financeTeam
      const { permissions } = yield* (yield* WorkspacesService).effectiveAccess(owner, yield* resolve(childId, owner), {
        subjectId: member.userId
      })
      const billing = permissions.find((decision) => decision.action === "billing.read")
      assert.strictEqual(billing?.via?.kind, "account_cascade")
      assert.strictEqual(billing?.via?.teamId, team.id)
      assert.deepStrictEqual(
        effectiveAccess((yield* resolve(childId, member)).grants).filter((d) => d.allow).map((d) => d.action).sort(),
        ["billing.manage", "billing.read", "organization.metering.read", "organization.read"]
      )
    }).pipe(Effect.provide(TestLayer)))
})

/** An owner's account root and child workspace, a team `T` and a project in the child. */
const childWithTeam = Effect.gen(function*() {
  const teams = yield* TeamsService
  const { actor, orgId, workspace: root } = yield* newOwner
  const childId = (yield* (yield* WorkspacesService).create(actor, { name: "Child" })).organization.id
  const child = yield* resolve(childId, actor)
  const team = (yield* teams.create(actor, child, { name: "T" })).team
  const project = yield* seedProject(childId)
  return { actor, orgId, root, childId, child, team, project }
})

/** The fields of the `ValidationFailed` a grant of `tuple` fails with (the test fails on any other outcome). */
const grantFields = Effect.fnUntraced(function*(tuple: Omit<TeamRoleTuple, "teamId">) {
  const { actor, child, team } = yield* childWithTeam
  const error = yield* Effect.flip((yield* TeamsService).grant(actor, child, { teamId: team.id, ...tuple }))
  assert.instanceOf(error, ValidationFailed)
  return fieldsOf(error)
})

describe("TeamsService grant tuples", () => {
  it.effect("scopeRef is required for a project grant and absent otherwise", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* grantFields({ role: "project_admin", scopeKind: "project" }), {
        scopeRef: ["is required when scopeKind is 'project'"]
      })
      const project = mint.project(0)
      assert.deepStrictEqual(yield* grantFields({ role: "viewer", scopeKind: "organization", scopeRef: project }), {
        scopeRef: ["must be absent unless scopeKind is 'project'"]
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("project roles are granted on projects only, workspace roles never on one", () =>
    Effect.gen(function*() {
      const project = mint.project(0)
      const onProject = yield* grantFields({ role: "admin", scopeKind: "project", scopeRef: project })
      assert.deepStrictEqual(Object.keys(onProject), ["role"])
      const onAccount = yield* grantFields({ role: "project_viewer", scopeKind: "account" })
      assert.deepStrictEqual(Object.keys(onAccount).sort(), ["role", "scopeKind"])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("account scope exists only on an account root", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* grantFields({ role: "viewer", scopeKind: "account" }), {
        scopeKind: ["'account' is valid only on an account root"]
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a grant names a project of this workspace; revoking a tuple the team does not hold is NotFound", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, orgId, child, team } = yield* childWithTeam
      // Never one of another workspace; revoking by tuple does not ask, so such a tuple is the usual 404.
      for (const scopeRef of [mint.project(0), yield* seedProject(orgId)]) {
        const tuple = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef } as const
        const error = yield* Effect.flip(teams.grant(actor, child, tuple))
        assert.instanceOf(error, ValidationFailed)
        assert.deepStrictEqual(fieldsOf(error), { scopeRef: ["names no project in this workspace"] })
        assert.instanceOf(yield* Effect.flip(teams.revoke(actor, child, tuple)), NotFound)
      }
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a team of another workspace is NotFound, even to an owner", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, root, child } = yield* childWithTeam
      const rootTeam = (yield* teams.create(actor, root, { name: "R" })).team
      const notHere = yield* Effect.flip(
        teams.grant(actor, child, { teamId: rootTeam.id, role: "viewer", scopeKind: "organization" })
      )
      assert.instanceOf(notHere, NotFound)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the same grant twice is a Conflict; listGrants shows each once, newest first", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, child, team, project } = yield* childWithTeam
      yield* teams.grant(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization", scopeRef: null })
      yield* teams.grant(actor, child, {
        teamId: team.id,
        role: "project_admin",
        scopeKind: "project",
        scopeRef: project
      })
      const again = yield* Effect.flip(
        teams.grant(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization" })
      )
      assert.instanceOf(again, Conflict)
      const listed = yield* teams.listGrants(child, { teamId: team.id })
      assert.deepStrictEqual(listed.data.grants.map((g) => `${g.role}:${g.scopeRef}`), [
        `project_admin:${project}`,
        "viewer:null"
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("revoke by tuple (scopeRef null or absent alike) deletes the grant once, then NotFound", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, childId, child, team, project } = yield* childWithTeam
      const onProject = { teamId: team.id, role: "project_admin", scopeKind: "project", scopeRef: project } as const
      yield* teams.grant(actor, child, { teamId: team.id, role: "viewer", scopeKind: "organization", scopeRef: null })
      yield* teams.grant(actor, child, onProject)
      const viewer = { teamId: team.id, role: "viewer", scopeKind: "organization" } as const
      assert.deepStrictEqual(yield* teams.revoke(actor, child, viewer), { deleted: true })
      assert.instanceOf(yield* Effect.flip(teams.revoke(actor, child, viewer)), NotFound)
      yield* teams.revoke(actor, child, onProject)
      assert.deepStrictEqual((yield* teams.listGrants(child, {})).data.grants, [])
      assert.deepStrictEqual(yield* teamEventTypes(childId, "team.role."), [
        "team.role.granted",
        "team.role.granted",
        "team.role.revoked",
        "team.role.revoked"
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an archived project still exists: it may be granted on", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { actor, childId, child, team } = yield* childWithTeam
      const archived = yield* seedProject(childId, "archived")
      const onArchived = { teamId: team.id, role: "project_viewer", scopeKind: "project", scopeRef: archived } as const
      assert.deepStrictEqual(yield* teams.grant(actor, child, onArchived), { grant: onArchived })
      yield* teams.revoke(actor, child, onArchived)
    }).pipe(Effect.provide(TestLayer)))
})

/** An owner's workspace with an admin (in the admin's own team `Admins`) and a viewer. */
const adminsTeam = Effect.gen(function*() {
  const teams = yield* TeamsService
  const { actor: owner, orgId, workspace: asOwner } = yield* newOwner
  const [admin, member] = [userActor(), userActor()]
  yield* seedMembership(orgId, admin, "admin")
  yield* seedMembership(orgId, member, "viewer")
  const asAdmin = yield* resolve(orgId, admin)
  const team = (yield* teams.create(admin, asAdmin, { name: "Admins" })).team
  yield* teams.addMember(admin, asAdmin, team.id, { subjectId: admin.userId })
  const ownerTuple = { teamId: team.id, role: "owner", scopeKind: "organization" } as const
  return { owner, orgId, asOwner, admin, asAdmin, member, team, ownerTuple }
})

describe("TeamsService: nobody hands out through a team more than it holds", () => {
  it.effect("an admin cannot make owners through a team", () =>
    Effect.gen(function*() {
      const { admin, asAdmin, ownerTuple } = yield* adminsTeam
      const denied = yield* Effect.flip((yield* TeamsService).grant(admin, asAdmin, ownerTuple))
      assert.instanceOf(denied, Forbidden)
      assert.deepStrictEqual(denied.error.details, { reason: "exceeds_caller", role: "owner" })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("nor billing admins, whose billing.manage an admin does not hold", () =>
    Effect.gen(function*() {
      const { orgId, admin, asAdmin, team } = yield* adminsTeam
      const billing = yield* Effect.flip(
        (yield* TeamsService).grant(admin, asAdmin, {
          teamId: team.id,
          role: "billing_admin",
          scopeKind: "organization"
        })
      )
      assert.instanceOf(billing, Forbidden)
      assert.deepStrictEqual(billing.error.details, { reason: "exceeds_caller", role: "billing_admin" })
      assert.isFalse(
        (yield* decisionFor(orgId, admin, "billing.manage")).allow,
        "the admin did not become an owner through the team"
      )
    }).pipe(Effect.provide(TestLayer)))

  it.effect("roles within the admin's own reach are its to grant, on projects too", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { orgId, admin, asAdmin, team } = yield* adminsTeam
      yield* teams.grant(admin, asAdmin, { teamId: team.id, role: "admin", scopeKind: "organization" })
      yield* teams.grant(admin, asAdmin, {
        teamId: team.id,
        role: "project_admin",
        scopeKind: "project",
        scopeRef: yield* seedProject(orgId)
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("once a team makes owners, another admin may not change who is in it, delete it or revoke it", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { owner, orgId, asOwner, admin, member, team, ownerTuple } = yield* adminsTeam
      yield* teams.grant(owner, asOwner, ownerTuple)
      assert.strictEqual((yield* decisionFor(orgId, admin, "billing.manage")).via?.kind, "team")
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
        assert.instanceOf(yield* Effect.flip(attempt), Forbidden)
      }
      // Renaming it is fine; once the owner revokes the grant, deleting it is too.
      yield* teams.update(plainAdmin, asPlainAdmin, team.id, { name: "Owners" })
      yield* teams.revoke(owner, asOwner, ownerTuple)
      yield* teams.delete(plainAdmin, asPlainAdmin, team.id)
    }).pipe(Effect.provide(TestLayer)))
})

/** An owner's workspace with a team `T`, a member of the workspace, and `add` for joining the team. */
const joinable = Effect.gen(function*() {
  const teams = yield* TeamsService
  const { actor: owner, orgId, workspace, team } = yield* withTeam
  const member = userActor()
  yield* seedMembership(orgId, member, undefined)
  const add = (subjectId: string, subjectType?: "user" | "service_principal") =>
    teams.addMember(owner, workspace, team.id, subjectType === undefined ? { subjectId } : { subjectId, subjectType })
  return { owner, orgId, workspace, team, member, add }
})

/** A binding of the service principal `subjectId` on the workspace, workspace-wide or in a project (a key's). */
const principalBinding = (orgId: OrgId, scopeKind: "organization" | "project", subjectId: string) =>
  Effect.flatMap(RoleBindingsRepo, (bindings) =>
    bindings.insert({
      id: mint.roleBinding(0),
      orgId,
      subjectType: "service_principal",
      subjectId,
      role: scopeKind === "project" ? "project_viewer" : "builder",
      scopeKind,
      scopeRef: scopeKind === "project" ? mint.project(0) : null,
      createdAt: new Date(0)
    })).pipe(Effect.orDie)

describe("TeamsService members: who may join", () => {
  it.effect("a member of the workspace joins once; a second time is a Conflict", () =>
    Effect.gen(function*() {
      const { member, add } = yield* joinable
      yield* TestClock.adjust(5)
      assert.deepStrictEqual(yield* add(member.userId), {
        // No user row was stored for this actor: its profile reads as unknown.
        member: {
          subjectId: member.userId,
          subjectType: "user",
          status: "active",
          createdAt: new Date(5),
          email: null,
          displayName: null
        }
      })
      assert.instanceOf(yield* Effect.flip(add(member.userId)), Conflict)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("someone who is not a member of this workspace is NotFound", () =>
    Effect.gen(function*() {
      const { add } = yield* joinable
      assert.instanceOf(yield* Effect.flip(add(userActor().userId)), NotFound, "not a member of the workspace")
      const other = yield* newOwner
      assert.instanceOf(yield* Effect.flip(add(other.actor.userId)), NotFound, "a member of another workspace")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an id of the wrong kind is a ValidationFailed on subjectId", () =>
    Effect.gen(function*() {
      const { member, add } = yield* joinable
      for (const [subjectId, subjectType] of [["usr_nope", undefined], [member.userId, "service_principal"]] as const) {
        const error = yield* Effect.flip(add(subjectId, subjectType))
        assert.instanceOf(error, ValidationFailed)
        assert.deepStrictEqual(Object.keys(fieldsOf(error)), ["subjectId"])
      }
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a service principal belongs by its binding; a project-scoped key's principal never joins", () =>
    Effect.gen(function*() {
      const { orgId, add } = yield* joinable
      const principal = mint.servicePrincipal(0)
      assert.instanceOf(yield* Effect.flip(add(principal, "service_principal")), NotFound)
      yield* principalBinding(orgId, "organization", principal)
      assert.strictEqual((yield* add(principal, "service_principal")).member.subjectType, "service_principal")
      const projectKey = mint.servicePrincipal(0)
      yield* principalBinding(orgId, "project", projectKey)
      assert.instanceOf(yield* Effect.flip(add(projectKey, "service_principal")), ValidationFailed)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("listMembers pages the team's members newest first", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { orgId, workspace, team, member, add } = yield* joinable
      yield* add(member.userId)
      const principal = mint.servicePrincipal(0)
      yield* principalBinding(orgId, "organization", principal)
      yield* TestClock.adjust(5)
      yield* add(principal, "service_principal")
      const members = yield* teams.listMembers(workspace, team.id, { limit: 1 })
      assert.deepStrictEqual(members.data.members.map((m) => m.subjectId), [principal])
      const rest = yield* teams.listMembers(workspace, team.id, { cursor: members.cursor ?? "" })
      assert.deepStrictEqual(rest.data.members.map((m) => m.subjectId), [member.userId])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("removeMember removes a member once; anyone not in the team is NotFound", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { owner, workspace, team, member, add } = yield* joinable
      yield* add(member.userId)
      assert.deepStrictEqual(yield* teams.removeMember(owner, workspace, team.id, member.userId), { deleted: true })
      for (const subjectId of [member.userId, "garbage", userActor().userId]) {
        assert.instanceOf(yield* Effect.flip(teams.removeMember(owner, workspace, team.id, subjectId)), NotFound)
      }
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a team that does not exist is NotFound to list and to join", () =>
    Effect.gen(function*() {
      const teams = yield* TeamsService
      const { owner, workspace, member } = yield* joinable
      const missing = mint.team(0)
      assert.instanceOf(yield* Effect.flip(teams.listMembers(workspace, missing, {})), NotFound)
      assert.instanceOf(
        yield* Effect.flip(teams.addMember(owner, workspace, missing, { subjectId: member.userId })),
        NotFound
      )
    }).pipe(Effect.provide(TestLayer)))
})
