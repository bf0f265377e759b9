/** The stored shapes of integrations: connections, repo links, inbound deliveries, the scmhost simulator's installs. */
import { InboundDeliveryId, IntegrationConnectionId, OrgId, ProjectId, RepoLinkId } from "@cp/domain/ids"
import { InboundDelivery, IntegrationConnection, RepoLink } from "@cp/domain/integrations"
import { Schema, Struct } from "effect"
import { storedFields } from "../stored.ts"

/**
 * A row of `integration_connections`: the API's fields (without the inherited-row view) plus what the provider bound
 * it to (`installationId`, the external account, the installation's permissions as JSON text), the pending setup
 * state (id, issue and expiry time, when it was consumed) and, for generic providers, the custody columns of a pasted
 * token (sealed under its own data key, wrapped under the KEK; never plaintext).
 */
export const ConnectionRow = Schema.Struct({
  ...storedFields(Struct.omit(IntegrationConnection.fields, ["inherited", "sharedByWorkspaceRef", "sharedByName"])),
  externalAccountId: Schema.NullOr(Schema.String),
  installationId: Schema.NullOr(Schema.String),
  permissionsJson: Schema.String,
  stateId: Schema.NullOr(Schema.String),
  stateIssuedAt: Schema.NullOr(Schema.Date),
  stateExpiresAt: Schema.NullOr(Schema.Date),
  stateConsumedAt: Schema.NullOr(Schema.Date),
  sealedToken: Schema.NullOr(Schema.String),
  wrappedDataKey: Schema.NullOr(Schema.String),
  kekId: Schema.NullOr(Schema.String)
})
export type ConnectionRow = typeof ConnectionRow.Type

export const ConnectionKey = Schema.Struct({ orgId: OrgId, connectionId: IntegrationConnectionId })
export type ConnectionKey = typeof ConnectionKey.Type

/** Consumes a pending connection's setup state: only once, only before it expires. */
export const SetupStateConsumption = Schema.Struct({
  connectionId: IntegrationConnectionId,
  stateId: Schema.String,
  at: Schema.Date
})
export type SetupStateConsumption = typeof SetupStateConsumption.Type

export const InstallationKey = Schema.Struct({ provider: Schema.String, installationId: Schema.String })
export type InstallationKey = typeof InstallationKey.Type

/** A repo link as stored: `branchEnvMap` as its JSON text. */
export const RepoLinkRow = Schema.Struct({
  ...storedFields(Struct.omit(RepoLink.fields, ["branchEnvMap"])),
  branchEnvMapJson: Schema.String
})
export type RepoLinkRow = typeof RepoLinkRow.Type

export const RepoLinkKey = Schema.Struct({ orgId: OrgId, projectId: ProjectId, repoLinkId: RepoLinkId })
export type RepoLinkKey = typeof RepoLinkKey.Type
export const ProjectLinksQuery = Schema.Struct({ orgId: OrgId, projectId: ProjectId })
export type ProjectLinksQuery = typeof ProjectLinksQuery.Type
export const RepoLinkDeletion = Schema.Struct({ ...RepoLinkKey.fields, at: Schema.Date })
export type RepoLinkDeletion = typeof RepoLinkDeletion.Type
/** The live links of one repository through one connection (any workspace the connection serves). */
export const RepoLinksOfRepo = Schema.Struct({ connectionId: IntegrationConnectionId, repoExternalId: Schema.String })
export type RepoLinksOfRepo = typeof RepoLinksOfRepo.Type

/** An inbound delivery as stored: the raw body (base64 of the exact bytes) and the headers it came with. */
export const InboundDeliveryRow = Schema.Struct({
  ...storedFields(InboundDelivery.fields),
  provider: Schema.String,
  installationId: Schema.NullOr(Schema.String),
  headersJson: Schema.String,
  bodyBase64: Schema.String
})
export type InboundDeliveryRow = typeof InboundDeliveryRow.Type

export const DeliveryKey = Schema.Struct({ provider: Schema.String, deliveryKey: Schema.String })
export type DeliveryKey = typeof DeliveryKey.Type
export const ConnectionDeliveryKey = Schema.Struct({
  connectionId: IntegrationConnectionId,
  deliveryId: InboundDeliveryId
})
export type ConnectionDeliveryKey = typeof ConnectionDeliveryKey.Type
export const DeliveryOutcome = Schema.Struct({
  id: InboundDeliveryId,
  connectionId: Schema.NullOr(IntegrationConnectionId),
  status: Schema.Literals(["received", "attributed", "emitted", "skipped", "failed"]),
  failureReason: Schema.NullOr(Schema.String),
  processedAt: Schema.NullOr(Schema.Date)
})
export type DeliveryOutcome = typeof DeliveryOutcome.Type

/** One installation of the development simulator's app (`/dev/scmhost`). */
export const SimInstallationRow = Schema.Struct({
  id: Schema.String,
  accountId: Schema.String,
  accountLogin: Schema.String,
  accountType: Schema.String,
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type SimInstallationRow = typeof SimInstallationRow.Type
export const SimInstall = Schema.Struct({
  id: Schema.String,
  accountId: Schema.String,
  accountLogin: Schema.String,
  at: Schema.Date
})
export type SimInstall = typeof SimInstall.Type

/** An admission grant as stored. */
export const GrantRow = Schema.Struct({
  connectionId: IntegrationConnectionId,
  workspaceOrgId: OrgId,
  createdBy: Schema.String,
  createdAt: Schema.Date
})
export type GrantRow = typeof GrantRow.Type
export const GrantKey = Schema.Struct({ connectionId: IntegrationConnectionId, workspaceOrgId: OrgId })
export type GrantKey = typeof GrantKey.Type

/** A workspace's custom scope template as stored (`permissions` as JSON text). */
export const ScopeTemplateRow = Schema.Struct({
  orgId: OrgId,
  provider: Schema.String,
  templateId: Schema.String,
  displayName: Schema.String,
  description: Schema.String,
  permissionsJson: Schema.String,
  status: Schema.Literals(["active", "retired"]),
  createdBy: Schema.String,
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type ScopeTemplateRow = typeof ScopeTemplateRow.Type
export const ScopeTemplateKey = Schema.Struct({ orgId: OrgId, provider: Schema.String, templateId: Schema.String })
export type ScopeTemplateKey = typeof ScopeTemplateKey.Type
export const ProviderTemplatesQuery = Schema.Struct({ orgId: OrgId, provider: Schema.String })
export type ProviderTemplatesQuery = typeof ProviderTemplatesQuery.Type
