/**
 * Integration handlers: one service call each. The setup callback answers a browser with a 302 (or a small HTML
 * page when it fails) and a client sending `Accept: application/json` with JSON; the webhook hands the raw bytes
 * to the ingress before anything parses them. Both ingress routes are rate limited per source address.
 */
import {
  actorInWorkspace,
  Conflict,
  ControlPlaneApi,
  CurrentWorkspace,
  PreconditionFailed,
  ProviderUnavailable,
  RateLimited,
  Unauthenticated
} from "@cp/domain"
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { consumeIngress, ingressFamily } from "../platform/ingressRateLimit.ts"
import { RateLimiter } from "../platform/rateLimit.ts"
import { IngressService } from "./ingress.ts"
import { IntegrationsService } from "./service.ts"
import { ScopeTemplatesService } from "./templates.ts"

/**
 * Provider ingress limits per source address (Authentication §8): 600 webhooks and 600 setup callbacks a minute (one
 * source may be a provider's whole egress, or a company's NAT).
 */
export const webhookIngressFamily = ingressFamily("ingress_webhook", 600)
export const setupIngressFamily = ingressFamily("ingress_setup", 600)

const wantsJson = (accept: string | undefined) => accept !== undefined && /application\/json/i.test(accept)

/** The status of a setup failure, for the HTML page a browser gets instead of the envelope. */
const statusOf = (error: unknown): number =>
  error instanceof Unauthenticated
    ? 401
    : error instanceof Conflict
    ? 409
    : error instanceof PreconditionFailed
    ? 412
    : error instanceof RateLimited
    ? 429
    : error instanceof ProviderUnavailable
    ? 502
    : 400

const failurePage = (status: number, message: string) =>
  HttpServerResponse.text(
    `<!doctype html><html><head><meta charset="utf-8"><title>Connection failed</title></head>` +
      `<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto">` +
      `<h1>The connection could not be completed</h1><p>${message.replace(/[&<>"']/g, "")}</p></body></html>`,
    { status, contentType: "text/html; charset=utf-8" }
  )

export const IntegrationsHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "integrations",
  (handlers) =>
    Effect.gen(function*() {
      const integrations = yield* IntegrationsService
      const ingress = yield* IngressService
      const templates = yield* ScopeTemplatesService
      return handlers
        .handle("listGrants", ({ params }) =>
          Effect.flatMap(CurrentWorkspace, (workspace) =>
            integrations.listGrants(workspace, params.connectionId)))
        .handle("createGrant", ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            integrations.createGrant(actor, workspace, params.connectionId, payload)))
        .handle("revokeGrant", ({ params }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            integrations.revokeGrant(actor, workspace, params.connectionId, params.workspaceOrgId)))
        .handle("listScopeTemplates", ({ params }) =>
          Effect.flatMap(CurrentWorkspace, (workspace) =>
            templates.list(workspace, params.provider)))
        .handle("createScopeTemplate", ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            templates.create(actor, workspace, params.provider, payload)))
        .handle("updateScopeTemplate", ({ params, payload }) =>
          Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
            templates.update(actor, workspace, params.provider, params.templateId, payload)))
        .handle(
          "connect",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.connect(actor, workspace, params.provider, payload))
        )
        .handle(
          "issueToken",
          ({ payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.issueToken(actor, workspace, payload))
        )
        .handle("list", () =>
          Effect.flatMap(CurrentWorkspace, integrations.list))
        .handle(
          "get",
          ({ params }) =>
            Effect.flatMap(CurrentWorkspace, (workspace) =>
              integrations.get(workspace, params.connectionId))
        )
        .handle(
          "update",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.update(actor, workspace, params.connectionId, payload))
        )
        .handle(
          "revoke",
          ({ params }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.revoke(actor, workspace, params.connectionId))
        )
        .handle(
          "repositories",
          ({ params, query }) =>
            Effect.flatMap(CurrentWorkspace, (workspace) =>
              integrations.repositories(workspace, params.connectionId, query.q))
        )
        .handle(
          "deliveries",
          ({ params }) =>
            Effect.flatMap(CurrentWorkspace, (workspace) =>
              integrations.deliveries(workspace, params.connectionId))
        )
        .handle("replay", ({ params }) =>
          Effect.flatMap(CurrentWorkspace, (workspace) =>
            Effect.flatMap(
              integrations.visible(workspace, params.connectionId),
              (connection) =>
                ingress.replay(connection, params.deliveryId)
            )))
        .handle(
          "listRepoLinks",
          ({ params }) =>
            Effect.flatMap(CurrentWorkspace, (workspace) =>
              integrations.listRepoLinks(workspace, params.projectId))
        )
        .handle(
          "createRepoLink",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.createRepoLink(actor, workspace, params.projectId, payload))
        )
        .handle(
          "updateRepoLink",
          ({ params, payload }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.updateRepoLink(actor, workspace, params.projectId, params.repoLinkId, payload))
        )
        .handle(
          "deleteRepoLink",
          ({ params }) =>
            Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
              integrations.deleteRepoLink(actor, workspace, params.projectId, params.repoLinkId))
        )
    })
)

export const IngressHttp = HttpApiBuilder.group(ControlPlaneApi, "ingress", (handlers) =>
  Effect.gen(function*() {
    const integrations = yield* IntegrationsService
    const ingress = yield* IngressService
    const limiter = yield* RateLimiter
    return handlers
      .handle("scmhostSetup", ({ query, request }) => {
        const json = wantsJson(request.headers["accept"])
        const answer = consumeIngress(limiter, setupIngressFamily, request).pipe(
          Effect.andThen(integrations.setup({ installationId: query.installation_id, state: query.state }))
        )
        return json
          ? answer
          : answer.pipe(
            Effect.map(({ redirectUrl }) => HttpServerResponse.redirect(redirectUrl, { status: 302 })),
            Effect.catch((error) => Effect.succeed(failurePage(statusOf(error), error.message)))
          )
      })
      .handle("scmhostWebhook", ({ payload, request }) =>
        consumeIngress(limiter, webhookIngressFamily, request).pipe(
          Effect.andThen(ingress.receive(request.headers, payload))
        ))
  }))
