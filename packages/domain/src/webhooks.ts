/**
 * Outbound webhooks (spec: Webhooks, Events; `webhooks.md`): endpoints at workspace or project scope, their
 * subscriptions, delivery attempts, and the event catalog a subscription's `eventType` is checked against. Item
 * routes are always workspace scoped and check `project.webhook.*` when the endpoint belongs to a project.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, Forbidden, NotFound, PreconditionFailed } from "./errors.ts"
import { DeliveryAttemptId, EventId, OrgId, ProjectId, WebhookEndpointId, WebhookSubscriptionId } from "./ids.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/**
 * The event catalog (webhooks.md §1): every event type the service writes to the workspace log, with the resource key
 * its `data` carries and the fields of that resource. The delivered `data` is always
 * `{ orgId, projectId, environmentId, actor: { type, id }, ...fields }`; `docs/webhooks-events.md` renders this table.
 * An area that writes a new type adds it here, and only here.
 */
export const eventCatalog = {
  "organization.created": { resource: "organization", fields: ["organization"] },
  "membership.added": { resource: "member", fields: ["member", "invitationId?"] },
  "membership.updated": { resource: "member", fields: ["member", "previous"] },
  "membership.removed": { resource: "member", fields: ["member"] },
  "invite.created": { resource: "invitation", fields: ["invitation"] },
  "invite.accepted": { resource: "invitation", fields: ["invitation", "previous"] },
  "invite.revoked": { resource: "invitation", fields: ["invitation", "previous"] },
  "team.created": { resource: "team", fields: ["team"] },
  "team.updated": { resource: "team", fields: ["team", "previous"] },
  "team.deleted": { resource: "team", fields: ["team"] },
  "team.member.added": { resource: "team", fields: ["team", "member"] },
  "team.member.removed": { resource: "team", fields: ["team", "member"] },
  "team.role.granted": { resource: "team", fields: ["team", "roleGrant"] },
  "team.role.revoked": { resource: "team", fields: ["team", "roleGrant"] },
  "api_key.created": { resource: "apiKey", fields: ["apiKey"] },
  "api_key.revoked": { resource: "apiKey", fields: ["apiKey", "previous"] },
  "project.created": { resource: "project", fields: ["project"] },
  "project.archived": { resource: "project", fields: ["project", "previous"] },
  "project.restored": { resource: "project", fields: ["project", "previous"] },
  "environment.created": { resource: "environment", fields: ["environment"] },
  "environment.archived": { resource: "environment", fields: ["environment", "previous", "reason"] },
  "settings.updated": {
    resource: "setting",
    fields: ["setting", "action", "settingId", "key", "scopeKind", "changed"]
  },
  "feature.updated": {
    resource: "featureFlag",
    fields: ["featureFlag", "action", "flagId", "key", "scopeKind", "changed"]
  },
  "secrets.updated": {
    resource: "secret",
    fields: ["secret", "previous?", "id", "key", "scopeKind", "version", "change"]
  },
  "agent_provider.connected": { resource: "connection", fields: ["id", "provider", "name", "status", "keyHint"] },
  "agent_provider.updated": {
    resource: "connection",
    fields: ["id", "provider", "name", "status", "keyHint", "changed"]
  },
  "agent_provider.disconnected": { resource: "connection", fields: ["id", "provider", "name", "status", "keyHint"] },
  "quota.created": {
    resource: "quota",
    fields: ["quotaId", "metric", "limit", "period", "enforcement", "projectId", "environmentId"]
  },
  "quota.updated": {
    resource: "quota",
    fields: ["quotaId", "metric", "limit", "period", "enforcement", "projectId", "environmentId"]
  },
  "quota.deleted": {
    resource: "quota",
    fields: ["quotaId", "metric", "limit", "period", "enforcement", "projectId", "environmentId"]
  },
  "quota.exceeded": {
    resource: "quotaViolation",
    fields: [
      "violationId",
      "quotaId",
      "metric",
      "projectId",
      "environmentId",
      "resourceId",
      "period",
      "periodStart",
      "limit",
      "used",
      "enforcement"
    ]
  },
  "run.created": { resource: "run", fields: ["runId", "projectId", "environmentId", "jobs"] },
  "run.canceled": { resource: "run", fields: ["runId", "projectId", "reason"] },
  "run.finished": { resource: "run", fields: ["runId", "projectId", "status", "jobCounts"] },
  "state.tfstate.written": { resource: "tfstate", fields: ["tfstate"] },
  "state.tfstate.deleted": { resource: "tfstate", fields: ["tfstate"] },
  "state.tfstate.locked": { resource: "tfstate", fields: ["tfstate", "lock"] },
  "state.tfstate.unlocked": { resource: "tfstate", fields: ["tfstate", "lock", "force"] },
  "state.ref.updated": { resource: "ref", fields: ["ref", "previous?"] },
  "state.ref.deleted": { resource: "ref", fields: ["ref"] },
  "catalog.head.published": { resource: "head", fields: ["head", "previous?", "entityCount"] },
  "cli_link.created": { resource: "link", fields: ["linkId", "projectId", "remoteUrl"] },
  "cli_link.updated": { resource: "link", fields: ["linkId", "projectId", "remoteUrl"] },
  "cli_link.deleted": { resource: "link", fields: ["linkId", "projectId", "remoteUrl"] },
  "webhook_endpoint.created": { resource: "endpoint", fields: ["endpoint"] },
  "webhook_endpoint.updated": { resource: "endpoint", fields: ["endpoint", "previous"] },
  "webhook_endpoint.deleted": { resource: "endpoint", fields: ["endpoint"] },
  "webhook_endpoint.disabled": { resource: "endpoint", fields: ["endpoint", "reason"] },
  "webhook_endpoint.enabled": { resource: "endpoint", fields: ["endpoint"] },
  "webhook_endpoint.secret_rotated": { resource: "endpoint", fields: ["endpoint"] },
  "webhook_subscription.created": { resource: "subscription", fields: ["subscription"] },
  "webhook_subscription.updated": { resource: "subscription", fields: ["subscription", "previous"] },
  "webhook_subscription.deleted": { resource: "subscription", fields: ["subscription"] },
  "webhook.delivery_succeeded": { resource: "deliveryAttempt", fields: lifecycleFields() },
  "webhook.delivery_failed": { resource: "deliveryAttempt", fields: lifecycleFields() },
  "webhook.disabled": { resource: "endpoint", fields: lifecycleFields() }
} as const satisfies Record<string, { readonly resource: string; readonly fields: ReadonlyArray<string> }>

