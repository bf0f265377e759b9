/**
 * Webhook endpoints, subscriptions and delivery attempts (spec: Webhooks; webhooks.md §2–§4). Item routes name the
 * endpoint (or its subscription or attempt) by id under the workspace, and check `project.webhook.*` on the
 * endpoint's project when it has one, `organization.webhook.*` otherwise. Secrets are sealed under the KEK; the
 * plaintext leaves only in the answer of `rotate-secret`.
 */
import {
  type Actor,
  Conflict,
  type DeliveryAttempt,
  type DeliveryAttemptId,
  type DisableInput,
  type EndpointInput,
  type EndpointStats,
  type EndpointUpdate,
  Forbidden,
  isKnownEventPattern,
  NotFound,
  type Paged,
  type Permission,
  PreconditionFailed,
  type ProjectId,
  type RecoverInput,
  type ResolvedWorkspace,
  type SubscriptionInput,
  type SubscriptionUpdate,
  TEST_EVENT_TYPE,
  type TestInput,
  type ValidationFailed,
  validationFailed,
  WebhookEndpoint,
  type WebhookEndpointId,
  WebhookSubscription,
  type WebhookSubscriptionId,
  wireError
} from "@cp/domain"
import {
  type DeliveryRow,
  type EndpointRow,
  idPosition,
  ProjectsRepo,
  type SubscriptionRow,
  Transactor,
  WebhookDeliveriesRepo,
  WebhookEndpointsRepo
} from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { eventActorOf, EventLog, type NewEvent } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { ServerKeys } from "../platform/keys.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { decide } from "../platform/rbac.ts"
import { seal } from "../platform/secretBox.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"
import { DestinationGuard, WebhookWorker } from "./delivery.ts"
import { newAttempt } from "./outbox.ts"
import { CLAIM_SECONDS, GRACE_PERIOD_SECONDS } from "./rules.ts"

/** webhooks.md §2 Limits. */
export const MAX_ENDPOINTS_PER_WORKSPACE = 20
export const MAX_SUBSCRIPTIONS_PER_ENDPOINT = 50
/** webhooks.md §4: `recover` looks back at most this far. */
export const RECOVER_WINDOW_DAYS = 14

const DAY_MS = 86_400_000

export const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  url: row.url,
  name: row.name,
  description: row.description,
  status: row.status,
  disabledReason: row.disabledReason,
  disabledAt: row.disabledAt,
  secretVersion: row.secretVersion,
  secretLastRotatedAt: row.secretLastRotatedAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

