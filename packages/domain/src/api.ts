/** The whole API: one group per area. Validation, OpenAPI, the docs page and the typed client derive from it. */
import { Context } from "effect"
import { HttpApi, OpenApi } from "effect/http-api"
import { AdminApi, AgentProvidersApi } from "./agents.ts"
import { ApiKeysApi } from "./apiKeys.ts"
import { AuditApi } from "./audit.ts"
import { BillingApi, BillingWebhooksApi } from "./billing.ts"
import { ConfigurationApi, EnvironmentConfigurationApi, ProjectConfigurationApi } from "./config.ts"
import { IdentityApi, SessionApi } from "./identity.ts"
import { IngressApi, IntegrationsApi } from "./integrations.ts"
import { JobLogsApi } from "./jobLogs.ts"
import { CliLinkResolveApi, CliLinksApi } from "./links.ts"
import { InvitationsApi, MembersApi } from "./members.ts"
import { UsageApi } from "./metering.ts"
import { ObjectsApi } from "./objects.ts"
import { OidcApi } from "./oidc.ts"
import { ProjectsApi } from "./projects.ts"
import { QuotasApi } from "./quotas.ts"
import { finishReference, introduction } from "./reference.ts"
import { CatalogApi, RefsApi, RepoFacetsApi, TriggersApi } from "./refs.ts"
import { RunsApi } from "./runs.ts"
import { RunSecretsApi } from "./runSecrets.ts"
import { EnvironmentSecretsApi, ProjectSecretsApi, SecretsApi } from "./secrets.ts"
import { RequestValidation } from "./security.ts"
import { StateReadModelsApi } from "./stateUsage.ts"
import { SystemApi } from "./system.ts"
import { TeamsApi } from "./teams.ts"
import { TfStateApi } from "./tfstate.ts"
import { WebhooksApi } from "./webhooks.ts"
import { WorkspacesApi } from "./workspaces.ts"

export class ControlPlaneApi extends HttpApi.make("control-plane")
  .add(SystemApi)
  .add(IdentityApi)
  .add(SessionApi)
  .add(WorkspacesApi)
  .add(ApiKeysApi)
  .add(AuditApi)
  .add(MembersApi)
  .add(InvitationsApi)
  .add(TeamsApi)
  .add(ProjectsApi)
  .add(ConfigurationApi)
  .add(ProjectConfigurationApi)
  .add(EnvironmentConfigurationApi)
  .add(SecretsApi)
  .add(ProjectSecretsApi)
  .add(EnvironmentSecretsApi)
  .add(WebhooksApi)
  .add(UsageApi)
  .add(QuotasApi)
  .add(BillingApi)
  .add(BillingWebhooksApi)
  .add(AgentProvidersApi)
  .add(AdminApi)
  .add(RunsApi)
  .add(JobLogsApi)
  .add(RunSecretsApi)
  .add(CliLinksApi)
  .add(CliLinkResolveApi)
  .add(OidcApi)
  .add(IntegrationsApi)
  .add(IngressApi)
  .add(ObjectsApi)
  .add(StateReadModelsApi)
  .add(TfStateApi)
  .add(RefsApi)
  .add(CatalogApi)
  .add(TriggersApi)
  .add(RepoFacetsApi)
  .middleware(RequestValidation)
  // Report every failing field of a body or query at once, not just the first.
  .annotateMerge(
    Context.make(HttpApi.PayloadParseOptions, { errors: "all" }).pipe(
      Context.add(HttpApi.QueryParseOptions, { errors: "all" })
    )
  )
  .annotateMerge(OpenApi.annotations({
    title: "Workspace Control-Plane API",
    version: "1.0.0",
    description: introduction,
    // Relative: the reference is served by the server it describes, so requests go back to the same origin.
    servers: [{ url: "/", description: "This server" }],
    transform: finishReference
  }))
{}
