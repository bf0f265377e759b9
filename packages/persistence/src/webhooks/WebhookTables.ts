/**
 * The in-memory tables of the webhooks area, shared by `WebhookEndpointsRepo.memory` and
 * `WebhookDeliveriesRepo.memory`, so removing an endpoint removes its attempts as the SQL cascade does.
 */
import type { DeliveryAttemptId, WebhookEndpointId, WebhookSubscriptionId } from "@cp/domain/ids"
import { Context, Layer } from "effect"
import type { DeliveryRow, EndpointRow, SubscriptionRow } from "./rows.ts"

export class WebhookTables extends Context.Service<WebhookTables, {
  readonly endpoints: Map<WebhookEndpointId, EndpointRow>
  readonly subscriptions: Map<WebhookSubscriptionId, SubscriptionRow>
  readonly deliveries: Map<DeliveryAttemptId, DeliveryRow>
}>()("@cp/persistence/webhooks/WebhookTables") {
  static readonly layer = Layer.sync(
    WebhookTables,
    () => WebhookTables.of({ endpoints: new Map(), subscriptions: new Map(), deliveries: new Map() })
  )
}
