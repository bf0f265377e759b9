import type { Role } from "@cp/domain/access"
import { IdPrefix, ProjectId, ServicePrincipalId, TeamId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { ApiKeysRepo } from "../../src/apiKeys/ApiKeysRepo.ts"
import { UniqueViolation } from "../../src/errors.ts"
import { UsersRepo } from "../../src/identity/UsersRepo.ts"
import { MembersRepo } from "../../src/members/MembersRepo.ts"
import type { TeamGrantRow, TeamMemberRow, TeamRow } from "../../src/teams/rows.ts"
import { TeamsRepo } from "../../src/teams/TeamsRepo.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { RoleBindingsRepo } from "../../src/workspaces/RoleBindingsRepo.ts"
import type { OrganizationRow, RoleBindingRow, SubjectType } from "../../src/workspaces/rows.ts"
import {
  accountRootRow,
  apiKeyRow,
  at,
  bindingRow as workspaceBindingRow,
  memberRow,
  newId,
  newUserId
} from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const newTeamId = () => newId(TeamId, IdPrefix.team)

const rootRow = (minutes = 0): OrganizationRow => accountRootRow("Root", minutes)

const childRow = (root: OrganizationRow): OrganizationRow => ({
  ...rootRow(1),
  name: "Child",
  kind: "workspace",
  accountId: root.publicId,
  isAccountRoot: false
})

const teamRow = (org: OrganizationRow, minutes: number, overrides: Partial<TeamRow> = {}): TeamRow => ({
  id: newTeamId(),
  orgId: org.id,
  name: "Platform",
  slug: `team-${randomUUID()}`,
  status: "active",
  createdAt: at(minutes),
  updatedAt: at(minutes),
  ...overrides
})

const memberOf = (
  team: TeamRow,
  subjectId: string,
  minutes: number,
  subjectType: SubjectType = "user"
): TeamMemberRow => ({ teamId: team.id, subjectType, subjectId, status: "active", createdAt: at(minutes) })

const grantOf = (team: TeamRow, role: Role, minutes: number, overrides: Partial<TeamGrantRow> = {}): TeamGrantRow => ({
  id: randomUUID(),
  teamId: team.id,
  role,
  scopeKind: "organization",
  scopeRef: null,
  createdAt: at(minutes),
  ...overrides
})

const bindingRow = (org: OrganizationRow, subjectId: string, role: Role, minutes: number): RoleBindingRow =>
  workspaceBindingRow(org, subjectId, role, { createdAt: at(minutes) })

/** An active membership of the workspace: what team grants need before they count. */
const joinWorkspace = (org: OrganizationRow, subjectId: string) =>
  Effect.flatMap(MembersRepo, (members) => members.insert(memberRow(org, subjectId, 0)))

/** The teams tables join the workspaces tables (the edge's lookup reads both), so the suites run them together. */
const repositories = {
  memory: Layer.mergeAll(
    OrganizationsRepo.memory,
    MembersRepo.memory,
    RoleBindingsRepo.memory,
    TeamsRepo.memory,
    UsersRepo.memory,
    ApiKeysRepo.memory
  ),
  sql: Layer.mergeAll(
    OrganizationsRepo.sql,
    MembersRepo.sql,
    RoleBindingsRepo.sql,
    TeamsRepo.sql,
    UsersRepo.sql,
    ApiKeysRepo.sql
  )
}

const insertOrgs = (rows: ReadonlyArray<OrganizationRow>) =>
  Effect.flatMap(OrganizationsRepo, (repo) => Effect.forEach(rows, repo.insert, { discard: true }))

const workspace = Effect.fnUntraced(function*() {
  const org = rootRow()
  yield* insertOrgs([org])
  return org
})

const byNewest = <A extends { readonly createdAt: Date }>(key: (row: A) => string) => (a: A, b: A) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (key(a) < key(b) ? 1 : key(a) > key(b) ? -1 : 0)

class Abort extends Data.TaggedError("Abort")<{}> {}

describeContract("TeamsRepo teams", repositories, (it) => {
  it.effect("inserts, finds within its workspace only, and lists newest first by keyset", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const [org, other] = [yield* workspace(), yield* workspace()]
      const teams = [teamRow(org, 1), teamRow(org, 3), teamRow(org, 2), teamRow(org, 2)]
      yield* Effect.forEach([...teams, teamRow(other, 4)], repo.insert, { discard: true })
      const first = teams[0]!
      assert.deepStrictEqual(yield* repo.find({ orgId: org.id, teamId: first.id }), Option.some(first))
      assert.isTrue(
        Option.isNone(yield* repo.find({ orgId: other.id, teamId: first.id })),
        "a team of another workspace is not found"
      )
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, teamId: newTeamId() })))

      const expected = [...teams].sort(byNewest((team) => team.id))
      assert.deepStrictEqual(yield* repo.list({ orgId: org.id, limit: 10 }), expected)
      const page1 = yield* repo.list({ orgId: org.id, limit: 2 })
      assert.deepStrictEqual(page1, expected.slice(0, 2))
      const last = page1[1]!
      const page2 = yield* repo.list({ orgId: org.id, limit: 2, after: { at: last.createdAt, key: last.id } })
      assert.deepStrictEqual(page2, expected.slice(2, 4))
      assert.deepStrictEqual(yield* repo.list({ orgId: org.id, limit: 2, after: { at: at(0), key: "" } }), [])
    }))

  it.effect("a slug is unique within its workspace only", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const [org, other] = [yield* workspace(), yield* workspace()]
      const team = teamRow(org, 1, { slug: "platform" })
      yield* repo.insert(team)
      yield* repo.insert(teamRow(other, 1, { slug: "platform" }))
      const error = yield* Effect.flip(repo.insert(teamRow(org, 2, { slug: "platform" })))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "teams_org_slug_key")
    }))

  it.effect("slugsStartingWith lists the workspace's base slug and its numeric suffixes", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const [org, other] = [yield* workspace(), yield* workspace()]
      const slugs = ["core", "core-2", "core-10", "core-x", "core2", "corex"]
      yield* Effect.forEach(slugs, (slug, i) => repo.insert(teamRow(org, i, { slug })), { discard: true })
      yield* repo.insert(teamRow(other, 0, { slug: "core-3" }))
      assert.deepStrictEqual([...yield* repo.slugsStartingWith({ orgId: org.id, base: "core" })].sort(), [
        "core",
        "core-10",
        "core-2"
      ])
      assert.deepStrictEqual(yield* repo.slugsStartingWith({ orgId: org.id, base: "none" }), [])
    }))

  it.effect("update renames within the workspace; a taken slug is a UniqueViolation and changes nothing", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const [org, other] = [yield* workspace(), yield* workspace()]
      const [team, sibling] = [teamRow(org, 1, { slug: "one" }), teamRow(org, 2, { slug: "two" })]
      yield* Effect.forEach([team, sibling], repo.insert, { discard: true })
      const renamed = yield* repo.update({ orgId: org.id, teamId: team.id, name: "Renamed", updatedAt: at(5) })
      assert.deepStrictEqual(renamed, Option.some({ ...team, name: "Renamed", updatedAt: at(5) }))
      const reslugged = yield* repo.update({ orgId: org.id, teamId: team.id, slug: "uno", updatedAt: at(6) })
      assert.deepStrictEqual(reslugged, Option.some({ ...team, name: "Renamed", slug: "uno", updatedAt: at(6) }))
      const error = yield* Effect.flip(repo.update({ orgId: org.id, teamId: team.id, slug: "two", updatedAt: at(7) }))
      assert.strictEqual(error.constraint, "teams_org_slug_key")
      assert.strictEqual(Option.getOrThrow(yield* repo.find({ orgId: org.id, teamId: team.id })).slug, "uno")
      assert.isTrue(
        Option.isNone(yield* repo.update({ orgId: other.id, teamId: team.id, name: "x", updatedAt: at(8) }))
      )
      // Its own slug is not a conflict.
      assert.isTrue(
        Option.isSome(yield* repo.update({ orgId: org.id, teamId: team.id, slug: "uno", updatedAt: at(9) }))
      )
    }))

  it.effect("delete removes the team with its members and grants; a second delete finds nothing", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const [org, other] = [yield* workspace(), yield* workspace()]
      const [team, kept] = [teamRow(org, 1), teamRow(org, 2)]
      yield* Effect.forEach([team, kept], repo.insert, { discard: true })
      const user = newUserId()
      yield* repo.insertMember(memberOf(team, user, 1))
      yield* repo.insertMember(memberOf(kept, user, 1))
      yield* repo.insertGrant(grantOf(team, "admin", 1))
      yield* repo.insertGrant(grantOf(kept, "viewer", 1))
      assert.isTrue(
        Option.isNone(yield* repo.delete({ orgId: other.id, teamId: team.id })),
        "not from another workspace"
      )
      assert.deepStrictEqual(yield* repo.delete({ orgId: org.id, teamId: team.id }), Option.some(team))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, teamId: team.id })))
      assert.deepStrictEqual(yield* repo.listMembers({ teamId: team.id, limit: 10 }), [])
      assert.deepStrictEqual(yield* repo.grantsOf(team.id), [])
      assert.lengthOf(yield* repo.listMembers({ teamId: kept.id, limit: 10 }), 1)
      assert.lengthOf(yield* repo.grantsOf(kept.id), 1)
      assert.isTrue(Option.isNone(yield* repo.delete({ orgId: org.id, teamId: team.id })))
      // The slug is free again.
      yield* repo.insert({ ...teamRow(org, 3), slug: team.slug })
    }))

  it.effect("a failed transaction leaves neither the team nor its member nor its grant behind", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const repo = yield* TeamsRepo
      const org = yield* workspace()
      const team = teamRow(org, 1)
      const error = yield* Effect.flip(withTransaction(Effect.gen(function*() {
        yield* repo.insert(team)
        yield* repo.insertMember(memberOf(team, newUserId(), 1))
        yield* repo.insertGrant(grantOf(team, "viewer", 1))
        return yield* new Abort()
      })))
      assert.instanceOf(error, Abort)
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, teamId: team.id })))
      assert.deepStrictEqual(yield* repo.listMembers({ teamId: team.id, limit: 10 }), [])
      assert.deepStrictEqual(yield* repo.grantsOf(team.id), [])
    }))
})

