/**
 * Integrations (spec "Integrations", Authentication §8; integrations-agents.md §1–3): connections to the
 * GitHub-App-shaped source-control provider `scmhost` (and generic providers configured by `INTEGRATION_<NAME>_*`),
 * project repo links with a branch-to-environment map, the inbound delivery log of provider webhooks with replay,
 * admission grants, scope templates and the token broker for short-lived repository-scoped installation tokens.
 * The provider ingress routes (`/ingress/scmhost/setup`, `/ingress/scmhost/webhook`) are their own group: they
 * authenticate by a signed state or an HMAC over the raw body, never by a bearer token.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  Conflict,
  Forbidden,
  NotFound,
  PreconditionFailed,
  ProviderUnavailable,
  RateLimited,
  Unauthenticated
} from "./errors.ts"
import { InboundDeliveryId, IntegrationConnectionId, OrgId, ProjectId, RepoLinkId, WorkspaceRef } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import { requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { LineText } from "./text.ts"
import { Envelope, maxBodyBytes, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** The source-control provider's name on the wire. */
export const SCMHOST = "scmhost"

/** A provider's path segment: lower-case letters and digits (`scmhost`, `dbhost`, …). */
export const ProviderName = Schema.String.annotate({ description: "The provider (`scmhost`, or a configured one)" })
  .check(Schema.isPattern(/^[a-z][a-z0-9]{0,31}$/u))

export const ConnectionStatus = Schema.Literals(["pending", "active", "suspended", "revoked"])
export type ConnectionStatus = typeof ConnectionStatus.Type
export const ConnectionScope = Schema.Literals(["account", "workspace"])
export type ConnectionScope = typeof ConnectionScope.Type
export const ShareMode = Schema.Literals(["auto", "granted"])
export type ShareMode = typeof ShareMode.Type

export const IntegrationConnection = Schema.Struct({
  id: IntegrationConnectionId,
  orgId: OrgId,
  provider: Schema.String,
  status: ConnectionStatus,
  scope: ConnectionScope,
  shareMode: ShareMode,
  displayName: Schema.String,
  externalAccountLogin: Schema.NullOr(Schema.String),
  externalAccountType: Schema.NullOr(Schema.String),
  repositorySelection: Schema.NullOr(Schema.String),
  createdBy: Schema.String,
  connectedAt: Schema.NullOr(Timestamp),
  revokedAt: Schema.NullOr(Timestamp),
  suspendedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  inherited: Schema.optionalKey(Schema.Boolean),
  sharedByWorkspaceRef: Schema.optionalKey(WorkspaceRef),
  sharedByName: Schema.optionalKey(Schema.String)
})
export type IntegrationConnection = typeof IntegrationConnection.Type

/** A permission level of the provider (GitHub's: `read` below `write`). */
export const PermissionLevel = Schema.Literals(["read", "write"])
export type PermissionLevel = typeof PermissionLevel.Type
/** A provider permission name (`contents`, `metadata`, `checks`, …). */
export const PermissionName = Schema.String.check(Schema.isPattern(/^[a-z][a-z_]{0,63}$/u))
export const Permissions = Schema.Record(PermissionName, PermissionLevel)
export type Permissions = typeof Permissions.Type

export const ConnectInput = Schema.Struct({
  displayName: Schema.optionalKey(LineText.check(Schema.isMinLength(1), Schema.isMaxLength(128))),
  parentToken: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096))),
  scope: Schema.optionalKey(LineText.check(Schema.isMinLength(1), Schema.isMaxLength(255)))
})
export type ConnectInput = typeof ConnectInput.Type

export const ConnectResult = {
  connection: IntegrationConnection,
  installUrl: Schema.optionalKey(Schema.String),
  authorizeUrl: Schema.optionalKey(Schema.String)
}

export const ConnectionPatch = Schema.Struct({ shareMode: Schema.optionalKey(ShareMode) })
export type ConnectionPatch = typeof ConnectionPatch.Type

export const Repository = Schema.Struct({
  externalId: Schema.String,
  fullName: Schema.String,
  defaultBranch: Schema.String,
  private: Schema.Boolean
})
export type Repository = typeof Repository.Type

