/**
 * The rules of the teams area as plain functions over values (no reads, no writes): which subject ids a team takes,
 * the rules across the fields of a grant tuple, who may join a team, and which grant a caller cannot hand out.
 */
import {
  type Grant,
  isProjectRole,
  type ProjectId,
  subjectTypeOf,
  type TeamRoleTuple,
  type TeamSubjectType
} from "@cp/domain"
import type { MemberRow, RoleBindingRow, TeamGrantTuple } from "@cp/persistence"
import { Option } from "effect"
import { coversRole } from "../platform/rbac.ts"

/** What is wrong with `subjectId` as an id of `subjectType`, if anything (a 422 on `subjectId`). */
export const subjectIdProblem = (subjectId: string, subjectType: TeamSubjectType): string | undefined =>
  subjectTypeOf(subjectId) === subjectType
    ? undefined
    : subjectType === "user"
    ? "must be a user id (usr_…)"
    : "must be a service principal id (sp_…)"

/** A grant tuple as stored: `scopeRef` names a project, or is null. */
export type CheckedTuple = TeamGrantTuple & { readonly scopeRef: ProjectId | null }

/** The tuple with its absent `scopeRef` as null, the way grants are stored and named. */
export const checkedTuple = (tuple: TeamRoleTuple): CheckedTuple => ({
  teamId: tuple.teamId,
  role: tuple.role,
  scopeKind: tuple.scopeKind,
  scopeRef: tuple.scopeRef ?? null
})

/**
 * The rules across the fields of a grant tuple, every failing field at once (empty when it passes): `scopeRef` names a
 * project exactly when `scopeKind` is `project`, project roles are granted on projects only (and workspace roles never
 * on one), and `account` scope exists only on an account root.
 */
export const tupleProblems = (
  tuple: TeamRoleTuple,
  onAccountRoot: boolean
): Readonly<Record<string, ReadonlyArray<string>>> => {
  const problems: Record<string, Array<string>> = {}
  const scopeRef = tuple.scopeRef ?? null
  if (tuple.scopeKind === "project" && scopeRef === null) {
    problems["scopeRef"] = ["is required when scopeKind is 'project'"]
  }
  if (tuple.scopeKind !== "project" && scopeRef !== null) {
    problems["scopeRef"] = ["must be absent unless scopeKind is 'project'"]
  }
  if (tuple.scopeKind === "project" && !isProjectRole(tuple.role)) {
    problems["role"] = ["must be project_admin, project_builder or project_viewer when scopeKind is 'project'"]
  }
  if (tuple.scopeKind !== "project" && isProjectRole(tuple.role)) {
    problems["role"] = [`is a project role: grant it with scopeKind 'project' and a scopeRef`]
  }
  if (tuple.scopeKind === "account" && !onAccountRoot) {
    problems["scopeKind"] = ["'account' is valid only on an account root"]
  }
  return problems
}

/**
 * The first of `grants` whose role the caller's grants do not cover, if any: nobody hands out (or takes back)
 * through a team a role stronger than its own.
 */
export const uncoveredGrant = (
  callerGrants: ReadonlyArray<Grant>,
  grants: ReadonlyArray<TeamGrantTuple>
): TeamGrantTuple | undefined =>
  grants.find((grant) => !coversRole(callerGrants, grant.role, grant.scopeKind === "project" ? grant.scopeRef : null))

/**
 * Why a subject may not join a team of a workspace, given its membership there and the role bindings it holds there;
 * undefined when it may. It must belong to the workspace: an active member, or a service principal with a binding
 * (API keys have no membership). A project-scoped key's principal never joins: a team's grants would take it outside
 * its project.
 */
export const joinRefusal = (
  subjectType: TeamSubjectType,
  membership: Option.Option<MemberRow>,
  held: ReadonlyArray<RoleBindingRow>
): "not_in_workspace" | "project_scoped_key" | undefined => {
  const belongs = Option.exists(membership, (member) => member.status === "active") || held.length > 0
  if (!belongs) return "not_in_workspace"
  if (subjectType === "service_principal" && held.some((binding) => binding.scopeKind === "project")) {
    return "project_scoped_key"
  }
  return undefined
}

/** How a grant's change reads in the event log: `Team Core granted admin on organization`, `… on project prj_…`. */
export const grantChange = (teamName: string, verb: "granted" | "lost", grant: TeamGrantTuple): string =>
  `Team ${teamName} ${verb} ${grant.role} on ${grant.scopeKind}${grant.scopeRef === null ? "" : ` ${grant.scopeRef}`}`
