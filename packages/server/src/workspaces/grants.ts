/** Turns the roles a subject holds (role bindings and team grants) into grants with provenance for one workspace. */
import type { Grant } from "@cp/domain"
import type { HeldBinding } from "@cp/persistence"

/**
 * A role held on the workspace itself is `direct`, or `team` when a team's grant gives it; one held on the
 * workspace's account root reaches it as `account_cascade` (workspace- and account-scoped ones only: a project role
 * stays in its project). A grant that came through a team keeps the team's id in `teamId`, cascaded or not.
 */
export const grantsOf = (orgId: string, bindings: ReadonlyArray<HeldBinding>): ReadonlyArray<Grant> => {
  const grants: Array<Grant> = []
  for (const { orgId: heldOn, role, scopeKind, scopeRef, teamId } of bindings) {
    const onThisWorkspace = heldOn === orgId
    if (!onThisWorkspace && scopeKind === "project") continue
    const kind = !onThisWorkspace ? "account_cascade" : teamId === undefined ? "direct" : "team"
    const grant: Grant = { kind, role, scopeKind, scopeRef }
    grants.push(teamId === undefined ? grant : { ...grant, teamId })
  }
  return grants
}
