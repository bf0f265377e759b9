/** The teams rules as plain functions: subject ids, the rules across a grant tuple, joining, and covering grants. */
import type { Grant, TeamRoleTuple } from "@cp/domain"
import type { MemberRow, RoleBindingRow } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { mint } from "../../src/platform/ids.ts"
import {
  checkedTuple,
  grantChange,
  joinRefusal,
  subjectIdProblem,
  tupleProblems,
  uncoveredGrant
} from "../../src/teams/rules.ts"

const teamId = mint.team(0)
const projectId = mint.project(0)
const orgId = mint.org(0)

const tuple = (fields: Omit<TeamRoleTuple, "teamId">): TeamRoleTuple => ({ teamId, ...fields })

describe("subjectIdProblem", () => {
  it("a user member needs a user id, a service principal member a service principal id", () => {
    const userId = mint.user(0)
    const principalId = mint.servicePrincipal(0)
    assert.isUndefined(subjectIdProblem(userId, "user"))
    assert.isUndefined(subjectIdProblem(principalId, "service_principal"))
    assert.strictEqual(subjectIdProblem(principalId, "user"), "must be a user id (usr_…)")
    assert.strictEqual(subjectIdProblem(userId, "service_principal"), "must be a service principal id (sp_…)")
    assert.strictEqual(subjectIdProblem("usr_not-a-ulid", "user"), "must be a user id (usr_…)")
  })
})

describe("tupleProblems", () => {
  it("a well-formed tuple has none", () => {
    assert.deepStrictEqual(tupleProblems(tuple({ role: "admin", scopeKind: "organization" }), false), {})
    assert.deepStrictEqual(
      tupleProblems(tuple({ role: "project_admin", scopeKind: "project", scopeRef: projectId }), false),
      {}
    )
    assert.deepStrictEqual(tupleProblems(tuple({ role: "billing_admin", scopeKind: "account" }), true), {})
  })

  it("scopeRef is required exactly when scopeKind is project", () => {
    assert.deepStrictEqual(tupleProblems(tuple({ role: "project_admin", scopeKind: "project" }), false), {
      scopeRef: ["is required when scopeKind is 'project'"]
    })
    assert.deepStrictEqual(
      tupleProblems(tuple({ role: "admin", scopeKind: "organization", scopeRef: projectId }), false),
      { scopeRef: ["must be absent unless scopeKind is 'project'"] }
    )
  })

  it("project roles go on projects only, and workspace roles never on one", () => {
    assert.deepStrictEqual(
      tupleProblems(tuple({ role: "admin", scopeKind: "project", scopeRef: projectId }), false),
      { role: ["must be project_admin, project_builder or project_viewer when scopeKind is 'project'"] }
    )
    assert.deepStrictEqual(tupleProblems(tuple({ role: "project_viewer", scopeKind: "organization" }), false), {
      role: ["is a project role: grant it with scopeKind 'project' and a scopeRef"]
    })
  })

  it("account scope exists only on an account root", () => {
    assert.deepStrictEqual(tupleProblems(tuple({ role: "billing_admin", scopeKind: "account" }), false), {
      scopeKind: ["'account' is valid only on an account root"]
    })
  })

  it("every failing field is named at once", () => {
    const problems = tupleProblems(tuple({ role: "project_admin", scopeKind: "account", scopeRef: projectId }), false)
    assert.sameMembers(Object.keys(problems), ["scopeRef", "role", "scopeKind"])
  })
})

describe("checkedTuple", () => {
  it("an absent scopeRef is stored as null", () => {
    assert.deepStrictEqual(checkedTuple(tuple({ role: "admin", scopeKind: "organization" })), {
      teamId,
      role: "admin",
      scopeKind: "organization",
      scopeRef: null
    })
  })
})

describe("uncoveredGrant", () => {
  const admin: ReadonlyArray<Grant> = [{ kind: "direct", role: "admin", scopeKind: "organization", scopeRef: null }]
  const grant = (role: TeamRoleTuple["role"]) => checkedTuple(tuple({ role, scopeKind: "organization" }))

  it("finds the first grant holding a permission the caller lacks", () => {
    assert.deepStrictEqual(
      uncoveredGrant(admin, [grant("viewer"), grant("owner"), grant("billing_admin")]),
      grant("owner")
    )
  })

  it("finds none when the caller covers every one", () => {
    assert.isUndefined(uncoveredGrant(admin, [grant("viewer"), grant("builder")]))
  })
})

describe("joinRefusal", () => {
  const member = (status: MemberRow["status"]): MemberRow => ({
    id: mint.member(0),
    orgId,
    subjectType: "user",
    subjectId: mint.user(0),
    status,
    joinedAt: new Date(0)
  })
  const binding = (scopeKind: RoleBindingRow["scopeKind"]): RoleBindingRow => ({
    id: mint.roleBinding(0),
    orgId,
    subjectType: "service_principal",
    subjectId: mint.servicePrincipal(0),
    role: scopeKind === "project" ? "project_viewer" : "viewer",
    scopeKind,
    scopeRef: scopeKind === "project" ? projectId : null,
    createdAt: new Date(0)
  })

  it("an active member of the workspace may join", () => {
    assert.isUndefined(joinRefusal("user", Option.some(member("active")), []))
  })

  it("a subject that does not belong to the workspace may not", () => {
    assert.strictEqual(joinRefusal("user", Option.none(), []), "not_in_workspace")
  })

  it("a service principal belongs by its binding; a project-scoped key's principal never joins", () => {
    assert.isUndefined(joinRefusal("service_principal", Option.none(), [binding("organization")]))
    assert.strictEqual(joinRefusal("service_principal", Option.none(), [binding("project")]), "project_scoped_key")
  })
})

describe("grantChange", () => {
  it("names the role and the scope, with the project of a project grant", () => {
    const onProject = checkedTuple(tuple({ role: "project_admin", scopeKind: "project", scopeRef: projectId }))
    assert.strictEqual(
      grantChange("Core", "granted", onProject),
      `Team Core granted project_admin on project ${projectId}`
    )
    const onWorkspace = checkedTuple(tuple({ role: "admin", scopeKind: "organization" }))
    assert.strictEqual(grantChange("Core", "lost", onWorkspace), "Team Core lost admin on organization")
  })
})
