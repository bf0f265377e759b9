/** The stored shapes of the teams area: teams, their members and the roles granted to them. */
import { Role } from "@cp/domain/access"
import { OrgId, TeamId } from "@cp/domain/ids"
import { Schema } from "effect"
import { ScopeKind, SubjectType } from "../workspaces/rows.ts"

/** A row of `teams`; its slug is unique within its workspace. */
export const TeamRow = Schema.Struct({
  id: TeamId,
  orgId: OrgId,
  name: Schema.String,
  slug: Schema.String,
  /** Deleting a team removes its row, so every stored team is `active`. */
  status: Schema.Literals(["active"]),
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type TeamRow = typeof TeamRow.Type

/** A row of `team_members`: a subject belongs to a team at most once. */
export const TeamMemberRow = Schema.Struct({
  teamId: TeamId,
  subjectType: SubjectType,
  subjectId: Schema.String,
  status: Schema.Literals(["active"]),
  createdAt: Schema.Date
})
export type TeamMemberRow = typeof TeamMemberRow.Type

/** A row of `team_role_grants`: one role a team holds, named by (team, role, scope kind, scope ref). */
export const TeamGrantRow = Schema.Struct({
  /** A UUIDv7 minted by the server (never on the wire: a grant is named by its tuple). */
  id: Schema.String,
  teamId: TeamId,
  role: Role,
  scopeKind: ScopeKind,
  /** The project id of a `project` grant; null otherwise. */
  scopeRef: Schema.NullOr(Schema.String),
  createdAt: Schema.Date
})
export type TeamGrantRow = typeof TeamGrantRow.Type

/** What names a grant: everything but its id and creation time. */
export type TeamGrantTuple = Pick<TeamGrantRow, "teamId" | "role" | "scopeKind" | "scopeRef">

/** A keyset position in a newest-first list: the last row's time and its tie-breaking key. */
export interface TeamPagePosition {
  readonly at: Date
  readonly key: string
}

/** One page of a newest-first list: rows strictly after `after`, at most `limit` of them. */
export interface TeamPageWindow {
  readonly after?: TeamPagePosition | undefined
  readonly limit: number
}
