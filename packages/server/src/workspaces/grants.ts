/** Turns stored role bindings into grants with provenance for one workspace. */
import type { RoleBindingRow } from "@cp/persistence"
import type { Grant } from "../platform/rbac.ts"

/**
 * Bindings on the workspace itself are `direct`; bindings on its account root reach it as
 * `account_cascade` (workspace- and account-scoped ones only: a project role stays in its project).
 */
export const grantsOf = (orgId: string, bindings: ReadonlyArray<RoleBindingRow>): ReadonlyArray<Grant> =>
  bindings.flatMap((binding): ReadonlyArray<Grant> => {
    const onThisWorkspace = binding.orgId === orgId
    if (!onThisWorkspace && binding.scopeKind === "project") return []
    return [{
      kind: onThisWorkspace ? "direct" : "account_cascade",
      role: binding.role,
      scopeKind: binding.scopeKind,
      scopeRef: binding.scopeRef
    }]
  })
