/**
 * The permission catalog and the role matrix (contract §5), written once as data. Services, the
 * permission middleware and effective-access all read these tables.
 */
import { Schema } from "effect"
import { TeamId } from "./ids.ts"

/** Permissions that apply to a workspace as a whole. */
export const workspacePermissions = [
  "organization.read",
  "organization.update",
  "organization.member.list",
  "organization.member.update_role",
  "organization.member.remove",
  "organization.invitation.list",
  "organization.invitation.create",
  "organization.invitation.revoke",
  "organization.api_key.create",
  "organization.api_key.list",
  "organization.api_key.revoke",
  "team.create",
  "team.update",
  "team.delete",
  "team.member.add",
  "team.member.remove",
  "team.role.grant",
  "team.role.revoke",
  "project.list",
  "project.create",
  "organization.config.read",
  "organization.config.write",
  "organization.metering.read",
  "organization.metering.write",
  "organization.quota.manage",
  "billing.read",
  "billing.manage",
  "organization.integration.read",
  "organization.integration.connect",
  "organization.integration.manage",
  "organization.integration.token.issue",
  "org.cli.link",
  "organization.agent.provider.read",
  "organization.agent.provider.write",
  "organization.webhook.read",
  "organization.webhook.write",
  "audit.read"
] as const

/** Permissions that can also be held within one project (by a project role). */
export const projectPermissions = [
  "project.read",
  "project.delete",
  "environment.read",
  "environment.create",
  "environment.delete",
  "project.config.read",
  "project.config.write",
  "project.webhook.read",
  "project.webhook.write",
  "project.repo_link.write",
  "state.run.read",
  "state.run.write",
  "state.object.read",
  "state.object.write",
  "secret.value.use",
  "catalog.read",
  "catalog.publish"
] as const

export const permissions = [...workspacePermissions, ...projectPermissions] as const
export const Permission = Schema.Literals(permissions)
export type Permission = typeof Permission.Type

export const workspaceRoles = ["owner", "admin", "builder", "viewer", "billing_admin"] as const
export const projectRoles = ["project_admin", "project_builder", "project_viewer"] as const
export const WorkspaceRole = Schema.Literals(workspaceRoles)
export type WorkspaceRole = typeof WorkspaceRole.Type
export const ProjectRole = Schema.Literals(projectRoles)
export type ProjectRole = typeof ProjectRole.Type
export const Role = Schema.Literals([...workspaceRoles, ...projectRoles])
export type Role = typeof Role.Type

export const isProjectRole = (role: Role): role is ProjectRole => (projectRoles as ReadonlyArray<string>).includes(role)

const builderReads: ReadonlyArray<Permission> = [
  "organization.read",
  "organization.member.list",
  "organization.invitation.list",
  "organization.api_key.list",
  "project.list",
  "project.read",
  "environment.read",
  "organization.config.read",
  "project.config.read",
  "organization.metering.read",
  "billing.read",
  "organization.integration.read",
  "organization.agent.provider.read",
  "organization.webhook.read",
  "project.webhook.read",
  "state.run.read",
  "state.object.read",
  "catalog.read"
]

const builderProjectWrites: ReadonlyArray<Permission> = [
  "environment.create",
  "environment.delete",
  "project.delete",
  "project.config.write",
  "project.webhook.write",
  "project.repo_link.write",
  "state.run.write",
  "state.object.write",
  "secret.value.use",
  "catalog.publish"
]

const viewerReads: ReadonlyArray<Permission> = builderReads.filter((p) =>
  p !== "organization.invitation.list" && p !== "organization.api_key.list" && p !== "billing.read"
)

const projectReadsOf = (granted: ReadonlyArray<Permission>) =>
  granted.filter((p) => (projectPermissions as ReadonlyArray<string>).includes(p))

/** What each role holds. Project roles hold their permissions only within their project. */
export const rolePermissions: Record<Role, ReadonlySet<Permission>> = {
  owner: new Set(permissions),
  admin: new Set(permissions.filter((p) => p !== "billing.manage")),
  builder: new Set([
    ...builderReads,
    ...builderProjectWrites,
    "project.create",
    "organization.config.write",
    "organization.metering.write",
    "organization.webhook.write",
    "org.cli.link"
  ]),
  viewer: new Set(viewerReads),
  billing_admin: new Set(["organization.read", "billing.read", "billing.manage", "organization.metering.read"]),
  project_admin: new Set(projectPermissions),
  project_builder: new Set([...projectReadsOf(builderReads), ...builderProjectWrites]),
  project_viewer: new Set(projectReadsOf(viewerReads))
}

export const ViaKind = Schema.Literals(["direct", "team", "account_cascade"])
export type ViaKind = typeof ViaKind.Type

/** Where a role applies: a whole account (its root and every child), one workspace, or one project. */
export const ScopeKind = Schema.Literals(["account", "organization", "project"])
export type ScopeKind = typeof ScopeKind.Type

/**
 * Why a permission is held: the binding that grants it. `teamId` is present exactly when the role is held
 * through a team's grant (`kind: "team"`, or `account_cascade` of a team grant on the account root).
 */
export const Via = Schema.Struct({
  kind: ViaKind,
  role: Role,
  scopeKind: ScopeKind,
  scopeRef: Schema.NullOr(Schema.String),
  teamId: Schema.optionalKey(TeamId)
})
export type Via = typeof Via.Type

/**
 * A role the subject holds, where it holds it, and how it came to hold it: `direct` (a binding of its own), `team`
 * (a grant of a team it belongs to; `teamId` names the team) or `account_cascade` (held on the account root).
 */
export type Grant = Via & {
  /**
   * When present, the grant confers only these of its role's permissions (a narrowed grant; no role binding makes one
   * today: workflow actors hold the whole `project_builder` set within their project).
   */
  readonly only?: ReadonlySet<Permission>
}

export const PermissionDecision = Schema.Struct({
  action: Permission,
  allow: Schema.Boolean,
  via: Schema.NullOr(Via)
})
export type PermissionDecision = typeof PermissionDecision.Type