function lifecycleFields() {
  return [
    "delivery_attempt_id",
    "endpoint_id",
    "subscription_id",
    "source_event_id",
    "source_event_type",
    "http_status_code",
    "failure_reason",
    "attempt_number"
  ] as const
}

export type CatalogEventType = keyof typeof eventCatalog
export const catalogEventTypes = Object.keys(eventCatalog) as ReadonlyArray<string>

/** Lifecycle events: on the log, never fanned out, even under `*` (spec: recursion guard). */
export const lifecycleEventTypes: ReadonlySet<string> = new Set([
  "webhook.delivery_succeeded",
  "webhook.delivery_failed",
  "webhook.disabled"
])

/** The synthetic type `POST …/test` sends by default; never on the workspace log. */
export const TEST_EVENT_TYPE = "webhook.test"

/**
 * Whether a subscription pattern names something the catalog has: an exact type, `prefix.*` where some type starts
 * with `prefix.`, or `*`.
 */
export const isKnownEventPattern = (pattern: string): boolean => {
  if (pattern === "*") return true
  if (pattern.endsWith(".*")) {
    const prefix = pattern.slice(0, -1)
    return prefix.length > 1 && catalogEventTypes.some((type) => type.startsWith(prefix))
  }
  return Object.hasOwn(eventCatalog, pattern)
}

