/**
 * The whole server as layers, in four tiers that each build on the ones below: HTTP (the edge, the typed API and
 * its middleware, the docs), the area services, the platform services, and one flavour of repositories from
 * `repositories.ts` (SQL on PostgreSQL/PGlite, or memory for fast tests), which the caller provides with the
 * configuration. Declared here from the bottom up.
 */
import { ControlPlaneApi, DEFAULT_MAX_BODY_BYTES } from "@cp/domain"
import { ByteSize, Layer } from "effect"
import { HttpIncomingMessage, HttpRouter } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { AdminHttp, AgentProvidersHttp } from "./agents/http.ts"
import { AgentProviderClient } from "./agents/providers.ts"
import { AgentProvidersService } from "./agents/service.ts"
import { AgentSimulatorRoutes } from "./agents/simulator.ts"
import { ApiKeysHttp } from "./apiKeys/http.ts"
import { ApiKeysService } from "./apiKeys/service.ts"
import { AuditHttp } from "./audit/http.ts"
import { BillingHttp, BillingWebhooksHttp } from "./billing/http.ts"
import { BillingProvider } from "./billing/provider.ts"
import { BillingService } from "./billing/service.ts"
import { BillingSimulator, BillingSimulatorRoutes } from "./billing/simulator.ts"
import { BillingState } from "./billing/state.ts"
import { BillingSweep } from "./billing/sweep.ts"
import { BillingWebhooks } from "./billing/webhooks.ts"
import { ConfigurationHttp, EnvironmentConfigurationHttp, ProjectConfigurationHttp } from "./config/http.ts"
import { ConfigService } from "./config/service.ts"
import { ActorResolverLive } from "./identity/actors.ts"
import { IdentityHttp, SessionHttp } from "./identity/http.ts"
import { OAuthService } from "./identity/oauth.ts"
import { SecurityLog } from "./identity/securityLog.ts"
import { IdentityService } from "./identity/service.ts"
import { IngressHttp, IntegrationsHttp } from "./integrations/http.ts"
import { IngressService } from "./integrations/ingress.ts"
import { DbhostSimulatorRoutes, IntegrationProviders } from "./integrations/providers.ts"
import { ScmhostClient } from "./integrations/scmhost.ts"
import { IntegrationsService } from "./integrations/service.ts"
import { ConnectedPageRoutes, ScmhostSimulatorRoutes } from "./integrations/simulator.ts"
import { ScopeTemplatesService } from "./integrations/templates.ts"
import { InvitationsHttp, MembersHttp } from "./members/http.ts"
import { InvitationsService } from "./members/invitations.ts"
import { MembersService } from "./members/service.ts"
import { GcService } from "./objects/gc.ts"
import { ObjectsHttp, StateReadModelsHttp } from "./objects/http.ts"
import { StateReadModels } from "./objects/readModels.ts"
import { ObjectsService } from "./objects/service.ts"
import { UploadSweep } from "./objects/sweep.ts"
import { ApiMiddlewareLive } from "./platform/apiMiddleware.ts"
import { ContractVersionGateLive } from "./platform/contractVersion.ts"
import { EdgeLive } from "./platform/edge.ts"
import { Entitlements } from "./platform/entitlements.ts"
import { EventLog } from "./platform/events.ts"
import { ServerKeys } from "./platform/keys.ts"
import { Mailer } from "./platform/mailer.ts"
import { Cursors } from "./platform/pagination.ts"
import { RateLimiter } from "./platform/rateLimit.ts"
import { ProjectsHttp } from "./projects/http.ts"
import { ProjectsService } from "./projects/service.ts"
import { EnvironmentSweep } from "./projects/sweep.ts"
import { QuotasHttp } from "./quotas/http.ts"
import { QuotasService } from "./quotas/service.ts"
import { CliLinkResolveHttp, CliLinksHttp, JobLogsHttp, OidcHttp, RunSecretsHttp, RunsHttp } from "./runs/http.ts"
import { CliLinksService } from "./runs/links.ts"
import { JobLogsService } from "./runs/logs.ts"
import { WorkflowCredentials } from "./runs/oidc.ts"
import { RunSecretsService } from "./runs/secrets.ts"
import { RunsService } from "./runs/service.ts"
import { LeaseSweep } from "./runs/sweep.ts"
import { EnvironmentSecretsHttp, ProjectSecretsHttp, SecretsHttp } from "./secrets/http.ts"
import { SecretsService } from "./secrets/service.ts"
import { CatalogHttp, RefsHttp, RepoFacetsHttp, TfStateHttp, TriggersHttp } from "./state/http.ts"
import { RefsService } from "./state/refs.ts"
import { TfStateService } from "./state/tfstate.ts"
import { SystemHttp } from "./system/http.ts"
import { TeamsHttp } from "./teams/http.ts"
import { TeamsService } from "./teams/service.ts"
import { UsageHttp } from "./usage/http.ts"
import { UsageRollup } from "./usage/rollup.ts"
import { UsageService } from "./usage/service.ts"
import { DestinationGuard, WebhookSender, WebhookWorker } from "./webhooks/delivery.ts"
import { WebhooksHttp } from "./webhooks/http.ts"
import { WebhooksService } from "./webhooks/service.ts"
import { WorkspacesHttp } from "./workspaces/http.ts"
import { WorkspaceResolverLive } from "./workspaces/resolver.ts"
import { WorkspacesService } from "./workspaces/service.ts"

