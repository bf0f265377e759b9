/**
 * The transactional outbox of webhooks (webhooks.md §3 Durability): `EventLog.record` hands every event here inside
 * the mutation's transaction, and one delivery attempt per matching endpoint is written beside it, due now. Delivery
 * lifecycle events are never fanned out (spec: recursion guard).
 */
import { lifecycleEventTypes } from "@cp/domain"
import { type DeliveryRow, type EventRecord, WebhookDeliveriesRepo, WebhookEndpointsRepo } from "@cp/persistence"
import { Context, Effect, Layer } from "effect"
import { mint } from "../platform/ids.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { deliveredBody, deliveriesFor } from "./rules.ts"

/** A new attempt (number 1, due at `at`) of `body` to one endpoint. */
export const newAttempt = (
  at: Date,
  source: Pick<DeliveryRow, "orgId" | "endpointId" | "subscriptionId" | "eventId" | "eventType" | "body">,
  traceContext: DeliveryRow["traceContext"]
): DeliveryRow => ({
  ...source,
  id: mint.deliveryAttempt(at.getTime()),
  status: "pending",
  attemptNumber: 1,
  httpStatusCode: null,
  failureReason: null,
  // The event id: stable across retries and replays, what a consumer deduplicates on.
  idempotencyKey: source.eventId,
  nextRetryAt: null,
  completedAt: null,
  createdAt: at,
  updatedAt: at,
  dueAt: at,
  claimedUntil: null,
  claimToken: null,
  traceContext,
  responseBody: null
})

export class WebhookOutbox extends Context.Service<WebhookOutbox, {
  /** Writes the event's deliveries; call inside the event's transaction. */
  readonly enqueue: (event: EventRecord) => Effect.Effect<void>
}>()("@cp/server/WebhookOutbox") {
  static readonly layer = Layer.effect(
    WebhookOutbox,
    Effect.gen(function*() {
      const endpoints = yield* WebhookEndpointsRepo
      const deliveries = yield* WebhookDeliveriesRepo
      return WebhookOutbox.of({
        enqueue: (event) =>
          lifecycleEventTypes.has(event.type) ? Effect.void : Effect.gen(function*() {
            const matches = deliveriesFor(
              yield* endpoints.matching({ orgId: event.orgId, projectId: event.projectId, eventType: event.type })
            )
            if (matches.length === 0) return
            const at = yield* currentDate
            const body = deliveredBody(event)
            yield* deliveries.insertMany(matches.map((match) =>
              newAttempt(at, {
                orgId: event.orgId,
                endpointId: match.endpointId,
                subscriptionId: match.subscriptionId,
                eventId: event.id,
                eventType: event.type,
                body
              }, event.traceContext)
            ))
          })
      })
    })
  )
}
