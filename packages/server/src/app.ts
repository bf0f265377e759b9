/**
 * The whole server as layers: the typed API and docs behind the edge, the area services, the platform
 * services, and one persistence flavour (SQL on PostgreSQL/PGlite, or memory for fast tests).
 */
import { ControlPlaneApi } from "@cp/domain"
import { Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { ApiKeysHttp } from "./apiKeys/http.ts"
import { ApiKeysService } from "./apiKeys/service.ts"
import { AuditHttp } from "./audit/http.ts"
import { ConfigurationHttp, EnvironmentConfigurationHttp, ProjectConfigurationHttp } from "./config/http.ts"
import { ConfigService } from "./config/service.ts"
import { ActorResolverLive } from "./identity/actors.ts"
import { IdentityHttp, SessionHttp } from "./identity/http.ts"
import { OAuthService } from "./identity/oauth.ts"
import { SecurityLog } from "./identity/securityLog.ts"
import { IdentityService } from "./identity/service.ts"
import { InvitationsHttp, MembersHttp } from "./members/http.ts"
import { InvitationsService } from "./members/invitations.ts"
import { MembersService } from "./members/service.ts"
import { ApiMiddlewareLive } from "./platform/apiMiddleware.ts"
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
import { EnvironmentSecretsHttp, ProjectSecretsHttp, SecretsHttp } from "./secrets/http.ts"
import { SecretsService } from "./secrets/service.ts"
import { SystemHttp } from "./system/http.ts"
import { TeamsHttp } from "./teams/http.ts"
import { TeamsService } from "./teams/service.ts"
import { WorkspacesHttp } from "./workspaces/http.ts"
import { WorkspaceResolverLive } from "./workspaces/resolver.ts"
import { WorkspacesService } from "./workspaces/service.ts"

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
    EnvironmentConfigurationHttp
  ]),
  Layer.provide(ApiMiddlewareLive)
)

const Docs = HttpApiScalar.layer(ControlPlaneApi, { path: "/docs" })

const Services = OAuthService.layer.pipe(
  Layer.provideMerge(IdentityService.layer),
  Layer.provideMerge(WorkspacesService.layer),
  Layer.provideMerge(TeamsService.layer),
  Layer.provideMerge(Layer.mergeAll(ProjectsService.layer, EnvironmentSweep.layer)),
  Layer.provideMerge(Entitlements.layer),
  Layer.provideMerge(ConfigService.layer),
  Layer.provideMerge(SecretsService.layer),
  Layer.provideMerge(Layer.mergeAll(MembersService.layer, InvitationsService.layer)),
  Layer.provideMerge(ApiKeysService.layer),
  Layer.provideMerge(Layer.mergeAll(ActorResolverLive, WorkspaceResolverLive, SecurityLog.layer)),
  Layer.provideMerge(Layer.mergeAll(EventLog.layer, RateLimiter.layer, Cursors.layer, Mailer.layer)),
  Layer.provideMerge(ServerKeys.layer)
)

/** Every route (API, docs, edge) with the services they need; needs config and repositories. */
export const HttpAppLive = Layer.mergeAll(ApiRoutes, Docs, EdgeLive, EnvironmentSweep.background).pipe(
  Layer.provide(Services)
)

/** Serves the app on whatever `HttpServer` is provided (a Node listener, or a test server). */
export const serveApp = HttpRouter.serve(HttpAppLive, { disableLogger: true, disableListenLog: true })
