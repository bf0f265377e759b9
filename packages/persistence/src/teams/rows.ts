/** The stored shapes of the teams area (teams, their members and the roles granted to them) and its requests. */
import { OrgId, TeamId } from "@cp/domain/ids"
import { Team, TeamMember, TeamRoleGrant } from "@cp/domain/teams"
import { Schema, Struct } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"
import { SubjectProfile } from "../subjects.ts"

/** A row of `teams`; its slug is unique within its workspace. Deleting a team removes its row (status `active`). */
export const TeamRow = Schema.Struct({ ...storedFields(Team.fields), orgId: OrgId, updatedAt: Schema.Date })
export type TeamRow = typeof TeamRow.Type

/** A row of `team_members`: a subject belongs to a team at most once. */
export const TeamMemberRow = Schema.Struct({
  teamId: TeamId,
  ...storedFields(Struct.omit(TeamMember.fields, ["email", "displayName"]))
})
export type TeamMemberRow = typeof TeamMemberRow.Type

/** A team membership as the repository answers it: with its subject's profile, joined in the same statement. */
export const TeamMemberListing = Schema.Struct({ ...TeamMemberRow.fields, ...SubjectProfile.fields })
export type TeamMemberListing = typeof TeamMemberListing.Type

/** A row of `team_role_grants`: one role a team holds, named by (team, role, scope kind, scope ref). */
export const TeamGrantRow = Schema.Struct({
  /** A UUIDv7 minted by the server (never on the wire: a grant is named by its tuple). */
  id: Schema.String,
  ...storedFields(TeamRoleGrant.fields),
  createdAt: Schema.Date
})
export type TeamGrantRow = typeof TeamGrantRow.Type

/** What names a grant: everything but its id and creation time. */
export const TeamGrantTuple = Schema.Struct(Struct.omit(TeamGrantRow.fields, ["id", "createdAt"]))
export type TeamGrantTuple = typeof TeamGrantTuple.Type

/** One team of one workspace (a team of another workspace is not found). */
export const TeamKey = Schema.Struct({ orgId: OrgId, teamId: TeamId })
export type TeamKey = typeof TeamKey.Type

/** A page of the workspace's teams. */
export const TeamsPage = Schema.Struct({ orgId: OrgId, ...pageFields })
export type TeamsPage = typeof TeamsPage.Type

/** The taken slugs of the `base` family in a workspace. */
export const TeamSlugFamily = Schema.Struct({ orgId: OrgId, base: Schema.String })
export type TeamSlugFamily = typeof TeamSlugFamily.Type

/** A team's new name and/or slug (undefined: as it is), stamped `updatedAt`. */
export const TeamUpdate = Schema.Struct({
  ...TeamKey.fields,
  name: Schema.optional(Schema.String),
  slug: Schema.optional(Schema.String),
  updatedAt: Schema.Date
})
export type TeamUpdate = typeof TeamUpdate.Type

/** A page of one team's members, keyed by subject id. */
export const TeamMembersPage = Schema.Struct({ teamId: TeamId, ...pageFields })
export type TeamMembersPage = typeof TeamMembersPage.Type

/** One subject's membership of one team. */
export const TeamMemberKey = Schema.Struct(Struct.pick(TeamMemberRow.fields, ["teamId", "subjectType", "subjectId"]))
export type TeamMemberKey = typeof TeamMemberKey.Type

/** A page of the grants of the workspace's teams, or of one of them. */
export const TeamGrantsPage = Schema.Struct({ orgId: OrgId, teamId: Schema.optional(TeamId), ...pageFields })
export type TeamGrantsPage = typeof TeamGrantsPage.Type
