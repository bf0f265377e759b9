/** Branded identifiers: every id on the wire is a prefix plus a ULID (or a UUID where the spec says so). */
import { Schema } from "effect"

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
  servicePrincipal: "sp_",
  setting: "stg_",
  featureFlag: "flg_",
  secret: "sec_",
  agentConnection: "apc_",
  mailMessage: "msg_",
  webhookEndpoint: "whe_",
  webhookSubscription: "whs_",
  deliveryAttempt: "whd_",
  quota: "quo_",
  cliLink: "wsl_",
  objectUpload: "upl_"
} as const

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"

// The `u` flag lets the pattern reach the OpenAPI document (Effect exports only unicode-flagged patterns).
/** A prefixed id: the prefix and 26 ULID characters, described and patterned for the reference. */
export const prefixed = (prefix: string) =>
  Schema.String.annotate({ description: `\`${prefix}\` and 26 ULID characters` }).check(
    Schema.isPattern(new RegExp(`^${prefix}${ULID}$`, "u"))
  )

export const UserId = prefixed(IdPrefix.user).pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type
export const SessionId = prefixed(IdPrefix.session).pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type
export const ChallengeId = prefixed(IdPrefix.challenge).pipe(Schema.brand("ChallengeId"))
export type ChallengeId = typeof ChallengeId.Type
export const OrgId = prefixed(IdPrefix.org).pipe(Schema.brand("OrgId"))
export type OrgId = typeof OrgId.Type
export const WorkspaceRef = prefixed(IdPrefix.workspace).pipe(Schema.brand("WorkspaceRef"))
export type WorkspaceRef = typeof WorkspaceRef.Type
export const MemberId = prefixed(IdPrefix.member).pipe(Schema.brand("MemberId"))
export type MemberId = typeof MemberId.Type
export const InvitationId = prefixed(IdPrefix.invitation).pipe(Schema.brand("InvitationId"))
export type InvitationId = typeof InvitationId.Type
export const TeamId = prefixed(IdPrefix.team).pipe(Schema.brand("TeamId"))
export type TeamId = typeof TeamId.Type
export const ProjectId = prefixed(IdPrefix.project).pipe(Schema.brand("ProjectId"))
export type ProjectId = typeof ProjectId.Type
export const EnvironmentId = prefixed(IdPrefix.environment).pipe(Schema.brand("EnvironmentId"))
export type EnvironmentId = typeof EnvironmentId.Type
export const ServicePrincipalId = prefixed(IdPrefix.servicePrincipal).pipe(Schema.brand("ServicePrincipalId"))
export type ServicePrincipalId = typeof ServicePrincipalId.Type
export const SettingId = prefixed(IdPrefix.setting).pipe(Schema.brand("SettingId"))
export type SettingId = typeof SettingId.Type
export const FeatureFlagId = prefixed(IdPrefix.featureFlag).pipe(Schema.brand("FeatureFlagId"))
export type FeatureFlagId = typeof FeatureFlagId.Type
export const SecretId = prefixed(IdPrefix.secret).pipe(Schema.brand("SecretId"))
export type SecretId = typeof SecretId.Type
export const QuotaId = prefixed(IdPrefix.quota).pipe(Schema.brand("QuotaId"))
export type QuotaId = typeof QuotaId.Type

export const WebhookEndpointId = prefixed(IdPrefix.webhookEndpoint).pipe(Schema.brand("WebhookEndpointId"))
export type WebhookEndpointId = typeof WebhookEndpointId.Type
export const WebhookSubscriptionId = prefixed(IdPrefix.webhookSubscription).pipe(
  Schema.brand("WebhookSubscriptionId")
)
export type WebhookSubscriptionId = typeof WebhookSubscriptionId.Type
export const DeliveryAttemptId = prefixed(IdPrefix.deliveryAttempt).pipe(Schema.brand("DeliveryAttemptId"))
export type DeliveryAttemptId = typeof DeliveryAttemptId.Type

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/u

const uuid = () => Schema.String.annotate({ description: "A lowercase UUID" }).check(Schema.isPattern(UUID_PATTERN))

export const EventId = uuid().pipe(Schema.brand("EventId"))
export type EventId = typeof EventId.Type
export const AuditEntryId = uuid().pipe(Schema.brand("AuditEntryId"))
export type AuditEntryId = typeof AuditEntryId.Type
export const ApiKeyId = uuid().pipe(Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type
export const UsageRecordId = uuid().pipe(Schema.brand("UsageRecordId"))
export type UsageRecordId = typeof UsageRecordId.Type
export const RollupId = uuid().pipe(Schema.brand("RollupId"))
export type RollupId = typeof RollupId.Type
export const QuotaViolationId = uuid().pipe(Schema.brand("QuotaViolationId"))
export type QuotaViolationId = typeof QuotaViolationId.Type

const isUserId = Schema.is(UserId)
const isServicePrincipalId = Schema.is(ServicePrincipalId)

/** Whose id this is, by its prefix and shape: a user's, a service principal's, or neither (undefined). */
export const subjectTypeOf = (id: string): "user" | "service_principal" | undefined =>
  isUserId(id) ? "user" : isServicePrincipalId(id) ? "service_principal" : undefined

/** An agent provider connection (`apc_` + ULID), or a synthetic platform row (`apc_platform_<provider>_<slug>`). */
export const AgentConnectionId = Schema.String.annotate({
  description: "`apc_` and 26 ULID characters, or `apc_platform_<provider>_<slug>` for a platform row"
}).check(
  Schema.isPattern(new RegExp(`^${IdPrefix.agentConnection}(${ULID}|platform_[a-z]+_[a-z0-9][a-z0-9-]{0,62})$`, "u"))
).pipe(Schema.brand("AgentConnectionId"))
export type AgentConnectionId = typeof AgentConnectionId.Type

export const UploadId = prefixed(IdPrefix.objectUpload).pipe(Schema.brand("UploadId"))
export type UploadId = typeof UploadId.Type
