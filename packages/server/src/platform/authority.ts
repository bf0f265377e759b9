/**
 * The caller's authority as it is under the workspace lock. The grants a request starts with are read before any
 * transaction; a change of memberships, roles, team grants or API keys acts on them only after checking them again
 * inside its transaction, with the workspace locked, so a concurrent change that committed first (the caller removed
 * or demoted) decides, and two such changes never both act on what the other took away.
 */
import { type Actor, Forbidden, type Permission, type ResolvedWorkspace, wireError } from "@cp/domain"
import type { OrganizationsRepo } from "@cp/persistence"
import { Effect, Option } from "effect"
import { decide } from "./rbac.ts"
import type { WorkspaceResolver } from "./workspaceResolver.ts"

/** Checks `permission` again under the lock; what it answers. */
export type LockedAuthority = (
  actor: Actor,
  workspace: ResolvedWorkspace,
  permission: Permission,
  projectId?: string
) => Effect.Effect<ResolvedWorkspace, Forbidden>

/**
 * Inside a transaction: locks the workspace (every membership change takes this lock), reads the caller's grants there
 * again and checks `permission` with them; answers the workspace with those grants, for the rules that follow (owner
 * only, nothing stronger than the caller holds). 403 when the caller no longer holds the permission, or no longer
 * belongs to the workspace.
 */
export const lockedAuthority = (
  organizations: OrganizationsRepo["Service"],
  resolver: WorkspaceResolver["Service"]
): LockedAuthority =>
  Effect.fnUntraced(function*(actor, workspace, permission, projectId) {
    const orgId = workspace.organization.id
    yield* organizations.lockWorkspace(orgId)
    const current = yield* resolver.resolve(orgId, actor)
    if (Option.isNone(current) || !decide(current.value.grants, permission, projectId).allow) {
      return yield* wireError(Forbidden, `Missing permission ${permission}`, { permission })
    }
    return current.value
  })