/** A branch name as a key of `branchEnvMap` (git's ref rules, loosely: no spaces or control characters). */
export const BranchName = Schema.String.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(255),
  Schema.makeFilter((name: string) =>
    // git's ref rules, loosely: no whitespace, control characters or `~ ^ : ? * [ \`.
    [...name].every((char) => char > " " && char !== "\u007f" && !"~^:?*[\\".includes(char)) ||
    "must be a branch name"
  )
)
export const EnvironmentSlugValue = Schema.String.check(
  Schema.isPattern(/^[a-z0-9][a-z0-9-]{0,62}$/u, { message: "must be an environment slug" })
)
export const BranchEnvMap = Schema.Record(BranchName, EnvironmentSlugValue).check(
  Schema.makeFilter((map) => Object.keys(map).length <= 100 || "at most 100 branches")
)
export type BranchEnvMap = typeof BranchEnvMap.Type

export const RepoLink = Schema.Struct({
  id: RepoLinkId,
  orgId: OrgId,
  projectId: ProjectId,
  connectionId: IntegrationConnectionId,
  repoExternalId: Schema.String,
  repoFullName: Schema.String,
  defaultBranch: Schema.String,
  branchEnvMap: Schema.Record(Schema.String, Schema.String),
  createdBy: Schema.String,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  deletedAt: Schema.NullOr(Timestamp)
})
export type RepoLink = typeof RepoLink.Type

const RepoExternalId = Schema.String.check(
  Schema.isPattern(/^[0-9]{1,20}$/u, { message: "must be the provider's repository id" })
)
const RepoFullName = LineText.check(Schema.isMinLength(1), Schema.isMaxLength(255))

export const RepoLinkInput = Schema.Struct({
  connectionId: IntegrationConnectionId,
  repoExternalId: RepoExternalId,
  repoFullName: Schema.optionalKey(RepoFullName),
  defaultBranch: Schema.optionalKey(BranchName),
  branchEnvMap: Schema.optionalKey(BranchEnvMap)
})
export type RepoLinkInput = typeof RepoLinkInput.Type

export const RepoLinkPatch = Schema.Struct({
  defaultBranch: Schema.optionalKey(BranchName),
  branchEnvMap: Schema.optionalKey(BranchEnvMap)
})
export type RepoLinkPatch = typeof RepoLinkPatch.Type

export const InboundDeliveryStatus = Schema.Literals(["received", "attributed", "emitted", "skipped", "failed"])
export type InboundDeliveryStatus = typeof InboundDeliveryStatus.Type

export const InboundDelivery = Schema.Struct({
  id: InboundDeliveryId,
  connectionId: Schema.NullOr(IntegrationConnectionId),
  deliveryKey: Schema.String,
  event: Schema.String,
  action: Schema.NullOr(Schema.String),
  status: InboundDeliveryStatus,
  signatureOk: Schema.Boolean,
  failureReason: Schema.NullOr(Schema.String),
  receivedAt: Timestamp,
  processedAt: Schema.NullOr(Timestamp)
})
export type InboundDelivery = typeof InboundDelivery.Type

/** An admission grant: a child workspace of the account may use a `granted` connection. */
export const IntegrationGrant = Schema.Struct({
  connectionId: IntegrationConnectionId,
  workspaceOrgId: OrgId,
  createdBy: Schema.String,
  createdAt: Timestamp
})
export type IntegrationGrant = typeof IntegrationGrant.Type
export const GrantInput = Schema.Struct({ workspaceOrgId: OrgId })
export type GrantInput = typeof GrantInput.Type

export const TemplateId = Schema.String.annotate({ description: "A scope template id: `[a-z0-9-]+`, 1 to 63" }).check(
  Schema.isPattern(/^[a-z0-9-]{1,63}$/u, { message: "must match [a-z0-9-]+ (at most 63 characters)" })
)
export const TemplateStatus = Schema.Literals(["active", "retired"])
export type TemplateStatus = typeof TemplateStatus.Type

export const ScopeTemplate = Schema.Struct({
  templateId: Schema.String,
  provider: Schema.String,
  displayName: Schema.String,
  description: Schema.String,
  status: TemplateStatus,
  permissions: Schema.Record(Schema.String, Schema.String),
  source: Schema.Literals(["declared", "custom"]),
  createdAt: Schema.NullOr(Timestamp),
  updatedAt: Schema.NullOr(Timestamp)
})
export type ScopeTemplate = typeof ScopeTemplate.Type

const TemplateText = LineText.check(Schema.isMaxLength(255))
export const ScopeTemplateInput = Schema.Struct({
  templateId: TemplateId,
  displayName: TemplateText.check(Schema.isMinLength(1)),
  description: Schema.optionalKey(TemplateText),
  permissions: Permissions
})
export type ScopeTemplateInput = typeof ScopeTemplateInput.Type
export const ScopeTemplatePatch = Schema.Struct({
  displayName: Schema.optionalKey(TemplateText.check(Schema.isMinLength(1))),
  description: Schema.optionalKey(TemplateText),
  status: Schema.optionalKey(TemplateStatus)
})
export type ScopeTemplatePatch = typeof ScopeTemplatePatch.Type

