/** The stored shapes of the members area (memberships and invitations) and its requests. */
import { InvitationId, MemberId, OrgId, UserId, WorkspaceRef } from "@cp/domain/ids"
import { Invitation, Member } from "@cp/domain/members"
import { Schema, Struct } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"
import { SubjectProfile } from "../subjects.ts"

/** The only member status any flow sets today; reads filter on `active`, so a new status needs no query change. */
export const MemberStatus = Schema.Literals(["active"])
export type MemberStatus = typeof MemberStatus.Type

/** A row of `members`: a subject's membership of one workspace (its roles are its role bindings). */
export const MemberRow = Schema.Struct({
  ...storedFields(Struct.omit(Member.fields, ["roles", "email", "displayName"])),
  orgId: OrgId,
  status: MemberStatus
})
export type MemberRow = typeof MemberRow.Type

/** A membership as lists and lookups read it: with its subject's profile, joined in the same statement. */
export const MemberListing = Schema.Struct({ ...MemberRow.fields, ...SubjectProfile.fields })
export type MemberListing = typeof MemberListing.Type

/** One member of one workspace (a member of another workspace is not found). */
export const MemberKey = Schema.Struct({ orgId: OrgId, id: MemberId })
export type MemberKey = typeof MemberKey.Type

/** A page of a workspace's members, keyed by (joinedAt, id). */
export const MembersPage = Schema.Struct({ orgId: OrgId, ...pageFields })
export type MembersPage = typeof MembersPage.Type

/** The states an invitation is stored in; `expired` is derived from `expiresAt` when read. */
export const StoredInvitationStatus = Schema.Literals(["pending", "accepted", "revoked"])
export type StoredInvitationStatus = typeof StoredInvitationStatus.Type

/** What a list may filter on: the stored states, with `pending` meaning unexpired, plus `expired`. */
export const InvitationStatusFilter = Schema.Literals(["pending", "accepted", "revoked", "expired"])
export type InvitationStatusFilter = typeof InvitationStatusFilter.Type

/** A row of `invitations`: the email is normalized (trimmed, lower-cased) by the caller. */
export const InvitationRow = Schema.Struct({
  ...storedFields(Invitation.fields),
  orgId: OrgId,
  status: StoredInvitationStatus,
  /** Only an HMAC of the token is kept, so a database dump reveals no usable token. */
  tokenHash: Schema.String,
  acceptedBy: Schema.NullOr(UserId)
})
export type InvitationRow = typeof InvitationRow.Type

/** The workspace of an invitation, as its recipient sees it. */
export interface InvitationOrgRow {
  readonly id: OrgId
  readonly name: string
  readonly slug: string
  readonly publicId: WorkspaceRef
}

/** An invitation with its workspace. */
export interface InvitationWithOrg {
  readonly invitation: InvitationRow
  readonly org: InvitationOrgRow
}

/** The pending, unexpired invitation of an email to a workspace, as of `now`. */
export const PendingInvitation = Schema.Struct({ orgId: OrgId, email: Schema.String, now: Schema.Date })
export type PendingInvitation = typeof PendingInvitation.Type

/** A page of a workspace's invitations, optionally of one status as of `now`, keyed by (createdAt, id). */
export const InvitationsPage = Schema.Struct({
  orgId: OrgId,
  now: Schema.Date,
  status: Schema.optionalKey(InvitationStatusFilter),
  ...pageFields
})
export type InvitationsPage = typeof InvitationsPage.Type

/** A page of the pending, unexpired invitations addressed to an email, in any workspace. */
export const PendingForEmailPage = Schema.Struct({ email: Schema.String, now: Schema.Date, ...pageFields })
export type PendingForEmailPage = typeof PendingForEmailPage.Type

/** Accepting an invitation by `userId` at `now`. */
export const InvitationAcceptance = Schema.Struct({ id: InvitationId, now: Schema.Date, userId: UserId })
export type InvitationAcceptance = typeof InvitationAcceptance.Type

/** Revoking an invitation at `now`. */
export const InvitationRevocation = Schema.Struct({ id: InvitationId, now: Schema.Date })
export type InvitationRevocation = typeof InvitationRevocation.Type
