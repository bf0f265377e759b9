/**
 * Members and invitations (spec: Member, invitation; "Members and invitations" endpoints; invitation states).
 * A member is a subject's membership of one workspace, its roles are its role bindings there; an invitation
 * offers a workspace role to an email address until it is accepted, revoked or expires (7 days).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Role, WorkspaceRole } from "./access.ts"
import { Conflict, Forbidden, NotFound, PreconditionFailed } from "./errors.ts"
import { Email } from "./identity.ts"
import { InvitationId, MemberId, OrgId, UserId, WorkspaceRef } from "./ids.ts"
import { doc } from "./reference.ts"
import {
  Authentication,
  Authorization,
  PageQuery,
  reachesHiddenWorkspace,
  requires,
  WorkspaceAuthentication,
  WorkspaceAuthorization
} from "./security.ts"
import { Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

export const MemberSubjectType = Schema.Literals(["user", "service_principal"])

/** One role a member holds in the workspace, from its role bindings there. */
export const MemberRole = Schema.Struct({
  role: Role,
  scopeKind: Schema.Literals(["account", "organization", "project"])
})

/**
 * Who a subject is, for people reading a list of members (beyond the spec's fields; see docs/decisions.md): read with
 * the member in the same query, from the user's profile or the service principal.
 */
export const SubjectProfile = {
  email: Schema.NullOr(Schema.String).annotate({
    description: "The user's email address; null for a service principal or a subject no longer known"
  }),
  displayName: Schema.NullOr(Schema.String).annotate({
    description: "The user's display name (null when they set none) or the service principal's (`API Key: <label>`); " +
      "null for a subject no longer known"
  })
}

export const Member = Schema.Struct({
  id: MemberId,
  subjectType: MemberSubjectType,
  subjectId: Schema.String,
  status: Schema.String,
  joinedAt: Timestamp,
  roles: Schema.Array(MemberRole),
  ...SubjectProfile
})
export type Member = typeof Member.Type

/** `expired` is never stored: a pending invitation reads as expired from the instant its `expiresAt` passes. */
export const InvitationStatus = Schema.Literals(["pending", "accepted", "revoked", "expired"])
export type InvitationStatus = typeof InvitationStatus.Type

export const Invitation = Schema.Struct({
  id: InvitationId,
  email: Schema.String,
  role: WorkspaceRole,
  status: InvitationStatus,
  invitedBy: UserId,
  expiresAt: Timestamp,
  createdAt: Timestamp,
  acceptedAt: Schema.NullOr(Timestamp),
  revokedAt: Schema.NullOr(Timestamp)
})
export type Invitation = typeof Invitation.Type

/** The workspace an invitation is for, as its recipient sees it before joining. */
export const InvitationOrg = Schema.Struct({
  id: OrgId,
  name: Schema.String,
  slug: Schema.String,
  workspaceRef: WorkspaceRef,
  status: Schema.String
})

/** An entry of `GET /v1/me/invitations`: the invitation without its state fields, plus its workspace. */
export const MyInvitation = Schema.Struct({
  id: InvitationId,
  email: Schema.String,
  role: WorkspaceRole,
  invitedBy: UserId,
  expiresAt: Timestamp,
  createdAt: Timestamp,
  org: InvitationOrg
})
export type MyInvitation = typeof MyInvitation.Type

/** The membership an accepted invitation created. */
export const InvitationMembership = Schema.Struct({
  id: MemberId,
  role: WorkspaceRole,
  joinedAt: Timestamp,
  status: Schema.String
})

/** The token itself, returned only in development and test mode (contract §4). */
export const InvitationDelivery = Schema.Struct({ mode: Schema.Literal("local_debug"), token: Schema.String })

export const InvitationToken = Text.check(Schema.isMinLength(1), Schema.isMaxLength(512))

/** The answer of both accept routes: the accepted invitation and the membership it created. */
export const AcceptedInvitation = { invitation: Invitation, membership: InvitationMembership }
export type AcceptedInvitation = Schema.Struct.Type<typeof AcceptedInvitation>

const orgParams = { orgId: OrgRef }