export const TokenRequest = Schema.Struct({
  repositories: Schema.Array(RepoExternalId).check(Schema.isMinLength(1), Schema.isMaxLength(100)),
  permissions: Schema.optionalKey(Permissions),
  template: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[a-z0-9-]{1,63}$/u)))
})
export type TokenRequest = typeof TokenRequest.Type

export const BrokeredToken = Schema.Struct({
  token: Schema.String,
  expiresAt: Timestamp,
  repositories: Schema.Array(Schema.Struct({ externalId: Schema.String, fullName: Schema.String })),
  permissions: Schema.Record(Schema.String, Schema.String)
})
export type BrokeredToken = typeof BrokeredToken.Type

/** The `data` of each `scm.*` event: the repository and commit it is about, per linked project. */
const ScmEventFields = [
  "repoFullName",
  "ref",
  "sha",
  "branch",
  "environmentSlug",
  "sender",
  "url",
  "deliveryId",
  "repoLinkId"
] as const
export const scmEventTypes = [
  "scm.push",
  "scm.pull_request.opened",
  "scm.pull_request.merged",
  "scm.check.completed",
  "scm.release.published"
] as const
export type ScmEventType = typeof scmEventTypes[number]

/** The catalog rows of this area (joined into `eventCatalog`). */
export const integrationEventCatalog = {
  ...Object.fromEntries(scmEventTypes.map((type) => [type, { resource: "repoLink", fields: ScmEventFields }])) as {
    readonly [K in ScmEventType]: { readonly resource: "repoLink"; readonly fields: typeof ScmEventFields }
  },
  "integration.connected": { resource: "connection", fields: ["connection"] },
  "integration.updated": { resource: "connection", fields: ["connection", "previous"] },
  "integration.revoked": { resource: "connection", fields: ["connection", "previous"] },
  "integration.token.issued": { resource: "connection", fields: ["connectionId", "repositories", "permissions"] },
  "integration.grant.created": { resource: "grant", fields: ["grant"] },
  "integration.grant.revoked": { resource: "grant", fields: ["grant"] },
  "integration.scope_template.created": { resource: "scopeTemplate", fields: ["scopeTemplate"] },
  "integration.scope_template.updated": { resource: "scopeTemplate", fields: ["scopeTemplate", "previous"] },
  "repo_link.created": { resource: "repoLink", fields: ["repoLink"] },
  "repo_link.updated": { resource: "repoLink", fields: ["repoLink", "previous"] },
  "repo_link.deleted": { resource: "repoLink", fields: ["repoLink"] }
} as const

const orgParams = { orgId: OrgRef }
const INTEGRATIONS = "/v1/organizations/:orgId/integrations"
const oneParams = { ...orgParams, connectionId: IntegrationConnectionId }
const REPO_LINKS = "/v1/organizations/:orgId/projects/:projectId/repo-links"
const linkParams = { ...orgParams, projectId: ProjectId }
const One = Envelope({ connection: IntegrationConnection })
const OneLink = Envelope({ repoLink: RepoLink })

