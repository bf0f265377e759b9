/** Billing handlers and the provider's webhook ingress: one service call each. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
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

export const BillingWebhooksHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "billingWebhooks",
  (handlers) =>
    Effect.gen(function*() {
      const webhooks = yield* BillingWebhooks
      return handlers.handle(
        "billprov",
        ({ payload }) =>
          Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => webhooks.receive(request.headers, payload))
      )
    })
)
