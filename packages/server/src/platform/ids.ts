/** Id minting: prefixed ULIDs (monotonic within a process) and UUIDv7 where the spec says UUID. */
import {
  AgentConnectionId,
  ApiKeyId,
  AuditEntryId,
  BillingCustomerId,
  ChallengeId,
  DeliveryAttemptId,
  EnvironmentId,
  EventId,
  FeatureFlagId,
  IdPrefix,
  InboundDeliveryId,
  IntegrationConnectionId,
  InvitationId,
  InvoiceId,
  LinkId,
  MemberId,
  OrgId,
  ProjectId,
  QuotaId,
  QuotaViolationId,
  RepoLinkId,
  SecretId,
  ServicePrincipalId,
  SessionId,
  SettingId,
  SubscriptionId,
  TeamId,
  UploadId,
  UsageRecordId,
  UserId,
  WebhookEndpointId,
  WebhookSubscriptionId,
  WorkspaceRef
} from "@cp/domain"
import { randomInt } from "node:crypto"
import { monotonicFactory } from "ulid"
import { v7 } from "uuid"
import { pooledRandom } from "./crypto.ts"

const nextUlid = monotonicFactory(pooledRandom)

/**
 * `prefix` + ULID; `now` comes from the caller's Clock so ids sort with the times tests set. For an id of a kind `mint`
 * does not name yet; a new kind belongs in `mint`.
 */
export const newId = <P extends string>(prefix: P, now: number): `${P}${string}` => `${prefix}${nextUlid(now)}`

const v7State = { msecs: Number.NEGATIVE_INFINITY, seq: 0 }

/**
 * A UUIDv7 that sorts in minting order within this process, even within one millisecond: the 31-bit
 * sequence is reseeded at random when the time moves forward and incremented otherwise.
 */
export const newUuid = (now: number): string => {
  if (now > v7State.msecs) {
    v7State.msecs = now
    v7State.seq = randomInt(0, 2 ** 30)
  } else {
    v7State.seq = (v7State.seq + 1) & 0x7fffffff
    if (v7State.seq === 0) v7State.msecs++
  }
  return v7({ msecs: v7State.msecs, seq: v7State.seq })
}

// The ids below are well formed by construction, so the brand's pattern check is skipped.
const trusted = { disableChecks: true } as const

/** Every id the server mints, one kind each, at `now` (the caller's Clock time in milliseconds). */
export const mint = {
  user: (now: number) => UserId.make(newId(IdPrefix.user, now), trusted),
  session: (now: number) => SessionId.make(newId(IdPrefix.session, now), trusted),
  challenge: (now: number) => ChallengeId.make(newId(IdPrefix.challenge, now), trusted),
  org: (now: number) => OrgId.make(newId(IdPrefix.org, now), trusted),
  workspaceRef: (now: number) => WorkspaceRef.make(newId(IdPrefix.workspace, now), trusted),
  member: (now: number) => MemberId.make(newId(IdPrefix.member, now), trusted),
  invitation: (now: number) => InvitationId.make(newId(IdPrefix.invitation, now), trusted),
  team: (now: number) => TeamId.make(newId(IdPrefix.team, now), trusted),
  project: (now: number) => ProjectId.make(newId(IdPrefix.project, now), trusted),
  environment: (now: number) => EnvironmentId.make(newId(IdPrefix.environment, now), trusted),
  servicePrincipal: (now: number) => ServicePrincipalId.make(newId(IdPrefix.servicePrincipal, now), trusted),
  setting: (now: number) => SettingId.make(newId(IdPrefix.setting, now), trusted),
  featureFlag: (now: number) => FeatureFlagId.make(newId(IdPrefix.featureFlag, now), trusted),
  agentConnection: (now: number) => AgentConnectionId.make(newId(IdPrefix.agentConnection, now), trusted),
  secret: (now: number) => SecretId.make(newId(IdPrefix.secret, now), trusted),
  quota: (now: number) => QuotaId.make(newId(IdPrefix.quota, now), trusted),
  mailMessage: (now: number) => newId(IdPrefix.mailMessage, now),
  webhookEndpoint: (now: number) => WebhookEndpointId.make(newId(IdPrefix.webhookEndpoint, now), trusted),
  webhookSubscription: (now: number) => WebhookSubscriptionId.make(newId(IdPrefix.webhookSubscription, now), trusted),
  deliveryAttempt: (now: number) => DeliveryAttemptId.make(newId(IdPrefix.deliveryAttempt, now), trusted),
  cliLink: (now: number) => LinkId.make(newId(IdPrefix.cliLink, now), trusted),
  integrationConnection: (now: number) =>
    IntegrationConnectionId.make(newId(IdPrefix.integrationConnection, now), trusted),
  inboundDelivery: (now: number) => InboundDeliveryId.make(newId(IdPrefix.inboundDelivery, now), trusted),
  repoLink: (now: number) => RepoLinkId.make(newId(IdPrefix.repoLink, now), trusted),
  objectUpload: (now: number) => UploadId.make(newId(IdPrefix.objectUpload, now), trusted),
  /** The chunk rows of one streamed body: never on the wire. */
  blob: (now: number) => newId("blb_", now),
  apiKey: (now: number) => ApiKeyId.make(newUuid(now), trusted),
  eventId: (now: number) => EventId.make(newUuid(now), trusted),
  auditEntryId: (now: number) => AuditEntryId.make(newUuid(now), trusted),
  usageRecord: (now: number) => UsageRecordId.make(newUuid(now), trusted),
  quotaViolation: (now: number) => QuotaViolationId.make(newUuid(now), trusted),
  billingCustomer: (now: number) => BillingCustomerId.make(newUuid(now), trusted),
  subscription: (now: number) => SubscriptionId.make(newUuid(now), trusted),
  invoice: (now: number) => InvoiceId.make(newUuid(now), trusted),
  /** Role bindings, team grants and security events: UUIDv7 rows never named on the wire by id. */
  roleBinding: (now: number) => newUuid(now),
  teamGrant: (now: number) => newUuid(now),
  securityEvent: (now: number) => newUuid(now)
}