/** What every area builds on: server keys, then cursors, events, rate limits, mail, entitlements, security events. */
const Platform = Layer.mergeAll(
  Cursors.layer,
  EventLog.layer,
  RateLimiter.layer,
  Mailer.layer,
  Entitlements.layer,
  SecurityLog.layer
).pipe(Layer.provideMerge(ServerKeys.layer))

/** Webhook delivery: the destination guard, the HTTPS sender and the worker that claims due attempts. */
const WebhookDelivery = WebhookWorker.layer.pipe(
  Layer.provideMerge(WebhookSender.layer),
  Layer.provideMerge(DestinationGuard.layer)
)

/** Billing: the provider client, the state rules the ingress, reconcile and the period-end sweep share. */
const Billing = Layer.mergeAll(
  BillingService.layer.pipe(Layer.provide(BillingProvider.layer)),
  BillingWebhooks.layer,
  BillingSweep.layer,
  BillingSimulator.layer
).pipe(Layer.provideMerge(BillingState.layer))

/** Who is calling and which workspace the path names: the edge's lookups, which sign-in uses too. */
const Resolvers = Layer.mergeAll(ActorResolverLive, WorkspaceResolverLive)

/**
 * The area services over the platform. Most areas need only the platform; sign-in also creates a first workspace
 * (identity builds on workspaces), and OAuth sign-in finishes as an email sign-in does (OAuth builds on identity).
 */
const Services = OAuthService.layer.pipe(
  Layer.provideMerge(IdentityService.layer),
  Layer.provideMerge(
    Layer.mergeAll(
      LeaseSweep.layer,
      JobLogsService.layer,
      CliLinksService.layer,
      WorkflowCredentials.layer,
      RunSecretsService.layer,
      UploadSweep.layer.pipe(Layer.provideMerge(ObjectsService.layer)),
      GcService.layer,
      StateReadModels.layer,
      TfStateService.layer,
      RefsService.layer
    )
  ),
  Layer.provideMerge(Layer.mergeAll(
    WorkspacesService.layer,
    MembersService.layer,
    InvitationsService.layer,
    TeamsService.layer,
    ApiKeysService.layer,
    ProjectsService.layer,
    EnvironmentSweep.layer,
    RunsService.layer,
    ConfigService.layer,
    SecretsService.layer,
    WebhooksService.layer,
    UsageService.layer.pipe(Layer.provideMerge(QuotasService.layer)),
    UsageRollup.layer,
    AgentProvidersService.layer.pipe(Layer.provide(AgentProviderClient.layer)),
    Billing,
    Layer.mergeAll(IntegrationsService.layer, IngressService.layer).pipe(
      Layer.provideMerge(ScopeTemplatesService.layer),
      Layer.provide([ScmhostClient.layer, IntegrationProviders.layer])
    )
  )),
  Layer.provideMerge(WebhookDelivery),
  Layer.provideMerge(Layer.mergeAll(Platform, Resolvers.pipe(Layer.provide(Platform))))
)