/** A team with two users and a service principal (`sp`), joined at 1, 3 and 2 minutes. */
const teamWithMembers = Effect.gen(function*() {
  const repo = yield* TeamsRepo
  const team = teamRow(yield* workspace(), 0)
  yield* repo.insert(team)
  const sp = newId(ServicePrincipalId, IdPrefix.servicePrincipal)
  const members = [
    memberOf(team, newUserId(), 1),
    memberOf(team, newUserId(), 3),
    memberOf(team, sp, 2, "service_principal")
  ] as const
  yield* Effect.forEach(members, repo.insertMember, { discard: true })
  return { team, members, sp }
})

/** A team holding builder (workspace and account) and project_admin on two projects. */
const teamWithGrants = Effect.gen(function*() {
  const repo = yield* TeamsRepo
  const team = teamRow(yield* workspace(), 0)
  yield* repo.insert(team)
  const [projectA, projectB] = [newId(ProjectId, IdPrefix.project), newId(ProjectId, IdPrefix.project)]
  const grants = [
    grantOf(team, "builder", 1),
    grantOf(team, "builder", 2, { scopeKind: "account" }),
    grantOf(team, "project_admin", 3, { scopeKind: "project", scopeRef: projectA }),
    grantOf(team, "project_admin", 3, { scopeKind: "project", scopeRef: projectB })
  ] as const
  yield* Effect.forEach(grants, repo.insertGrant, { discard: true })
  return { team, grants, projectA, projectB }
})

