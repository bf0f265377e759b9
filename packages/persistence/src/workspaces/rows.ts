/** The stored shapes of the workspaces area, shared by its three repositories (which read each other's tables). */
import { Role } from "@cp/domain/access"
import { MemberId, OrgId, WorkspaceRef } from "@cp/domain/ids"
import { Schema } from "effect"

/** Who a member or a role binding is about. */
export const SubjectType = Schema.Literals(["user", "service_principal"])
export type SubjectType = typeof SubjectType.Type

/** What a role binding covers; `project` bindings name their project in `scopeRef`. */
export const ScopeKind = Schema.Literals(["organization", "project", "account"])
export type ScopeKind = typeof ScopeKind.Type

/** The only member status any flow sets today; reads filter on `active`, so a new status needs no query change. */
export const MemberStatus = Schema.Literals(["active"])
export type MemberStatus = typeof MemberStatus.Type

/** A row of `organizations`: an account root or one of its child workspaces. */
export const OrganizationRow = Schema.Struct({
  id: OrgId,
  /** The immutable public Workspace ID. */
  publicId: WorkspaceRef,
  name: Schema.String,
  slug: Schema.String,
  kind: Schema.String,
  /** The `ws_` id of the account root; equals `publicId` exactly when `isAccountRoot`. */
  accountId: WorkspaceRef,
  isAccountRoot: Schema.Boolean,
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type OrganizationRow = typeof OrganizationRow.Type

/** An organization inside a JSON object, where the timestamps arrive as epoch milliseconds. */
export const OrganizationFromJson = Schema.Struct({
  ...OrganizationRow.fields,
  createdAt: Schema.DateFromMillis,
  updatedAt: Schema.DateFromMillis
})

/** A row of `members`: a subject's membership of one workspace. */
export const MemberRow = Schema.Struct({
  id: MemberId,
  orgId: OrgId,
  subjectType: SubjectType,
  subjectId: Schema.String,
  status: MemberStatus,
  joinedAt: Schema.Date
})
export type MemberRow = typeof MemberRow.Type

/** A row of `role_bindings`: one role a subject holds, the input of every access decision. */
export const RoleBindingRow = Schema.Struct({
  /** A UUIDv7 minted by the server. */
  id: Schema.String,
  /** The workspace the binding sits on (an account root's bindings cascade to its children). */
  orgId: OrgId,
  subjectType: SubjectType,
  subjectId: Schema.String,
  role: Role,
  scopeKind: ScopeKind,
  /** The project id of a `project` binding; null otherwise. */
  scopeRef: Schema.NullOr(Schema.String),
  createdAt: Schema.Date
})
export type RoleBindingRow = typeof RoleBindingRow.Type

/** A role binding inside a JSON aggregate, where the timestamp arrives as epoch milliseconds. */
export const RoleBindingFromJson = Schema.Struct({ ...RoleBindingRow.fields, createdAt: Schema.DateFromMillis })
