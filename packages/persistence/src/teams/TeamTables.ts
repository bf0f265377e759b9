/**
 * The in-memory tables of the teams area. `OrganizationsRepo.memory` reads them (a subject's team grants are part of
 * the edge's one workspace lookup), so every memory layer that needs them provides this same layer value, which a
 * single layer build constructs once (as `WorkspaceTables` does for the workspaces area).
 */
import type { TeamId } from "@cp/domain/ids"
import { Context, Layer } from "effect"
import type { MemberRow } from "../members/rows.ts"
import { compositeKey } from "../memoryTable.ts"
import type { RoleBindingRow } from "../workspaces/rows.ts"
import type { TeamGrantRow, TeamGrantTuple, TeamMemberRow, TeamRow } from "./rows.ts"

/** The Maps behind `TeamsRepo.memory`; members and grants are keyed by their natural keys. */
export class TeamTables extends Context.Service<TeamTables, {
  readonly teams: Map<TeamId, TeamRow>
  readonly members: Map<string, TeamMemberRow>
  readonly grants: Map<string, TeamGrantRow>
}>()("@cp/persistence/teams/TeamTables") {
  static readonly layer = Layer.sync(
    TeamTables,
    () => TeamTables.of({ teams: new Map(), members: new Map(), grants: new Map() })
  )
}

export const memberKey = (member: Pick<TeamMemberRow, "teamId" | "subjectType" | "subjectId">): string =>
  compositeKey(member.teamId, member.subjectType, member.subjectId)

export const grantKey = (grant: TeamGrantTuple): string =>
  compositeKey(grant.teamId, grant.role, grant.scopeKind, grant.scopeRef)

/**
 * Whether a subject belongs to a workspace: an active member of it, or (a service principal has no membership) the
 * holder of a role binding on it. Team grants reach only subjects that belong to the team's workspace, so removing a
 * member from the workspace ends what its teams gave it, whatever is left in `team_members`.
 */
export const belongsTo = (
  tables: {
    readonly members: ReadonlyMap<string, MemberRow>
    readonly roleBindings: ReadonlyMap<string, RoleBindingRow>
  },
  orgId: string,
  subjectType: string,
  subjectId: string
): boolean => {
  const matches = (row: { readonly orgId: string; readonly subjectType: string; readonly subjectId: string }) =>
    row.orgId === orgId && row.subjectType === subjectType && row.subjectId === subjectId
  for (const member of tables.members.values()) if (matches(member) && member.status === "active") return true
  for (const binding of tables.roleBindings.values()) if (matches(binding)) return true
  return false
}

/**
 * The roles a subject holds through teams on any of `orgIds`, as role bindings of that subject carrying the team's id
 * (the memory twin of the team half of `OrganizationsRepo.resolveForSubject`); the caller orders them.
 */
export const teamBindingsOfSubject = (
  tables: Context.Service.Shape<typeof TeamTables>,
  workspace: {
    readonly members: ReadonlyMap<string, MemberRow>
    readonly roleBindings: ReadonlyMap<string, RoleBindingRow>
  },
  orgIds: ReadonlyArray<string>,
  subjectType: TeamMemberRow["subjectType"],
  subjectId: string
): Array<RoleBindingRow & { readonly teamId: TeamId }> => {
  const held: Array<RoleBindingRow & { readonly teamId: TeamId }> = []
  for (const member of tables.members.values()) {
    if (member.subjectType !== subjectType || member.subjectId !== subjectId || member.status !== "active") continue
    const team = tables.teams.get(member.teamId)
    if (team === undefined || !orgIds.includes(team.orgId)) continue
    if (!belongsTo(workspace, team.orgId, subjectType, subjectId)) continue
    for (const grant of tables.grants.values()) {
      if (grant.teamId !== team.id) continue
      held.push({
        id: grant.id,
        orgId: team.orgId,
        subjectType,
        subjectId,
        role: grant.role,
        scopeKind: grant.scopeKind,
        scopeRef: grant.scopeRef,
        createdAt: grant.createdAt,
        teamId: team.id
      })
    }
  }
  return held
}