describeContract("TeamsRepo members and grants", repositories, (it) => {
  it.effect("a subject joins a team once: a second time is a UniqueViolation", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const { team, members } = yield* teamWithMembers
      const error = yield* Effect.flip(repo.insertMember(memberOf(team, members[0].subjectId, 4)))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "team_members_pkey")
    }))

  it.effect("members list newest first (createdAt, subjectId) by keyset", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const { team, members } = yield* teamWithMembers
      // No user or key rows behind these subjects: their profiles read as unknown.
      const expected = [...members].sort(byNewest((member) => member.subjectId))
        .map((member) => ({ ...member, email: null, displayName: null }))
      assert.deepStrictEqual(yield* repo.listMembers({ teamId: team.id, limit: 10 }), expected)
      const first = expected[0]!
      assert.deepStrictEqual(
        yield* repo.listMembers({ teamId: team.id, limit: 10, after: { at: first.createdAt, key: first.subjectId } }),
        expected.slice(1)
      )
    }))

  it.effect("insertMember and listMembers answer each subject's email and display name", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const org = yield* workspace()
      const team = teamRow(org, 0)
      yield* repo.insert(team)
      const user = newUserId()
      yield* (yield* UsersRepo).insert({
        id: user,
        email: "grace@example.test",
        displayName: "Grace",
        lastOrgSlug: null,
        emailVerified: true,
        createdAt: at(0),
        updatedAt: at(0)
      })
      const key = apiKeyRow(org, 0)
      yield* (yield* ApiKeysRepo).insert(key)
      const asUser = memberOf(team, user, 1)
      const asPrincipal = memberOf(team, key.servicePrincipalId, 2, "service_principal")
      const userProfile = { email: "grace@example.test", displayName: "Grace" }
      const principalProfile = { email: null, displayName: "API Key: deploy" }
      assert.deepStrictEqual(yield* repo.insertMember(asUser), { ...asUser, ...userProfile })
      assert.deepStrictEqual(yield* repo.insertMember(asPrincipal), { ...asPrincipal, ...principalProfile })
      assert.deepStrictEqual(yield* repo.listMembers({ teamId: team.id, limit: 10 }), [
        { ...asPrincipal, ...principalProfile },
        { ...asUser, ...userProfile }
      ])
    }))

  it.effect("deleteMember removes exactly that subject of that type once, returning the row", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const { team, members, sp } = yield* teamWithMembers
      const principal = { teamId: team.id, subjectType: "service_principal" as const }
      assert.deepStrictEqual(yield* repo.deleteMember({ ...principal, subjectId: sp }), Option.some(members[2]))
      assert.isTrue(Option.isNone(yield* repo.deleteMember({ ...principal, subjectId: sp })))
      assert.isTrue(Option.isNone(yield* repo.deleteMember({ ...principal, subjectId: members[0].subjectId })))
      assert.lengthOf(yield* repo.listMembers({ teamId: team.id, limit: 10 }), 2)
    }))

  it.effect("a grant is named by its tuple: the same tuple twice is a UniqueViolation", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const { team, projectA } = yield* teamWithGrants
      for (
        const duplicate of [
          grantOf(team, "builder", 4),
          grantOf(team, "project_admin", 4, { scopeKind: "project", scopeRef: projectA })
        ]
      ) {
        const error = yield* Effect.flip(repo.insertGrant(duplicate))
        assert.instanceOf(error, UniqueViolation)
        assert.strictEqual(error.constraint, "team_role_grants_grant_key")
      }
    }))

  it.effect("grantsOf lists a team's grants in grant order", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const { team, grants } = yield* teamWithGrants
      const oldestFirst = [...grants].sort(byNewest((grant: TeamGrantRow) => grant.id)).reverse()
      assert.deepStrictEqual(yield* repo.grantsOf(team.id), oldestFirst)
    }))

  it.effect("deleteGrant revokes exactly the grant its tuple names, once", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const { team, grants, projectA, projectB } = yield* teamWithGrants
      const tuple = {
        teamId: team.id,
        role: "project_admin" as const,
        scopeKind: "project" as const,
        scopeRef: projectA
      }
      assert.deepStrictEqual(yield* repo.deleteGrant(tuple), Option.some(grants[2]))
      assert.isTrue(Option.isNone(yield* repo.deleteGrant(tuple)))
      const otherScope = {
        teamId: team.id,
        role: "builder" as const,
        scopeKind: "project" as const,
        scopeRef: projectB
      }
      assert.isTrue(Option.isNone(yield* repo.deleteGrant(otherScope)))
      assert.deepStrictEqual(
        yield* repo.deleteGrant({ teamId: team.id, role: "builder", scopeKind: "organization", scopeRef: null }),
        Option.some(grants[0])
      )
      assert.deepStrictEqual(yield* repo.grantsOf(team.id), [grants[1], grants[3]])
    }))

  it.effect("listGrants pages a workspace's grants newest first, for all its teams or one", () =>
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const [org, other] = [yield* workspace(), yield* workspace()]
      const [a, b, foreign] = [teamRow(org, 0), teamRow(org, 0), teamRow(other, 0)]
      yield* Effect.forEach([a, b, foreign], repo.insert, { discard: true })
      const grants = [
        grantOf(a, "viewer", 1),
        grantOf(b, "builder", 2),
        grantOf(a, "admin", 3),
        grantOf(b, "viewer", 3)
      ]
      yield* Effect.forEach([...grants, grantOf(foreign, "owner", 4)], repo.insertGrant, { discard: true })
      const expected = [...grants].sort(byNewest((grant) => grant.id))
      assert.deepStrictEqual(yield* repo.listGrants({ orgId: org.id, limit: 10 }), expected)
      const [p1, p2] = [yield* repo.listGrants({ orgId: org.id, limit: 3 }), expected[2]!]
      assert.deepStrictEqual(p1, expected.slice(0, 3))
      assert.deepStrictEqual(
        yield* repo.listGrants({ orgId: org.id, limit: 3, after: { at: p2.createdAt, key: p2.id } }),
        expected.slice(3)
      )
      assert.deepStrictEqual(
        yield* repo.listGrants({ orgId: org.id, limit: 10, teamId: a.id }),
        expected.filter((grant) => grant.teamId === a.id)
      )
      assert.deepStrictEqual(yield* repo.listGrants({ orgId: org.id, limit: 10, teamId: foreign.id }), [])
    }))
})