export const toAttempt = (row: DeliveryRow): DeliveryAttempt => ({
  id: row.id,
  orgId: row.orgId,
  endpointId: row.endpointId,
  subscriptionId: row.subscriptionId,
  eventId: row.eventId,
  eventType: row.eventType,
  status: row.status,
  attemptNumber: row.attemptNumber,
  httpStatusCode: row.httpStatusCode,
  failureReason: row.failureReason,
  idempotencyKey: row.idempotencyKey,
  nextRetryAt: row.nextRetryAt,
  completedAt: row.completedAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

/** A fresh signing secret: `whsec_` + 32 hex. */
const newSecret = () => `whsec_${randomBytes(16).toString("hex")}`

const encodeEndpoint = Schema.encodeSync(WebhookEndpoint)
const encodeSubscription = Schema.encodeSync(WebhookSubscription)

const endpointNotFound = (endpointId: string) => wireError(NotFound, "Webhook endpoint not found", { endpointId })
const subscriptionNotFound = (subscriptionId: string) =>
  wireError(NotFound, "Webhook subscription not found", { subscriptionId })
const attemptNotFound = (attemptId: string) => wireError(NotFound, "Delivery attempt not found", { attemptId })

type Access = "read" | "write"

/** The permission an endpoint's routes check: its project's when it has one, the workspace's otherwise. */
export const permissionFor = (endpoint: Pick<EndpointRow, "projectId">, access: Access): Permission =>
  endpoint.projectId === null ? `organization.webhook.${access}` : `project.webhook.${access}`

const authorize = (workspace: ResolvedWorkspace, endpoint: Pick<EndpointRow, "projectId">, access: Access) => {
  const permission = permissionFor(endpoint, access)
  return decide(workspace.grants, permission, endpoint.projectId ?? undefined).allow
    ? Effect.void
    : Effect.fail(wireError(Forbidden, `Missing permission ${permission}`, { permission }))
}

/** The fields of an update that changed, with their old values (Stripe's `previous_attributes`). */
const previousOf = <A extends Record<string, unknown>>(before: A, after: A): Record<string, unknown> =>
  Object.fromEntries(Object.entries(before).filter(([key, value]) => after[key] !== value))

type Fail = NotFound | Forbidden

export class WebhooksService extends Context.Service<WebhooksService, {
  readonly listEndpoints: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId | null,
    query: PageRequest
  ) => Effect.Effect<Paged<{ readonly endpoints: ReadonlyArray<WebhookEndpoint> }>, NotFound | ValidationFailed>
  readonly createEndpoint: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    routeProjectId: ProjectId | null,
    input: EndpointInput
  ) => Effect.Effect<{ readonly endpoint: WebhookEndpoint }, Fail | ValidationFailed | PreconditionFailed>
  readonly getEndpoint: (
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId
  ) => Effect.Effect<{ readonly endpoint: WebhookEndpoint }, Fail>
  readonly updateEndpoint: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId,
    input: EndpointUpdate
  ) => Effect.Effect<{ readonly endpoint: WebhookEndpoint }, Fail | ValidationFailed>
  readonly deleteEndpoint: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId
  ) => Effect.Effect<{ readonly endpoint: WebhookEndpoint }, Fail>
  readonly disableEndpoint: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId,
    input: DisableInput
  ) => Effect.Effect<{ readonly endpoint: WebhookEndpoint }, Fail>
  readonly enableEndpoint: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId
  ) => Effect.Effect<{ readonly endpoint: WebhookEndpoint }, Fail>
  readonly rotateSecret: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId
  ) => Effect.Effect<{
    readonly endpoint: WebhookEndpoint
    readonly secret: string
    readonly previousSecretExpiresAt: Date | null
    readonly gracePeriodSeconds: number
  }, Fail>
  readonly listSubscriptions: (
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId,
    query: PageRequest
  ) => Effect.Effect<Paged<{ readonly subscriptions: ReadonlyArray<WebhookSubscription> }>, Fail | ValidationFailed>
  readonly listAttempts: (
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId,
    query: PageRequest
  ) => Effect.Effect<Paged<{ readonly deliveryAttempts: ReadonlyArray<DeliveryAttempt> }>, Fail | ValidationFailed>
  readonly stats: (
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId
  ) => Effect.Effect<{ readonly stats: EndpointStats }, Fail>
  readonly recover: (
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId,
    input: RecoverInput
  ) => Effect.Effect<{ readonly replayed: number }, Fail | ValidationFailed>
  readonly test: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    endpointId: WebhookEndpointId,
    input: TestInput
  ) => Effect.Effect<{ readonly deliveryAttempt: DeliveryAttempt }, Fail>
  readonly createSubscription: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: SubscriptionInput
  ) => Effect.Effect<
    { readonly subscription: WebhookSubscription },
    Fail | Conflict | ValidationFailed | PreconditionFailed
  >
  readonly getSubscription: (
    workspace: ResolvedWorkspace,
    subscriptionId: WebhookSubscriptionId
  ) => Effect.Effect<{ readonly subscription: WebhookSubscription }, Fail>
  readonly updateSubscription: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    subscriptionId: WebhookSubscriptionId,
    input: SubscriptionUpdate
  ) => Effect.Effect<{ readonly subscription: WebhookSubscription }, Fail>
  readonly deleteSubscription: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    subscriptionId: WebhookSubscriptionId
  ) => Effect.Effect<{ readonly subscription: WebhookSubscription }, Fail>
  readonly getAttempt: (
    workspace: ResolvedWorkspace,
    attemptId: DeliveryAttemptId
  ) => Effect.Effect<{ readonly deliveryAttempt: DeliveryAttempt }, Fail>
  readonly replayAttempt: (
    workspace: ResolvedWorkspace,
    attemptId: DeliveryAttemptId
  ) => Effect.Effect<{ readonly deliveryAttempt: DeliveryAttempt }, Fail>
}>()("@cp/server/WebhooksService") {
  static readonly layer = Layer.effect(
    WebhooksService,
    Effect.gen(function*() {
      const endpoints = yield* WebhookEndpointsRepo
      const deliveries = yield* WebhookDeliveriesRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors
      const guard = yield* DestinationGuard
      const worker = yield* WebhookWorker
      const { kek } = yield* ServerKeys

      /** The endpoint in this workspace, if the caller may `access` it. */
      const endpointFor = (workspace: ResolvedWorkspace, endpointId: WebhookEndpointId, access: Access) =>
        endpoints.find({ orgId: workspace.organization.id, endpointId }).pipe(
          orFail(() => endpointNotFound(endpointId)),
          Effect.tap((row) => authorize(workspace, row, access))
        )

      /** The subscription in this workspace and its endpoint, if the caller may `access` that endpoint. */
      const subscriptionFor = (workspace: ResolvedWorkspace, subscriptionId: WebhookSubscriptionId, access: Access) =>
        Effect.gen(function*() {
          const subscription = yield* endpoints.findSubscription({ orgId: workspace.organization.id, subscriptionId })
            .pipe(orFail(() => subscriptionNotFound(subscriptionId)))
          const endpoint = yield* endpointFor(workspace, subscription.endpointId, access)
          return { subscription, endpoint }
        })

      const attemptFor = (workspace: ResolvedWorkspace, attemptId: DeliveryAttemptId, access: Access) =>
        Effect.gen(function*() {
          const attempt = yield* deliveries.find({ orgId: workspace.organization.id, attemptId })
            .pipe(orFail(() => attemptNotFound(attemptId)))
          yield* endpointFor(workspace, attempt.endpointId, access)
          return attempt
        })

      /** The URL must reach a public address unless private networks are allowed (422 on `url`). */
      const requireAllowedUrl = (url: string) =>
        Effect.flatMap(guard.allows(url), (allowed) =>
          allowed
            ? Effect.void
            : Effect.fail(validationFailed({
              url: ["must resolve to a public address (loopback, private, link-local, CGNAT and multicast are refused)"]
            })))

      const endpointEvent = (
        actor: Actor,
        row: EndpointRow,
        type: string,
        description: string,
        extra: NewEvent["data"] = {}
      ) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "webhook_endpoint", id: row.id, name: row.name },
          projectId: row.projectId,
          data: { endpoint: encodeEndpoint(toEndpoint(row)), ...extra },
          description
        })

      const subscriptionEvent = (
        actor: Actor,
        row: SubscriptionRow,
        endpoint: EndpointRow,
        type: string,
        extra: NewEvent["data"] = {}
      ) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "webhook_subscription", id: row.id, name: row.eventType },
          projectId: endpoint.projectId,
          data: { subscription: encodeSubscription(row), ...extra },
          description: `Webhook subscription ${row.eventType} ${type.split(".")[1] ?? ""}`
        })

      /** Writes the endpoint's new state and its event, answering the endpoint. */
      const change = (
        actor: Actor,
        after: EndpointRow,
        type: string,
        description: string,
        extra: NewEvent["data"] = {}
      ) =>
        tx.withTransaction(Effect.gen(function*() {
          yield* endpoints.update(after)
          yield* endpointEvent(actor, after, type, description, extra)
          return { endpoint: toEndpoint(after) }
        }))

      /** A new attempt of `source`'s body, claimed by this caller or left for the worker. */
      const copyOf = (source: DeliveryRow, at: Date) =>
        newAttempt(at, {
          orgId: source.orgId,
          endpointId: source.endpointId,
          subscriptionId: source.subscriptionId,
          eventId: source.eventId,
          eventType: source.eventType,
          body: source.body
        }, source.traceContext)

      return WebhooksService.of({
        listEndpoints: Effect.fn("WebhooksService.listEndpoints")(function*(workspace, projectId, query) {
          const orgId = workspace.organization.id
          if (projectId !== null) yield* findProject(projects, orgId, projectId)
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "webhooks.endpoints", scope: orgId, filters: { projectId } },
            query,
            (window) => endpoints.list({ orgId, projectId, ...window }),
            idPosition
          )
          return { data: { endpoints: items.map(toEndpoint) }, cursor }
        }),

        createEndpoint: Effect.fn("WebhooksService.createEndpoint")(function*(actor, workspace, routeProjectId, input) {
          const orgId = workspace.organization.id
          if (routeProjectId !== null && input.projectId != null && input.projectId !== routeProjectId) {
            return yield* validationFailed({ projectId: ["must be the project of the route when given"] })
          }
          const projectId = routeProjectId ?? input.projectId ?? null
          if (projectId !== null) {
            yield* findProject(projects, orgId, projectId)
            yield* authorize(workspace, { projectId }, "write")
          }
          yield* requireAllowedUrl(input.url)
          const at = yield* currentDate
          const row: EndpointRow = {
            id: mint.webhookEndpoint(at.getTime()),
            orgId,
            projectId,
            url: input.url,
            name: input.name ?? null,
            description: input.description ?? null,
            status: "active",
            disabledReason: null,
            disabledAt: null,
            secretVersion: 1,
            secretLastRotatedAt: null,
            createdAt: at,
            updatedAt: at,
            sealedSecret: seal(kek, newSecret()),
            previousSealedSecret: null,
            previousSecretExpiresAt: null,
            kekId: kek.id,
            consecutiveFailures: 0
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            if ((yield* endpoints.count(orgId)) >= MAX_ENDPOINTS_PER_WORKSPACE) {
              return yield* wireError(
                PreconditionFailed,
                `A workspace has at most ${MAX_ENDPOINTS_PER_WORKSPACE} webhook endpoints`,
                { limit: MAX_ENDPOINTS_PER_WORKSPACE }
              )
            }
            yield* endpoints.insert(row).pipe(Effect.orDie)
            yield* endpointEvent(actor, row, "webhook_endpoint.created", `Webhook endpoint ${row.url} created`)
            return { endpoint: toEndpoint(row) }
          }))
        }),

        getEndpoint: Effect.fn("WebhooksService.getEndpoint")(function*(workspace, endpointId) {
          return { endpoint: toEndpoint(yield* endpointFor(workspace, endpointId, "read")) }
        }),

        updateEndpoint: Effect.fn("WebhooksService.updateEndpoint")(function*(actor, workspace, endpointId, input) {
          const before = yield* endpointFor(workspace, endpointId, "write")
          if (input.url !== undefined) yield* requireAllowedUrl(input.url)
          const after: EndpointRow = {
            ...before,
            url: input.url ?? before.url,
            name: input.name === undefined ? before.name : input.name,
            description: input.description === undefined ? before.description : input.description,
            updatedAt: yield* currentDate
          }
          const fields = (row: EndpointRow) => ({ url: row.url, name: row.name, description: row.description })
          return yield* change(actor, after, "webhook_endpoint.updated", `Webhook endpoint ${after.url} updated`, {
            previous: previousOf(fields(before), fields(after)) as NewEvent["data"]
          })
        }),

        deleteEndpoint: Effect.fn("WebhooksService.deleteEndpoint")(function*(actor, workspace, endpointId) {
          const row = yield* endpointFor(workspace, endpointId, "write")
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* endpointEvent(actor, row, "webhook_endpoint.deleted", `Webhook endpoint ${row.url} deleted`)
            yield* endpoints.remove({ orgId: row.orgId, endpointId })
            return { endpoint: toEndpoint(row) }
          }))
        }),

        disableEndpoint: Effect.fn("WebhooksService.disableEndpoint")(function*(actor, workspace, endpointId, input) {
          const before = yield* endpointFor(workspace, endpointId, "write")
          if (before.status === "disabled") return { endpoint: toEndpoint(before) }
          const at = yield* currentDate
          const reason = input.reason ?? "manual"
          const after: EndpointRow = {
            ...before,
            status: "disabled",
            disabledReason: reason,
            disabledAt: at,
            updatedAt: at
          }
          return yield* change(
            actor,
            after,
            "webhook_endpoint.disabled",
            `Webhook endpoint ${after.url} disabled`,
            { reason }
          )
        }),

        enableEndpoint: Effect.fn("WebhooksService.enableEndpoint")(function*(actor, workspace, endpointId) {
          const before = yield* endpointFor(workspace, endpointId, "write")
          if (before.status === "active") return { endpoint: toEndpoint(before) }
          const after: EndpointRow = {
            ...before,
            status: "active",
            disabledReason: null,
            disabledAt: null,
            consecutiveFailures: 0,
            updatedAt: yield* currentDate
          }
          return yield* change(actor, after, "webhook_endpoint.enabled", `Webhook endpoint ${after.url} enabled`)
        }),

        rotateSecret: Effect.fn("WebhooksService.rotateSecret")(function*(actor, workspace, endpointId) {
          const before = yield* endpointFor(workspace, endpointId, "write")
          const at = yield* currentDate
          const secret = newSecret()
          const previousSecretExpiresAt = new Date(at.getTime() + GRACE_PERIOD_SECONDS * 1000)
          const after: EndpointRow = {
            ...before,
            sealedSecret: seal(kek, secret),
            previousSealedSecret: before.sealedSecret,
            previousSecretExpiresAt,
            kekId: kek.id,
            secretVersion: before.secretVersion + 1,
            secretLastRotatedAt: at,
            updatedAt: at
          }
          const { endpoint } = yield* change(
            actor,
            after,
            "webhook_endpoint.secret_rotated",
            `Webhook endpoint ${after.url} secret rotated`
          )
          return { endpoint, secret, previousSecretExpiresAt, gracePeriodSeconds: GRACE_PERIOD_SECONDS }
        }),

        listSubscriptions: Effect.fn("WebhooksService.listSubscriptions")(function*(workspace, endpointId, query) {
          yield* endpointFor(workspace, endpointId, "read")
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "webhooks.subscriptions", scope: workspace.organization.id, filters: { endpointId } },
            query,
            (window) => endpoints.listSubscriptions({ endpointId, ...window }),
            idPosition
          )
          return { data: { subscriptions: items }, cursor }
        }),

        listAttempts: Effect.fn("WebhooksService.listAttempts")(function*(workspace, endpointId, query) {
          yield* endpointFor(workspace, endpointId, "read")
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "webhooks.deliveryAttempts", scope: workspace.organization.id, filters: { endpointId } },
            query,
            (window) => deliveries.list({ endpointId, ...window }),
            idPosition
          )
          return { data: { deliveryAttempts: items.map(toAttempt) }, cursor }
        }),

        stats: Effect.fn("WebhooksService.stats")(function*(workspace, endpointId) {
          const endpoint = yield* endpointFor(workspace, endpointId, "read")
          const since = new Date((yield* currentDate).getTime() - DAY_MS)
          const counts = yield* deliveries.stats({ endpointId, since })
          return { stats: { window: "24h", ...counts, consecutiveFailures: endpoint.consecutiveFailures } as const }
        }),

        recover: Effect.fn("WebhooksService.recover")(function*(workspace, endpointId, input) {
          yield* endpointFor(workspace, endpointId, "write")
          const now = yield* currentDate
          if (input.since.getTime() < now.getTime() - RECOVER_WINDOW_DAYS * DAY_MS) {
            return yield* validationFailed({ since: [`must be at most ${RECOVER_WINDOW_DAYS} days ago`] })
          }
          if (input.since > now) return yield* validationFailed({ since: ["must not be in the future"] })
          const failed = yield* deliveries.failedSince({ endpointId, since: input.since })
          yield* deliveries.insertMany(failed.map((row) => copyOf(row, now)))
          return { replayed: failed.length }
        }),

        test: Effect.fn("WebhooksService.test")(function*(actor, workspace, endpointId, input) {
          const endpoint = yield* endpointFor(workspace, endpointId, "write")
          const at = yield* currentDate
          const eventId = mint.eventId(at.getTime())
          const eventType = input.eventType ?? TEST_EVENT_TYPE
          const { actorId: id, actorType: type } = eventActorOf(actor)
          const body = JSON.stringify({
            id: eventId,
            type: eventType,
            occurred_at: at.toISOString(),
            data: {
              orgId: endpoint.orgId,
              projectId: endpoint.projectId,
              environmentId: null,
              actor: { type, id },
              test: true,
              endpoint: encodeEndpoint(toEndpoint(endpoint))
            }
          })
          // Written claimed by this request, so no worker takes the first try from under it.
          const token = randomUUID()
          const row: DeliveryRow = {
            ...newAttempt(at, {
              orgId: endpoint.orgId,
              endpointId,
              subscriptionId: null,
              eventId,
              eventType,
              body
            }, null),
            claimedUntil: new Date(at.getTime() + CLAIM_SECONDS * 1000),
            claimToken: token
          }
          yield* deliveries.insertMany([row])
          const tried = yield* worker.attempt(row, token)
          return { deliveryAttempt: toAttempt(Option.getOrElse(tried, () => row)) }
        }),

        createSubscription: Effect.fn("WebhooksService.createSubscription")(function*(actor, workspace, input) {
          const endpoint = yield* endpointFor(workspace, input.endpointId, "write")
          if (!isKnownEventPattern(input.eventType)) {
            return yield* validationFailed({
              eventType: ["must be a known event type, a prefix wildcard such as project.* or *"]
            })
          }
          const at = yield* currentDate
          const row: SubscriptionRow = {
            id: mint.webhookSubscription(at.getTime()),
            orgId: endpoint.orgId,
            endpointId: endpoint.id,
            eventType: input.eventType,
            enabled: true,
            createdAt: at,
            updatedAt: at
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            if ((yield* endpoints.countSubscriptions(endpoint.id)) >= MAX_SUBSCRIPTIONS_PER_ENDPOINT) {
              return yield* wireError(
                PreconditionFailed,
                `An endpoint has at most ${MAX_SUBSCRIPTIONS_PER_ENDPOINT} subscriptions`,
                { limit: MAX_SUBSCRIPTIONS_PER_ENDPOINT }
              )
            }
            // The event first: a subscription does not receive the event of its own creation.
            yield* subscriptionEvent(actor, row, endpoint, "webhook_subscription.created")
            yield* endpoints.insertSubscription(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () =>
                  Effect.fail(wireError(Conflict, `The endpoint already subscribes to ${input.eventType}`, {
                    endpointId: endpoint.id,
                    eventType: input.eventType
                  }))
              )
            )
            return { subscription: row }
          }))
        }),

        getSubscription: Effect.fn("WebhooksService.getSubscription")(function*(workspace, subscriptionId) {
          return { subscription: (yield* subscriptionFor(workspace, subscriptionId, "read")).subscription }
        }),

        updateSubscription: Effect.fn("WebhooksService.updateSubscription")(
          function*(actor, workspace, subscriptionId, input) {
            const { endpoint, subscription } = yield* subscriptionFor(workspace, subscriptionId, "write")
            if (subscription.enabled === input.enabled) return { subscription }
            const after: SubscriptionRow = { ...subscription, enabled: input.enabled, updatedAt: yield* currentDate }
            return yield* tx.withTransaction(Effect.gen(function*() {
              yield* endpoints.updateSubscription(after)
              yield* subscriptionEvent(actor, after, endpoint, "webhook_subscription.updated", {
                previous: { enabled: subscription.enabled }
              })
              return { subscription: after }
            }))
          }
        ),

        deleteSubscription: Effect.fn("WebhooksService.deleteSubscription")(
          function*(actor, workspace, subscriptionId) {
            const { endpoint, subscription } = yield* subscriptionFor(workspace, subscriptionId, "write")
            return yield* tx.withTransaction(Effect.gen(function*() {
              yield* endpoints.removeSubscription({ orgId: subscription.orgId, subscriptionId })
              yield* subscriptionEvent(actor, subscription, endpoint, "webhook_subscription.deleted")
              return { subscription }
            }))
          }
        ),

        getAttempt: Effect.fn("WebhooksService.getAttempt")(function*(workspace, attemptId) {
          return { deliveryAttempt: toAttempt(yield* attemptFor(workspace, attemptId, "read")) }
        }),

        replayAttempt: Effect.fn("WebhooksService.replayAttempt")(function*(workspace, attemptId) {
          const source = yield* attemptFor(workspace, attemptId, "write")
          const row = copyOf(source, yield* currentDate)
          yield* deliveries.insertMany([row])
          return { deliveryAttempt: toAttempt(row) }
        })
      })
    })
  )
}
