/** Branded identifiers: every id on the wire is a prefix plus a ULID (or a UUID where the spec says so). */
import { Schema } from "effect"

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"

const prefixed = (prefix: string) => Schema.String.check(Schema.isPattern(new RegExp(`^${prefix}${ULID}$`)))

export const UserId = prefixed("usr_").pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type
export const SessionId = prefixed("ses_").pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type
export const ChallengeId = prefixed("chl_").pipe(Schema.brand("ChallengeId"))
export type ChallengeId = typeof ChallengeId.Type
export const OrgId = prefixed("org_").pipe(Schema.brand("OrgId"))
export type OrgId = typeof OrgId.Type
export const WorkspaceRef = prefixed("ws_").pipe(Schema.brand("WorkspaceRef"))
export type WorkspaceRef = typeof WorkspaceRef.Type
export const MemberId = prefixed("mem_").pipe(Schema.brand("MemberId"))
export type MemberId = typeof MemberId.Type
export const InvitationId = prefixed("inv_").pipe(Schema.brand("InvitationId"))
export type InvitationId = typeof InvitationId.Type
export const TeamId = prefixed("team_").pipe(Schema.brand("TeamId"))
export type TeamId = typeof TeamId.Type
export const ProjectId = prefixed("prj_").pipe(Schema.brand("ProjectId"))
export type ProjectId = typeof ProjectId.Type
export const EnvironmentId = prefixed("env_").pipe(Schema.brand("EnvironmentId"))
export type EnvironmentId = typeof EnvironmentId.Type
export const ServicePrincipalId = prefixed("sp_").pipe(Schema.brand("ServicePrincipalId"))
export type ServicePrincipalId = typeof ServicePrincipalId.Type

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const uuid = () => Schema.String.check(Schema.isPattern(UUID_PATTERN))

export const EventId = uuid().pipe(Schema.brand("EventId"))
export type EventId = typeof EventId.Type
export const AuditEntryId = uuid().pipe(Schema.brand("AuditEntryId"))
export type AuditEntryId = typeof AuditEntryId.Type
export const ApiKeyId = uuid().pipe(Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type

/** The prefixes, for code that mints ids. */
export const IdPrefix = {
  user: "usr_",
  session: "ses_",
  challenge: "chl_",
  org: "org_",
  workspace: "ws_",
  member: "mem_",
  invitation: "inv_",
  team: "team_",
  project: "prj_",
  environment: "env_",
  servicePrincipal: "sp_"
} as const
