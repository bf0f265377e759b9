/** The stored shapes of the workspaces area and its requests, shared by its repositories (which join each other). */
import { Role } from "@cp/domain/access"
import { OrgId, WorkspaceRef } from "@cp/domain/ids"
import { Organization } from "@cp/domain/workspaces"
import { Schema, Struct } from "effect"
import { storedFields } from "../stored.ts"

/** Who a member or a role binding is about. */
export const SubjectType = Schema.Literals(["user", "service_principal"])
export type SubjectType = typeof SubjectType.Type

/** What a role binding covers; `project` bindings name their project in `scopeRef`. */
export const ScopeKind = Schema.Literals(["organization", "project", "account"])
export type ScopeKind = typeof ScopeKind.Type

/** A row of `organizations`: an account root or one of its child workspaces. */
export const OrganizationRow = Schema.Struct({
  ...storedFields(Struct.omit(Organization.fields, ["workspaceRef"])),
  /** The immutable public Workspace ID (the API's `workspaceRef`). */
  publicId: WorkspaceRef,
  updatedAt: Schema.Date
})
export type OrganizationRow = typeof OrganizationRow.Type

/** An organization inside a JSON object, where the timestamps arrive as epoch milliseconds. */
export const OrganizationFromJson = Schema.Struct({
  ...OrganizationRow.fields,
  createdAt: Schema.DateFromMillis,
  updatedAt: Schema.DateFromMillis
})

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

/** A user or service principal, on no workspace in particular. */
export const Subject = Schema.Struct({ subjectType: SubjectType, subjectId: Schema.String })
export type Subject = typeof Subject.Type

/** A subject on one workspace: its membership, or the role bindings it holds there. */
export const SubjectInOrg = Schema.Struct({ orgId: OrgId, ...Subject.fields })
export type SubjectInOrg = typeof SubjectInOrg.Type

/** A subject on any of several workspaces (a child workspace and its account root, say). */
export const SubjectInOrgs = Schema.Struct({ orgIds: Schema.Array(OrgId), ...Subject.fields })
export type SubjectInOrgs = typeof SubjectInOrgs.Type

/** Several subjects (of either type) on one workspace. */
export const SubjectsInOrg = Schema.Struct({ orgId: OrgId, subjectIds: Schema.Array(Schema.String) })
export type SubjectsInOrg = typeof SubjectsInOrg.Type

/** One role on one workspace, whoever holds it. */
export const RoleInOrg = Schema.Struct({ orgId: OrgId, role: Role })
export type RoleInOrg = typeof RoleInOrg.Type

/** A workspace reference in any spelling (`org_…`, `ws_…` or a slug) and the subject to resolve it for. */
export const SubjectOnWorkspace = Schema.Struct({ ref: Schema.String, ...Subject.fields })
export type SubjectOnWorkspace = typeof SubjectOnWorkspace.Type