/** The typed API: one handler group per area, behind the middleware every endpoint declares. */
const ApiRoutes = HttpApiBuilder.layer(ControlPlaneApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([
    SystemHttp,
    IdentityHttp,
    SessionHttp,
    WorkspacesHttp,
    ApiKeysHttp,
    AuditHttp,
    MembersHttp,
    InvitationsHttp,
    TeamsHttp,
    ProjectsHttp,
    SecretsHttp,
    ProjectSecretsHttp,
    EnvironmentSecretsHttp,
    ConfigurationHttp,
    ProjectConfigurationHttp,
    EnvironmentConfigurationHttp,
    WebhooksHttp,
    UsageHttp,
    QuotasHttp,
    BillingHttp,
    BillingWebhooksHttp,
    AgentProvidersHttp,
    AdminHttp,
    RunsHttp,
    JobLogsHttp,
    CliLinksHttp,
    CliLinkResolveHttp,
    OidcHttp,
    RunSecretsHttp,
    IntegrationsHttp,
    IngressHttp,
    ObjectsHttp,
    StateReadModelsHttp,
    TfStateHttp,
    RefsHttp,
    CatalogHttp,
    TriggersHttp,
    RepoFacetsHttp
  ]),
  Layer.provide([ApiMiddlewareLive, ContractVersionGateLive])
)

/** The page's icon, inline so the page asks nothing of any other origin. */
const FAVICON = "data:image/svg+xml," + encodeURIComponent(
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f2937"/>` +
    `<path d="M9 11h14M9 16h14M9 21h9" stroke="#60a5fa" stroke-width="3" stroke-linecap="round"/></svg>`
)

/**
 * The docs page, self-contained: Scalar's script is inlined by `HttpApiScalar.layer`, its web fonts are off (the
 * system fonts serve), the icon is inline, and the vendor toolbar ("Developer Tools", "Share", "Generate SDKs") is
 * hidden. The token field is the bearer scheme's, selected by default.
 */
const scalar: HttpApiScalar.ScalarConfig & { readonly showDeveloperTools: "never" } = {
  withDefaultFonts: false,
  favicon: FAVICON,
  showDeveloperTools: "never",
  authentication: { preferredSecurityScheme: "bearer" },
  defaultOpenAllTags: false
}

const Docs = HttpApiScalar.layer(ControlPlaneApi, { path: "/docs", scalar })

/**
 * The HTTP side: the edge in front of the typed API, the docs and the development simulators; plus the idle sweep, the
 * webhook delivery worker, the lease sweep and the usage roll-up, which serve no route.
 */
const Http = Layer.mergeAll(
  ApiRoutes,
  Docs,
  EdgeLive,
  AgentSimulatorRoutes,
  BillingSimulatorRoutes,
  BillingSweep.background,
  ScmhostSimulatorRoutes,
  ConnectedPageRoutes,
  DbhostSimulatorRoutes,
  EnvironmentSweep.background,
  WebhookWorker.background,
  LeaseSweep.background,
  UploadSweep.background,
  UsageRollup.background
)

/** Every route with the services it needs; needs the configuration and one flavour of repositories. */
export const HttpAppLive = Http.pipe(Layer.provide(Services))

/**
 * Serves the app on whatever `HttpServer` is provided (a Node listener, or a test server). The router matches a
 * path parameter of any length: a long one then reaches authentication and its route's schema (401, then 404)
 * instead of failing to match (which would read as 405, another method's path). Every request body is counted as
 * it is read and refused past the JSON cap (1 MiB), unless its route declares its own (see the edge).
 */
export const serveApp = HttpRouter.serve(HttpAppLive, {
  disableLogger: true,
  disableListenLog: true,
  routerConfig: { maxParamLength: Number.MAX_SAFE_INTEGER }
}).pipe(Layer.provide(Layer.succeed(HttpIncomingMessage.MaxBodySize)(ByteSize.bytes(DEFAULT_MAX_BODY_BYTES))))