/**
 * A user who belongs to an account root, its child and an unrelated workspace, with a direct binding on the child and
 * teams in all three (plus a team of the child it is not in); what it holds on the child and on the root.
 */
const teamsAcrossAccount = Effect.gen(function*() {
  const repo = yield* TeamsRepo
  const root = rootRow()
  const child = childRow(root)
  const unrelated = rootRow()
  yield* insertOrgs([root, child, unrelated])
  const user = newUserId()
  for (const org of [root, child, unrelated]) yield* joinWorkspace(org, user)
  const direct = bindingRow(child, user, "viewer", 2)
  yield* (yield* RoleBindingsRepo).insert(direct)
  const [childTeam, rootTeam, elsewhere, notMine] = [
    teamRow(child, 0),
    teamRow(root, 0),
    teamRow(unrelated, 0),
    teamRow(child, 0)
  ]
  yield* Effect.forEach([childTeam, rootTeam, elsewhere, notMine], repo.insert, { discard: true })
  for (const team of [childTeam, rootTeam, elsewhere]) yield* repo.insertMember(memberOf(team, user, 0))
  yield* repo.insertMember(memberOf(notMine, newUserId(), 0))
  const childGrant = grantOf(childTeam, "builder", 3)
  const projectGrant = grantOf(childTeam, "project_admin", 1, {
    scopeKind: "project",
    scopeRef: newId(ProjectId, IdPrefix.project)
  })
  const rootGrant = grantOf(rootTeam, "billing_admin", 4, { scopeKind: "account" })
  yield* Effect.forEach(
    [childGrant, projectGrant, rootGrant, grantOf(elsewhere, "owner", 0), grantOf(notMine, "owner", 0)],
    repo.insertGrant,
    { discard: true }
  )
  const held = (grant: TeamGrantRow, team: TeamRow) => ({
    id: grant.id,
    orgId: team.orgId,
    subjectType: "user" as const,
    subjectId: user,
    role: grant.role,
    scopeKind: grant.scopeKind,
    scopeRef: grant.scopeRef,
    createdAt: grant.createdAt,
    teamId: team.id
  })
  return {
    root,
    child,
    user,
    onChild: [held(projectGrant, childTeam), direct, held(childGrant, childTeam), held(rootGrant, rootTeam)],
    onRoot: [held(rootGrant, rootTeam)]
  }
})