export class IntegrationsApi extends HttpApiGroup.make("integrations")
  .add(
    HttpApiEndpoint.post("connect", `${INTEGRATIONS}/:provider/connect`, {
      params: { ...orgParams, provider: ProviderName },
      payload: ConnectInput,
      success: Envelope(ConnectResult),
      error: [NotFound, Forbidden, PreconditionFailed, Conflict, ProviderUnavailable]
    }).annotateMerge(doc(
      "Connect an integration provider",
      "`scmhost`: a pending connection and the `installUrl` of the app's install page (entitlement" +
        " `feature.integrations.scmhost`). Other providers: with `parentToken` the token is verified and an active" +
        " connection returned; failures are 412 with a structured reason."
    )).annotateMerge(requires.permission("organization.integration.connect")),
    HttpApiEndpoint.post("issueToken", `${INTEGRATIONS}/scmhost/token`, {
      params: orgParams,
      payload: TokenRequest,
      success: Envelope(BrokeredToken.fields),
      error: [NotFound, Forbidden, PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(doc(
      "Mint a repository-scoped installation token",
      "Deny by default: every repository must be linked to a project the caller can read, every permission granted" +
        " to the installation. The token is shown once and expires within an hour."
    )).annotateMerge(requires.permission("organization.integration.token.issue")),
    HttpApiEndpoint.get("list", INTEGRATIONS, {
      params: orgParams,
      success: Envelope({ connections: Schema.Array(IntegrationConnection) }),
      error: NotFound
    }).annotateMerge(doc("List integration connections", "Own connections, then rows shared by the account root."))
      .annotateMerge(requires.permission("organization.integration.read")),
    HttpApiEndpoint.get("get", `${INTEGRATIONS}/:connectionId`, {
      params: oneParams,
      success: One,
      error: NotFound
    }).annotateMerge(doc("Get an integration connection")).annotateMerge(
      requires.permission("organization.integration.read")
    ),
    HttpApiEndpoint.patch("update", `${INTEGRATIONS}/:connectionId`, {
      params: oneParams,
      payload: ConnectionPatch,
      success: One,
      error: [NotFound, Forbidden, Conflict]
    }).annotateMerge(doc("Change how a connection is shared", "`shareMode` `auto` or `granted`."))
      .annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.delete("revoke", `${INTEGRATIONS}/:connectionId`, {
      params: oneParams,
      success: One,
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Revoke an integration connection", "Brokering and ingress attribution stop at once."))
      .annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.get("repositories", `${INTEGRATIONS}/:connectionId/repositories`, {
      params: oneParams,
      query: {
        q: Schema.optionalKey(describedText("Case-insensitive substring of the repository's full name"))
      },
      success: Envelope({ repositories: Schema.Array(Repository) }),
      error: [NotFound, PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(doc("List the connection's repositories", "As the provider lists them to the installation."))
      .annotateMerge(requires.permission("organization.integration.read")),
    HttpApiEndpoint.get("deliveries", `${INTEGRATIONS}/:connectionId/deliveries`, {
      params: oneParams,
      success: Envelope({ deliveries: Schema.Array(InboundDelivery) }),
      error: NotFound
    }).annotateMerge(doc("List inbound deliveries", "Provider webhooks attributed to this connection, newest first."))
      .annotateMerge(requires.permission("organization.integration.read")),
    HttpApiEndpoint.post("replay", `${INTEGRATIONS}/:connectionId/deliveries/:deliveryId/replay`, {
      params: { ...oneParams, deliveryId: InboundDeliveryId },
      success: Envelope({ delivery: InboundDelivery }),
      error: NotFound
    }).annotateMerge(doc("Replay an inbound delivery", "Re-runs normalization from the stored raw delivery."))
      .annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.get("listGrants", `${INTEGRATIONS}/:connectionId/grants`, {
      params: oneParams,
      success: Envelope({ grants: Schema.Array(IntegrationGrant) }),
      error: [NotFound, Forbidden]
    }).annotateMerge(
      doc("List a connection's admission grants", "Child workspaces admitted to a `granted` connection.")
    )
      .annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.post("createGrant", `${INTEGRATIONS}/:connectionId/grants`, {
      params: oneParams,
      payload: GrantInput,
      success: Envelope({ grant: IntegrationGrant }),
      error: [NotFound, Forbidden, Conflict]
    }).annotateMerge(doc(
      "Admit a child workspace to a connection",
      "`workspaceOrgId` must be a child workspace of this account (else 422); a duplicate grant is 409."
    )).annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.delete("revokeGrant", `${INTEGRATIONS}/:connectionId/grants/:workspaceOrgId`, {
      params: { ...oneParams, workspaceOrgId: OrgId },
      success: Envelope({ grant: IntegrationGrant }),
      error: [NotFound, Forbidden]
    }).annotateMerge(doc("Revoke an admission grant", "The child workspace stops seeing the connection at once."))
      .annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.get("listScopeTemplates", `${INTEGRATIONS}/providers/:provider/scope-templates`, {
      params: { ...orgParams, provider: ProviderName },
      success: Envelope({ scopeTemplates: Schema.Array(ScopeTemplate) }),
      error: NotFound
    }).annotateMerge(
      doc("List scope templates", "Declared and custom templates of the provider, retired ones included.")
    )
      .annotateMerge(requires.permission("organization.integration.read")),
    HttpApiEndpoint.post("createScopeTemplate", `${INTEGRATIONS}/providers/:provider/scope-templates`, {
      params: { ...orgParams, provider: ProviderName },
      payload: ScopeTemplateInput,
      success: Envelope({ scopeTemplate: ScopeTemplate }),
      error: [NotFound, Conflict]
    }).annotateMerge(doc(
      "Create a custom scope template",
      "`permissions` must be a subset of what the provider declares; a taken `templateId` is 409."
    )).annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.patch("updateScopeTemplate", `${INTEGRATIONS}/providers/:provider/scope-templates/:templateId`, {
      params: { ...orgParams, provider: ProviderName, templateId: TemplateId },
      payload: ScopeTemplatePatch,
      success: Envelope({ scopeTemplate: ScopeTemplate }),
      error: [NotFound, Conflict]
    }).annotateMerge(doc(
      "Change or retire a custom scope template",
      "`status: retired` is a soft retirement: still listed, no longer usable. Declared templates are read-only."
    )).annotateMerge(requires.permission("organization.integration.manage")),
    HttpApiEndpoint.get("listRepoLinks", REPO_LINKS, {
      params: linkParams,
      success: Envelope({ repoLinks: Schema.Array(RepoLink) }),
      error: NotFound
    }).annotateMerge(doc("List a project's repo links")).annotateMerge(
      requires.permission("organization.integration.read")
    ),
    HttpApiEndpoint.post("createRepoLink", REPO_LINKS, {
      params: linkParams,
      payload: RepoLinkInput,
      success: OneLink,
      error: [NotFound, Conflict, PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(doc(
      "Link a repository to a project",
      "The repository must be one of the active connection's; `branchEnvMap` values must be live environments of" +
        " the project. One link per (project, repository); counts against `limit.repo_links`."
    )).annotateMerge(requires.permission("project.repo_link.write")),
    HttpApiEndpoint.patch("updateRepoLink", `${REPO_LINKS}/:repoLinkId`, {
      params: { ...linkParams, repoLinkId: RepoLinkId },
      payload: RepoLinkPatch,
      success: OneLink,
      error: NotFound
    }).annotateMerge(doc("Change a repo link", "`branchEnvMap` and `defaultBranch`."))
      .annotateMerge(requires.permission("project.repo_link.write")),
    HttpApiEndpoint.delete("deleteRepoLink", `${REPO_LINKS}/:repoLinkId`, {
      params: { ...linkParams, repoLinkId: RepoLinkId },
      success: OneLink,
      error: NotFound
    }).annotateMerge(doc("Unlink a repository", "The final state, with `deletedAt`."))
      .annotateMerge(requires.permission("project.repo_link.write"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({
    title: "Integrations",
    description: "Provider connections, repo links, inbound deliveries and the token broker"
  }))
{}

/** The largest provider webhook the ingress reads (GitHub caps payloads at 25 MB; pushes are far smaller). */
export const MAX_INGRESS_BODY_BYTES = 5 * 1024 * 1024

/** The webhook's raw body: bytes, verified before they are parsed. */
const RawBody = Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/json" }))

/** A setup callback's answer as JSON (`Accept: application/json`); browsers get a 302 instead. */
const SetupResult = Envelope({ connection: IntegrationConnection, redirectUrl: Schema.String })

export class IngressApi extends HttpApiGroup.make("ingress")
  .add(
    HttpApiEndpoint.get("scmhostSetup", "/ingress/scmhost/setup", {
      query: {
        installation_id: Schema.optionalKey(describedText("The provider's installation id")),
        setup_action: Schema.optionalKey(describedText("`install` or `update`")),
        state: Schema.optionalKey(describedText("The signed single-use state the connect step issued"))
      },
      success: [SetupResult, HttpApiSchema.Empty(302)],
      error: [Unauthenticated, NotFound, Conflict, PreconditionFailed, ProviderUnavailable, RateLimited]
    }).annotateMerge(doc(
      "Finish installing the source-control app",
      "The provider redirects the browser here. The state is verified and consumed first, then the installation is" +
        " checked with the provider; a 302 to the connected page, or JSON with `Accept: application/json`."
    )).annotateMerge(requires.none),
    HttpApiEndpoint.post("scmhostWebhook", "/ingress/scmhost/webhook", {
      payload: RawBody,
      success: Envelope({ received: Schema.Boolean, deliveryId: Schema.NullOr(InboundDeliveryId) }),
      error: [Unauthenticated, RateLimited]
    }).annotateMerge(doc(
      "Receive a source-control webhook",
      "`x-hub-signature-256` (HMAC-SHA256 over the raw body) is verified before anything is parsed; unsigned or" +
        " badly signed deliveries are 401 and store nothing. A repeated `x-scmhost-delivery` answers 200 again."
    )).annotateMerge(requires.none).annotateMerge(maxBodyBytes(MAX_INGRESS_BODY_BYTES))
  )
  .annotateMerge(OpenApi.annotations({ title: "Provider ingress", description: "Provider callbacks and webhooks" }))
{}
