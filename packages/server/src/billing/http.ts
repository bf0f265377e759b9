/** Billing handlers and the provider's webhook ingress: one service call each. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { consumeIngress, ingressFamily } from "../platform/ingressRateLimit.ts"
import { RateLimiter } from "../platform/rateLimit.ts"
import { BillingService } from "./service.ts"
import { BillingWebhooks } from "./webhooks.ts"

export const BillingHttp = HttpApiBuilder.group(ControlPlaneApi, "billing", (handlers) =>
  Effect.gen(function*() {
    const billing = yield* BillingService
    return handlers
      .handle("plans", () => billing.plans())
      .handle("customer", () => Effect.flatMap(CurrentWorkspace, billing.customer))
      .handle("summary", () => Effect.flatMap(CurrentWorkspace, billing.summary))
      .handle("invoices", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) => billing.invoices(workspace, query)))
      .handle("entitlements", () =>
        Effect.flatMap(CurrentWorkspace, billing.entitlements))
      .handle("paymentMethods", () => Effect.flatMap(CurrentWorkspace, billing.paymentMethods))
      .handle("checkout", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          billing.checkout(actor, workspace, payload)))
      .handle("portal", () =>
        Effect.flatMap(CurrentWorkspace, billing.portal))
      .handle("change", ({ payload }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          billing.change(workspace, payload)))
      .handle("cancel", () =>
        Effect.flatMap(CurrentWorkspace, billing.cancel))
      .handle("reconcile", () =>
        Effect.flatMap(CurrentWorkspace, billing.reconcile))
  }))

/**
 * The provider webhook's limit per source address (Authentication §8): 300 deliveries a minute. Its source is the
 * billing provider's egress alone (no browsers, no NAT of many users), whose deliveries follow the workspace's own
 * billing changes; a burst beyond it is retried by the provider after `Retry-After`.
 */
export const billingWebhookFamily = ingressFamily("ingress_billing_webhook", 300)

export const BillingWebhooksHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "billingWebhooks",
  (handlers) =>
    Effect.gen(function*() {
      const webhooks = yield* BillingWebhooks
      const limiter = yield* RateLimiter
      return handlers.handle(
        "billprov",
        ({ payload, request }) =>
          consumeIngress(limiter, billingWebhookFamily, request).pipe(
            Effect.andThen(webhooks.receive(request.headers, payload))
          )
      )
    })
)
