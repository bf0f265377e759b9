/** The stored shapes of the webhooks area: endpoints with their sealed secrets, subscriptions, delivery attempts. */
import { DeliveryAttemptId, EventId, OrgId, ProjectId, WebhookEndpointId, WebhookSubscriptionId } from "@cp/domain/ids"
import { DeliveryAttempt, WebhookEndpoint, WebhookSubscription } from "@cp/domain/webhooks"
import { Schema } from "effect"
import { pageFields } from "../keyset.ts"
import { JsonObject } from "../platform/JsonObject.ts"
import { storedFields } from "../stored.ts"

/**
 * A row of `webhook_endpoints`: the API's fields plus the sealed current secret, the sealed previous one while its
 * rotation grace window lasts, the KEK id, and the streak of consecutive terminal delivery failures.
 */
export const EndpointRow = Schema.Struct({
  ...storedFields(WebhookEndpoint.fields),
  sealedSecret: Schema.String,
  previousSealedSecret: Schema.NullOr(Schema.String),
  previousSecretExpiresAt: Schema.NullOr(Schema.Date),
  kekId: Schema.String,
  consecutiveFailures: Schema.Int
})
export type EndpointRow = typeof EndpointRow.Type

export const SubscriptionRow = Schema.Struct(storedFields(WebhookSubscription.fields))
export type SubscriptionRow = typeof SubscriptionRow.Type

/**
 * A row of `webhook_deliveries`: the attempt as the API shows it, the exact body every try sends, when the next try is
 * due (null once terminal), the claim of the worker trying it now, and the trace of the request that wrote the event.
 */
export const DeliveryRow = Schema.Struct({
  ...storedFields(DeliveryAttempt.fields),
  body: Schema.String,
  dueAt: Schema.NullOr(Schema.Date),
  claimedUntil: Schema.NullOr(Schema.Date),
  claimToken: Schema.NullOr(Schema.String),
  traceContext: Schema.NullOr(JsonObject),
  responseBody: Schema.NullOr(Schema.String)
})
export type DeliveryRow = typeof DeliveryRow.Type

export const EndpointKey = Schema.Struct({ orgId: OrgId, endpointId: WebhookEndpointId })
export type EndpointKey = typeof EndpointKey.Type

/** A page of a workspace's endpoints: all of them, or one project's. */
export const EndpointsPage = Schema.Struct({ orgId: OrgId, projectId: Schema.NullOr(ProjectId), ...pageFields })
export type EndpointsPage = typeof EndpointsPage.Type

export const SubscriptionKey = Schema.Struct({ orgId: OrgId, subscriptionId: WebhookSubscriptionId })
export type SubscriptionKey = typeof SubscriptionKey.Type

export const SubscriptionsPage = Schema.Struct({ endpointId: WebhookEndpointId, ...pageFields })
export type SubscriptionsPage = typeof SubscriptionsPage.Type

/** What an event is matched against: its workspace, project and type. */
export const EventMatch = Schema.Struct({ orgId: OrgId, projectId: Schema.NullOr(ProjectId), eventType: Schema.String })
export type EventMatch = typeof EventMatch.Type

/** An enabled subscription whose endpoint's scope takes the event, and whose pattern may match it. */
export const SubscriptionMatch = Schema.Struct({
  subscriptionId: WebhookSubscriptionId,
  endpointId: WebhookEndpointId,
  eventType: Schema.String
})
export type SubscriptionMatch = typeof SubscriptionMatch.Type

export const AttemptKey = Schema.Struct({ orgId: OrgId, attemptId: DeliveryAttemptId })
export type AttemptKey = typeof AttemptKey.Type

export const AttemptsPage = Schema.Struct({ endpointId: WebhookEndpointId, ...pageFields })
export type AttemptsPage = typeof AttemptsPage.Type

/** A claim: up to `limit` rows due at `now`, held until `until` under `token`. */
export const Claim = Schema.Struct({ now: Schema.Date, until: Schema.Date, token: Schema.String, limit: Schema.Int })
export type Claim = typeof Claim.Type

/** The outcome of one try, written only while the claim `token` still holds the row. */
export const AttemptOutcome = Schema.Struct({
  id: DeliveryAttemptId,
  token: Schema.String,
  status: DeliveryAttempt.fields.status,
  attemptNumber: Schema.Int,
  httpStatusCode: Schema.NullOr(Schema.Int),
  failureReason: Schema.NullOr(Schema.String),
  nextRetryAt: Schema.NullOr(Schema.Date),
  completedAt: Schema.NullOr(Schema.Date),
  responseBody: Schema.NullOr(Schema.String),
  at: Schema.Date
})
export type AttemptOutcome = typeof AttemptOutcome.Type

/** The counts of an endpoint's attempts created since `since`, and its last success and failure. */
export const AttemptStats = Schema.Struct({
  success: Schema.Int,
  failed: Schema.Int,
  retrying: Schema.Int,
  pending: Schema.Int,
  lastSuccessAt: Schema.NullOr(Schema.Date),
  lastFailureAt: Schema.NullOr(Schema.Date)
})
export type AttemptStats = typeof AttemptStats.Type

export const EndpointSince = Schema.Struct({ endpointId: WebhookEndpointId, since: Schema.Date })
export type EndpointSince = typeof EndpointSince.Type

/** The streak change after a terminal outcome: reset on success, +1 on failure. */
export const StreakChange = Schema.Struct({ endpointId: WebhookEndpointId, success: Schema.Boolean, at: Schema.Date })
export type StreakChange = typeof StreakChange.Type

export const EventRef = Schema.Struct({ eventId: EventId })
