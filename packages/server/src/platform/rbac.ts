/** The RBAC core: grants (role bindings with provenance) decide permissions; deny by default. */
import {
  type Grant,
  type Permission,
  type PermissionDecision,
  permissions,
  projectPermissions,
  type Role,
  rolePermissions
} from "@cp/domain"

/**
 * What a workflow actor holds in its token-bound workspace: the `project_builder` set within its bound project
 * (run-state.md §8), nothing at workspace level.
 */
export const workflowGrants = (projectId: string): ReadonlyArray<Grant> => [{
  kind: "direct",
  role: "project_builder",
  scopeKind: "project",
  scopeRef: projectId
}]

const projectScoped: ReadonlySet<string> = new Set(projectPermissions)

const grantApplies = (grant: Grant, permission: Permission, projectId: string | undefined): boolean => {
  if (!rolePermissions[grant.role].has(permission)) return false
  if (grant.only !== undefined && !grant.only.has(permission)) return false
  if (grant.scopeKind !== "project") return true
  return projectScoped.has(permission) && projectId !== undefined && grant.scopeRef === projectId
}

const precedence: Record<Grant["kind"], number> = { direct: 0, team: 1, account_cascade: 2 }

/**
 * The decision for one permission: the most direct grant that allows it (`direct` before `team` before
 * `account_cascade`, the first granted within a kind), or deny when none does.
 */
export const decide = (
  grants: ReadonlyArray<Grant>,
  permission: Permission,
  projectId?: string
): PermissionDecision => {
  let via: Grant | null = null
  for (const grant of grants) {
    if (grantApplies(grant, permission, projectId) && (via === null || precedence[grant.kind] < precedence[via.kind])) {
      via = grant
    }
  }
  return { action: permission, allow: via !== null, via }
}

/** Every permission the catalog names, each with its decision. */
export const effectiveAccess = (grants: ReadonlyArray<Grant>, projectId?: string): ReadonlyArray<PermissionDecision> =>
  permissions.map((permission) => decide(grants, permission, projectId))

/**
 * Whether `grants` hold every permission `role` confers, where it confers it (the workspace, or `projectId` for a
 * project role): nobody hands out, through a key or a team, more than it holds itself.
 */
export const coversRole = (grants: ReadonlyArray<Grant>, role: Role, projectId: string | null): boolean => {
  for (const permission of rolePermissions[role]) {
    if (!decide(grants, permission, projectId ?? undefined).allow) return false
  }
  return true
}

/** Whether any grant is an owner grant (account selection and last-owner rules). */
export const holdsRole = (grants: ReadonlyArray<Grant>, role: Role): boolean =>
  grants.some((grant) => grant.role === role && grant.scopeKind !== "project")