/** `https://` only, at most 2048 characters, no user name or password in it (webhooks.md §2). */
export const WebhookUrl = Schema.String.check(
  Schema.isMaxLength(2048),
  Schema.makeFilter((url: string) => {
    const parsed = URL.canParse(url) ? new URL(url) : undefined
    if (parsed === undefined) return "must be an absolute URL"
    if (parsed.protocol !== "https:") return "must be an https:// URL"
    if (parsed.username !== "" || parsed.password !== "") return "must not carry credentials"
    return true
  })
)

export const EndpointStatus = Schema.Literals(["active", "disabled"])
export type EndpointStatus = typeof EndpointStatus.Type

export const WebhookEndpoint = Schema.Struct({
  id: WebhookEndpointId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  url: Schema.String,
  name: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  status: EndpointStatus,
  disabledReason: Schema.NullOr(Schema.String),
  disabledAt: Schema.NullOr(Timestamp),
  secretVersion: Schema.Int,
  secretLastRotatedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type WebhookEndpoint = typeof WebhookEndpoint.Type

export const WebhookSubscription = Schema.Struct({
  id: WebhookSubscriptionId,
  orgId: OrgId,
  endpointId: WebhookEndpointId,
  eventType: Schema.String,
  enabled: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type WebhookSubscription = typeof WebhookSubscription.Type

export const DeliveryStatus = Schema.Literals(["pending", "retrying", "success", "failed"])
export type DeliveryStatus = typeof DeliveryStatus.Type

/** webhooks.md §3 Outcome. */
export const FailureReason = Schema.String
export type FailureReason =
  | `http_${number}`
  | "timeout"
  | "tls_error"
  | "connection_error"
  | "destination_not_allowed"
  | "redirect"
  | "endpoint_disabled"

export const DeliveryAttempt = Schema.Struct({
  id: DeliveryAttemptId,
  orgId: OrgId,
  endpointId: WebhookEndpointId,
  subscriptionId: Schema.NullOr(WebhookSubscriptionId),
  eventId: EventId,
  eventType: Schema.String,
  status: DeliveryStatus,
  attemptNumber: Schema.Int,
  httpStatusCode: Schema.NullOr(Schema.Int),
  failureReason: Schema.NullOr(FailureReason),
  idempotencyKey: Schema.String,
  nextRetryAt: Schema.NullOr(Timestamp),
  completedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type DeliveryAttempt = typeof DeliveryAttempt.Type

const Text = (max: number) => Schema.String.check(Schema.isMaxLength(max))

export const EndpointInput = Schema.Struct({
  url: WebhookUrl,
  name: Schema.optionalKey(Schema.NullOr(Text(128))),
  description: Schema.optionalKey(Schema.NullOr(Text(1024))),
  projectId: Schema.optionalKey(Schema.NullOr(ProjectId))
})
export type EndpointInput = typeof EndpointInput.Type

export const EndpointUpdate = Schema.Struct({
  url: Schema.optionalKey(WebhookUrl),
  name: Schema.optionalKey(Schema.NullOr(Text(128))),
  description: Schema.optionalKey(Schema.NullOr(Text(1024)))
})
export type EndpointUpdate = typeof EndpointUpdate.Type

export const DisableInput = Schema.Struct({ reason: Schema.optionalKey(Schema.NullOr(Text(256))) })
export type DisableInput = typeof DisableInput.Type

export const SubscriptionInput = Schema.Struct({
  endpointId: WebhookEndpointId,
  eventType: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
})
export type SubscriptionInput = typeof SubscriptionInput.Type

export const SubscriptionUpdate = Schema.Struct({ enabled: Schema.Boolean })
export type SubscriptionUpdate = typeof SubscriptionUpdate.Type

export const RecoverInput = Schema.Struct({ since: Schema.String.pipe(Schema.decodeTo(Timestamp)) })
export type RecoverInput = typeof RecoverInput.Type

export const TestInput = Schema.Struct({ eventType: Schema.optionalKey(Text(128)) })
export type TestInput = typeof TestInput.Type

export const RotatedSecret = Schema.Struct({
  endpoint: WebhookEndpoint,
  secret: Schema.String,
  previousSecretExpiresAt: Schema.NullOr(Timestamp),
  gracePeriodSeconds: Schema.Int
})

export const EndpointStats = Schema.Struct({
  window: Schema.Literal("24h"),
  success: Schema.Int,
  failed: Schema.Int,
  retrying: Schema.Int,
  pending: Schema.Int,
  lastSuccessAt: Schema.NullOr(Timestamp),
  lastFailureAt: Schema.NullOr(Timestamp),
  consecutiveFailures: Schema.Int
})
export type EndpointStats = typeof EndpointStats.Type

const orgParams = { orgId: OrgRef }
const projectParams = { ...orgParams, projectId: ProjectId }
const endpointParams = { ...orgParams, endpointId: WebhookEndpointId }
const subscriptionParams = { ...orgParams, subscriptionId: WebhookSubscriptionId }
const attemptParams = { ...orgParams, attemptId: DeliveryAttemptId }

const base = "/v1/organizations/:orgId/webhooks"
const endpointPath = `${base}/endpoints/:endpointId`
const read = requires.resourcePermission("organization.webhook.read", "project.webhook.read")
const write = requires.resourcePermission("organization.webhook.write", "project.webhook.write")

const One = Envelope({ endpoint: WebhookEndpoint })
const OneSubscription = Envelope({ subscription: WebhookSubscription })
const OneAttempt = Envelope({ deliveryAttempt: DeliveryAttempt })

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("listEndpoints", `${base}/endpoints`, {
      params: orgParams,
      query: PageQuery,
      success: Page({ endpoints: Schema.Array(WebhookEndpoint) })
    }).annotateMerge(
      doc("List webhook endpoints")
    ).annotateMerge(requires.permission("organization.webhook.read")),
    HttpApiEndpoint.post("createEndpoint", `${base}/endpoints`, {
      params: orgParams,
      payload: EndpointInput,
      success: One,
      error: [NotFound, PreconditionFailed]
    }).annotateMerge(
      doc(
        "Create a webhook endpoint",
        "The answer carries no secret: `rotate-secret` reveals it, the first one included."
      )
    ).annotateMerge(requires.permission("organization.webhook.write")),
    HttpApiEndpoint.get("listProjectEndpoints", "/v1/organizations/:orgId/projects/:projectId/webhooks/endpoints", {
      params: projectParams,
      query: PageQuery,
      success: Page({ endpoints: Schema.Array(WebhookEndpoint) }),
      error: NotFound
    }).annotateMerge(doc("List a project's webhook endpoints")).annotateMerge(
      requires.permission("project.webhook.read")
    ),
    HttpApiEndpoint.post(
      "createProjectEndpoint",
      "/v1/organizations/:orgId/projects/:projectId/webhooks/endpoints",
      { params: projectParams, payload: EndpointInput, success: One, error: [NotFound, PreconditionFailed] }
    ).annotateMerge(
      doc(
        "Create a project webhook endpoint",
        "A project-scoped endpoint; its item routes check the `project.webhook.*` permissions."
      )
    ).annotateMerge(requires.permission("project.webhook.write")),
    HttpApiEndpoint.get("getEndpoint", endpointPath, {
      params: endpointParams,
      success: One,
      error: [NotFound, Forbidden]
    })
      .annotateMerge(doc("Get a webhook endpoint")).annotateMerge(read),
    HttpApiEndpoint.patch("updateEndpoint", endpointPath, {
      params: endpointParams,
      payload: EndpointUpdate,
      success: One,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Update a webhook endpoint")).annotateMerge(write),
    HttpApiEndpoint.delete("deleteEndpoint", endpointPath, {
      params: endpointParams,
      success: One,
      error: [NotFound, Forbidden]
    })
      .annotateMerge(doc("Delete a webhook endpoint"))
      .annotateMerge(write),
    HttpApiEndpoint.post("disableEndpoint", `${endpointPath}/disable`, {
      params: endpointParams,
      payload: DisableInput,
      success: One,
      error: [NotFound, Forbidden]
    }).annotateMerge(
      doc(
        "Disable a webhook endpoint",
        "Optional body `{ reason }`; nothing is delivered to it until it is enabled again."
      )
    )
      .annotateMerge(write),
    HttpApiEndpoint.post("enableEndpoint", `${endpointPath}/enable`, {
      params: endpointParams,
      success: One,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Enable a webhook endpoint")).annotateMerge(write),
    HttpApiEndpoint.post("rotateSecret", `${endpointPath}/rotate-secret`, {
      params: endpointParams,
      success: Envelope(RotatedSecret.fields),
      error: [NotFound, Forbidden]
    }).annotateMerge(
      doc(
        "Rotate an endpoint's signing secret",
        "The only time a secret is shown; the previous one is still sent alongside until `previousSecretExpiresAt`."
      )
    ).annotateMerge(write),
    HttpApiEndpoint.get("listEndpointSubscriptions", `${endpointPath}/subscriptions`, {
      params: endpointParams,
      query: PageQuery,
      success: Page({ subscriptions: Schema.Array(WebhookSubscription) }),
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("List an endpoint's subscriptions")).annotateMerge(read),
    HttpApiEndpoint.get("listDeliveryAttempts", `${endpointPath}/delivery-attempts`, {
      params: endpointParams,
      query: PageQuery,
      success: Page({ deliveryAttempts: Schema.Array(DeliveryAttempt) }),
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("List delivery attempts", "Cursor-paginated, as every list."))
      .annotateMerge(read),
    HttpApiEndpoint.get("endpointStats", `${endpointPath}/stats`, {
      params: endpointParams,
      success: Envelope({ stats: EndpointStats }),
      error: [NotFound, Forbidden]
    }).annotateMerge(
      doc("Get delivery statistics")
    ).annotateMerge(read),
    HttpApiEndpoint.post("recoverEndpoint", `${endpointPath}/recover`, {
      params: endpointParams,
      payload: RecoverInput,
      success: Envelope({ replayed: Schema.Int }),
      error: [NotFound, Forbidden]
    }).annotateMerge(
      doc("Recover an auto-disabled endpoint")
    ).annotateMerge(write),
    HttpApiEndpoint.post("testEndpoint", `${endpointPath}/test`, {
      params: endpointParams,
      payload: TestInput,
      success: OneAttempt,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Send a test event"))
      .annotateMerge(write),
    HttpApiEndpoint.post("createSubscription", `${base}/subscriptions`, {
      params: orgParams,
      payload: SubscriptionInput,
      success: OneSubscription,
      error: [NotFound, Forbidden, Conflict, PreconditionFailed]
    }).annotateMerge(
      doc(
        "Subscribe an endpoint to events",
        "Delivers events of `eventType` to the endpoint."
      )
    ).annotateMerge(write),
    HttpApiEndpoint.get("getSubscription", `${base}/subscriptions/:subscriptionId`, {
      params: subscriptionParams,
      success: OneSubscription,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Get a subscription")).annotateMerge(read),
    HttpApiEndpoint.patch("updateSubscription", `${base}/subscriptions/:subscriptionId`, {
      params: subscriptionParams,
      payload: SubscriptionUpdate,
      success: OneSubscription,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Update a subscription")).annotateMerge(write),
    HttpApiEndpoint.delete("deleteSubscription", `${base}/subscriptions/:subscriptionId`, {
      params: subscriptionParams,
      success: OneSubscription,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Delete a subscription")).annotateMerge(write),
    HttpApiEndpoint.get("getDeliveryAttempt", `${base}/delivery-attempts/:attemptId`, {
      params: attemptParams,
      success: OneAttempt,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Get a delivery attempt"))
      .annotateMerge(read),
    HttpApiEndpoint.post("replayDeliveryAttempt", `${base}/delivery-attempts/:attemptId/replay`, {
      params: attemptParams,
      success: OneAttempt,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Replay a delivery", "A new attempt with the full original payload.")).annotateMerge(write)
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Webhooks", description: "Outbound signed webhooks" }))
{}