export class MembersApi extends HttpApiGroup.make("members")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/members", {
      params: orgParams,
      query: PageQuery,
      success: Page({ members: Schema.Array(Member) })
    }).annotateMerge(doc("List members", "Users and service principals with a role in this workspace.")).annotateMerge(
      requires.permission("organization.member.list")
    ),
    HttpApiEndpoint.patch("updateRole", "/v1/organizations/:orgId/members/:memberId", {
      params: { ...orgParams, memberId: MemberId },
      payload: Schema.Struct({ role: WorkspaceRole }),
      success: Envelope({ member: Member }),
      error: [Forbidden, NotFound, PreconditionFailed]
    }).annotateMerge(doc("Change a member's role", "The last owner cannot be demoted.")).annotateMerge(
      requires.permission("organization.member.update_role")
    ),
    HttpApiEndpoint.delete("remove", "/v1/organizations/:orgId/members/:memberId", {
      params: { ...orgParams, memberId: MemberId },
      success: Envelope({ deleted: Schema.Literal(true) }),
      error: [Forbidden, NotFound, PreconditionFailed]
    }).annotateMerge(doc("Remove a member", "The last owner cannot be removed.")).annotateMerge(
      requires.permission("organization.member.remove")
    )
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Members", description: "Workspace members and their roles" }))
{}

/** A workspace's invitations and the caller's own (`/v1/me/…`): each endpoint names its middleware. */
export class InvitationsApi extends HttpApiGroup.make("invitations")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/invitations", {
      params: orgParams,
      query: {
        ...PageQuery,
        status: Schema.optionalKey(InvitationStatus.annotate({ description: "Only invitations in this state" }))
      },
      success: Page({ invitations: Schema.Array(Invitation) })
    })
      .annotateMerge(doc("List invitations", "Pending and past invitations of this workspace.")).annotateMerge(
        requires.permission("organization.invitation.list")
      )
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication),
    HttpApiEndpoint.post("create", "/v1/organizations/:orgId/invitations", {
      params: orgParams,
      payload: Schema.Struct({ email: Email, role: WorkspaceRole }),
      success: Envelope({ invitation: Invitation, delivery: Schema.optionalKey(InvitationDelivery) }),
      error: [Forbidden, Conflict]
    })
      .annotateMerge(
        doc(
          "Invite someone",
          "Emails an invitation with a role; it is accepted with its token or from the invitee's own list."
        )
      ).annotateMerge(requires.permission("organization.invitation.create"))
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication),
    HttpApiEndpoint.delete("revoke", "/v1/organizations/:orgId/invitations/:invitationId", {
      params: { ...orgParams, invitationId: InvitationId },
      success: Envelope({ invitation: Invitation }),
      error: [NotFound, PreconditionFailed]
    })
      .annotateMerge(doc("Revoke an invitation", "A revoked invitation can no longer be accepted.")).annotateMerge(
        requires.permission("organization.invitation.revoke")
      )
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication),
    // The invitee is not a member yet: the edge resolves this one workspace route for any signed-in caller
    // (`reachesHiddenWorkspace`) and the token decides.
    HttpApiEndpoint.post("accept", "/v1/organizations/:orgId/invitations/accept", {
      params: orgParams,
      payload: Schema.Struct({ token: InvitationToken }),
      success: Envelope(AcceptedInvitation),
      error: [Forbidden, NotFound, PreconditionFailed, Conflict]
    })
      .annotateMerge(
        doc(
          "Accept an invitation by token",
          "The signed-in invitee becomes a member with the invited role, even before they can see the workspace."
        )
      ).annotateMerge(requires.authenticated)
      .annotateMerge(reachesHiddenWorkspace)
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication),
    HttpApiEndpoint.get("mine", "/v1/me/invitations", {
      query: PageQuery,
      success: Page({ invitations: Schema.Array(MyInvitation) })
    })
      .annotateMerge(doc("List your invitations", "Pending invitations addressed to the signed-in user's email."))
      .annotateMerge(requires.authenticated)
      .middleware(Authorization)
      .middleware(Authentication),
    HttpApiEndpoint.post("acceptMine", "/v1/me/invitations/:invitationId/accept", {
      params: { invitationId: InvitationId },
      success: Envelope(AcceptedInvitation),
      error: [Forbidden, NotFound, PreconditionFailed, Conflict]
    })
      .annotateMerge(
        doc("Accept one of your invitations", "Accepts an invitation addressed to the signed-in user's email.")
      ).annotateMerge(requires.authenticated)
      .middleware(Authorization)
      .middleware(Authentication)
  )
  .annotateMerge(OpenApi.annotations({ title: "Invitations", description: "Invitations to join a workspace" }))
{}
