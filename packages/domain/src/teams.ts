/**
 * Teams (spec: Member, invitation, team; "Teams" endpoints): named groups of a workspace's members. A role granted
 * to a team (`/team-roles`) is held by every member of the team, with `via.kind: "team"` in effective access.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Role, ScopeKind } from "./access.ts"
import { Conflict, Forbidden, NotFound } from "./errors.ts"
import { ProjectId, TeamId } from "./ids.ts"
import { SubjectProfile } from "./members.ts"
import { describedText, doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { Name, OrgRef, Slug } from "./workspaces.ts"

/** A team exists (`active`) until it is deleted; a deleted team is gone (its GET answers 404). */
export const TeamStatus = Schema.Literals(["active"])

export const Team = Schema.Struct({
  id: TeamId,
  name: Schema.String,
  slug: Schema.String,
  status: TeamStatus,
  createdAt: Timestamp
})
export type Team = typeof Team.Type

/** Who a team member is: a user (`usr_…`, the default) or a service principal (`sp_…`). */
export const TeamSubjectType = Schema.Literals(["user", "service_principal"])
export type TeamSubjectType = typeof TeamSubjectType.Type

export const TeamMember = Schema.Struct({
  subjectId: Schema.String,
  subjectType: TeamSubjectType,
  status: Schema.Literals(["active"]),
  createdAt: Timestamp,
  ...SubjectProfile
})
export type TeamMember = typeof TeamMember.Type

/** A role a team holds; `scopeRef` is the project of a `project` grant and null otherwise. */
export const TeamRoleGrant = Schema.Struct({
  teamId: TeamId,
  role: Role,
  scopeKind: ScopeKind,
  scopeRef: Schema.NullOr(Schema.String)
})
export type TeamRoleGrant = typeof TeamRoleGrant.Type

/**
 * The tuple that names a grant, in the body of both POST and DELETE `/team-roles`. The rules across fields
 * (`scopeRef` exactly for `project`, project roles only on projects, `account` only on an account root) are the
 * service's, answered as 422 on the field at fault.
 */
export const TeamRoleTuple = Schema.Struct({
  teamId: TeamId,
  role: Role,
  scopeKind: ScopeKind,
  scopeRef: Schema.optionalKey(Schema.NullOr(ProjectId))
})
export type TeamRoleTuple = typeof TeamRoleTuple.Type

export const TeamInput = Schema.Struct({ name: Name, slug: Schema.optionalKey(Slug) })
export const TeamPatch = Schema.Struct({ name: Schema.optionalKey(Name), slug: Schema.optionalKey(Slug) })

export const TeamMemberInput = Schema.Struct({
  subjectId: Text.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  subjectType: Schema.optionalKey(TeamSubjectType)
})

/** What a DELETE answers when nothing of the resource remains (contract §4). */
const Deleted = { deleted: Schema.Literal(true) }

const orgParams = { orgId: OrgRef }
const teamParams = { ...orgParams, teamId: TeamId }

export class TeamsApi extends HttpApiGroup.make("teams")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/teams", {
      params: orgParams,
      query: PageQuery,
      success: Page({ teams: Schema.Array(Team) })
    }).annotateMerge(doc("List teams")).annotateMerge(requires.permission("organization.member.list")),
    HttpApiEndpoint.post("create", "/v1/organizations/:orgId/teams", {
      params: orgParams,
      payload: TeamInput,
      success: Envelope({ team: Team }),
      error: Conflict
    }).annotateMerge(doc("Create a team")).annotateMerge(requires.permission("team.create")),
    HttpApiEndpoint.get("get", "/v1/organizations/:orgId/teams/:teamId", {
      params: teamParams,
      success: Envelope({ team: Team }),
      error: NotFound
    }).annotateMerge(doc("Get a team")).annotateMerge(requires.permission("organization.member.list")),
    HttpApiEndpoint.patch("update", "/v1/organizations/:orgId/teams/:teamId", {
      params: teamParams,
      payload: TeamPatch,
      success: Envelope({ team: Team }),
      error: [NotFound, Conflict]
    }).annotateMerge(doc("Update a team")).annotateMerge(requires.permission("team.update")),
    HttpApiEndpoint.delete("delete", "/v1/organizations/:orgId/teams/:teamId", {
      params: teamParams,
      success: Envelope(Deleted),
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Delete a team", "Its members lose the access the team's grants gave them.")).annotateMerge(
      requires.permission("team.delete")
    ),
    HttpApiEndpoint.get("listMembers", "/v1/organizations/:orgId/teams/:teamId/members", {
      params: teamParams,
      query: PageQuery,
      success: Page({ members: Schema.Array(TeamMember) }),
      error: NotFound
    }).annotateMerge(doc("List a team's members")).annotateMerge(requires.permission("organization.member.list")),
    HttpApiEndpoint.post("addMember", "/v1/organizations/:orgId/teams/:teamId/members", {
      params: teamParams,
      payload: TeamMemberInput,
      success: Envelope({ member: TeamMember }),
      error: [NotFound, Conflict, Forbidden]
    }).annotateMerge(doc("Add a team member", "A member of the workspace; the team's grants then apply to them."))
      .annotateMerge(requires.permission("team.member.add")),
    HttpApiEndpoint.delete("removeMember", "/v1/organizations/:orgId/teams/:teamId/members/:subjectId", {
      params: {
        ...teamParams,
        subjectId: describedText("The member to remove: a `usr_` or `sp_` id")
      },
      success: Envelope(Deleted),
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Remove a team member")).annotateMerge(requires.permission("team.member.remove")),
    HttpApiEndpoint.get("listGrants", "/v1/organizations/:orgId/team-roles", {
      params: orgParams,
      query: { ...PageQuery, teamId: Schema.optionalKey(TeamId) },
      success: Page({ grants: Schema.Array(TeamRoleGrant) }),
      error: NotFound
    }).annotateMerge(doc("List team role grants", "The roles teams hold in this workspace and its projects."))
      .annotateMerge(requires.permission("organization.member.list")),
    HttpApiEndpoint.post("grant", "/v1/organizations/:orgId/team-roles", {
      params: orgParams,
      payload: TeamRoleTuple,
      success: Envelope({ grant: TeamRoleGrant }),
      error: [NotFound, Conflict, Forbidden]
    }).annotateMerge(doc("Grant a role to a team", "Every member of the team holds the role (provenance `team`)."))
      .annotateMerge(requires.permission("team.role.grant")),
    // The grant is named by its tuple in the body: there is no grant id in the path (spec).
    HttpApiEndpoint.delete("revoke", "/v1/organizations/:orgId/team-roles", {
      params: orgParams,
      payload: TeamRoleTuple,
      success: Envelope(Deleted),
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Revoke a team's role")).annotateMerge(requires.permission("team.role.revoke"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Teams", description: "Teams, their members and their role grants" }))
{}