describeContract("OrganizationsRepo.resolveForSubject with teams", repositories, (it) => {
  it.effect("on a child: its own binding and its teams' grants there and on the root, in grant order, by any ref", () =>
    Effect.gen(function*() {
      const orgs = yield* OrganizationsRepo
      const { child, user, onChild } = yield* teamsAcrossAccount
      for (const ref of [child.id, child.publicId, child.slug]) {
        assert.deepStrictEqual(
          yield* orgs.resolveForSubject({ ref, subjectType: "user", subjectId: user }),
          Option.some({ organization: child, bindings: onChild })
        )
      }
    }))

  it.effect("on the root: only the grants of the root's teams", () =>
    Effect.gen(function*() {
      const orgs = yield* OrganizationsRepo
      const { root, user, onRoot } = yield* teamsAcrossAccount
      assert.deepStrictEqual(
        yield* orgs.resolveForSubject({ ref: root.id, subjectType: "user", subjectId: user }),
        Option.some({ organization: root, bindings: onRoot })
      )
    }))

  it.effect("a team member of the same id but another subject type holds nothing", () =>
    Effect.gen(function*() {
      const orgs = yield* OrganizationsRepo
      const { child, user } = yield* teamsAcrossAccount
      assert.deepStrictEqual(
        yield* orgs.resolveForSubject({ ref: child.id, subjectType: "service_principal", subjectId: user }),
        Option.some({ organization: child, bindings: [] })
      )
    }))

  it.effect("team grants count only while the subject belongs to the team's workspace, and stop with the team", () =>
    Effect.gen(function*() {
      const orgs = yield* OrganizationsRepo
      const repo = yield* TeamsRepo
      const org = yield* workspace()
      const [user, stranger] = [newUserId(), newUserId()]
      const sp = newId(ServicePrincipalId, IdPrefix.servicePrincipal)
      yield* joinWorkspace(org, user)
      // A service principal has no membership: its role binding on the workspace is what makes it belong.
      yield* (yield* RoleBindingsRepo).insert({ ...bindingRow(org, sp, "viewer", 0), subjectType: "service_principal" })
      const team = teamRow(org, 0)
      yield* repo.insert(team)
      yield* repo.insertMember(memberOf(team, user, 0))
      yield* repo.insertMember(memberOf(team, stranger, 0))
      yield* repo.insertMember(memberOf(team, sp, 0, "service_principal"))
      const grant = grantOf(team, "admin", 1)
      yield* repo.insertGrant(grant)

      const rolesOf = (subjectType: SubjectType, subjectId: string) =>
        orgs.resolveForSubject({ ref: org.id, subjectType, subjectId }).pipe(
          Effect.map((resolved) => Option.getOrThrow(resolved).bindings.map((b) => `${b.role}:${b.teamId ?? "direct"}`))
        )
      assert.deepStrictEqual(yield* rolesOf("user", user), [`admin:${team.id}`])
      assert.deepStrictEqual(
        yield* rolesOf("user", stranger),
        [],
        "not a member of the workspace: the team gives nothing"
      )
      assert.deepStrictEqual(yield* rolesOf("service_principal", sp), ["viewer:direct", `admin:${team.id}`])

      yield* repo.delete({ orgId: org.id, teamId: team.id })
      assert.deepStrictEqual(yield* rolesOf("user", user), [])
      assert.deepStrictEqual(yield* rolesOf("service_principal", sp), ["viewer:direct"])
    }))
})
