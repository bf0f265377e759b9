/** API keys: workspace-scoped bearer credentials, each backed by a service principal with one role binding. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Role } from "./access.ts"
import { Conflict, NotFound } from "./errors.ts"
import { ApiKeyId, ProjectId, ServicePrincipalId } from "./ids.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { Name, OrgRef } from "./workspaces.ts"

/** A key's label: at most 128 characters, not blank (the workspace name's rule). */
export const ApiKeyLabel = Name

/** ISO 8601: a date, or a date and time with an optional fraction and a `Z` or `±hh:mm` offset. */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}))?$/

/** Whether the `YYYY-MM-DD` a timestamp starts with is a real day (`Date` would roll Feb 30 over to March). */
const isCalendarDay = (text: string): boolean => {
  const [year = 0, month = 0, day = 0] = text.slice(0, 10).split("-").map(Number)
  return month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate()
}

/** A timestamp a client sends: ISO 8601 only (not every string `Date` happens to parse), on a real day. */
export const IsoTimestamp = Text.check(
  Schema.isPattern(ISO_8601, { message: "must be an ISO 8601 timestamp" }),
  Schema.makeFilter((text: string) => !ISO_8601.test(text) || isCalendarDay(text) || "is not a real date")
).pipe(Schema.decodeTo(Timestamp))

export const ApiKeyServicePrincipal = Schema.Struct({
  id: ServicePrincipalId,
  /** `API Key: <label>`. */
  displayName: Schema.String,
  role: Role,
  /** Null for a workspace-scoped key. */
  projectId: Schema.NullOr(ProjectId)
})
export type ApiKeyServicePrincipal = typeof ApiKeyServicePrincipal.Type

/** An API key as lists show it: never any secret material beyond the 12-character prefix. */
export const ApiKey = Schema.Struct({
  id: ApiKeyId,
  label: Schema.String,
  prefix: Schema.String,
  createdAt: Timestamp,
  expiresAt: Schema.NullOr(Timestamp),
  lastUsedAt: Schema.NullOr(Timestamp),
  revokedAt: Schema.NullOr(Timestamp),
  servicePrincipal: ApiKeyServicePrincipal
})
export type ApiKey = typeof ApiKey.Type

/** The create answer: the key plus its `sk_…` secret, shown this once and never again. */
export const CreatedApiKey = Schema.Struct({ ...ApiKey.fields, secret: Schema.String })
export type CreatedApiKey = typeof CreatedApiKey.Type

/** The DELETE answer: the revoked key's final state. */
export const RevokedApiKey = Schema.Struct({
  id: ApiKeyId,
  label: Schema.String,
  prefix: Schema.String,
  revokedAt: Timestamp
})
export type RevokedApiKey = typeof RevokedApiKey.Type

/** `projectId` is required for a project role and absent for a workspace role (checked by the service). */
export const CreateApiKey = Schema.Struct({
  label: ApiKeyLabel,
  role: Role,
  projectId: Schema.optionalKey(ProjectId),
  expiresAt: Schema.optionalKey(IsoTimestamp)
})
export type CreateApiKey = typeof CreateApiKey.Type

const orgParams = { orgId: OrgRef }

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.post("create", "/v1/organizations/:orgId/api-keys", {
      params: orgParams,
      payload: CreateApiKey,
      success: Envelope({ apiKey: CreatedApiKey })
    }).annotateMerge(
      doc(
        "Create an API key",
        "Returns the secret (`sk_…`) exactly once; the key acts as a service principal with the given " +
          "role in this workspace (and project, when scoped)."
      )
    ).annotateMerge(requires.permission("organization.api_key.create")),
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/api-keys", {
      params: orgParams,
      query: { ...PageQuery, projectId: Schema.optionalKey(ProjectId) },
      success: Page({ apiKeys: Schema.Array(ApiKey) })
    }).annotateMerge(doc("List API keys", "Key metadata and prefixes; secrets are never shown again.")).annotateMerge(
      requires.permission("organization.api_key.list")
    ),
    HttpApiEndpoint.delete("revoke", "/v1/organizations/:orgId/api-keys/:apiKeyId", {
      params: { ...orgParams, apiKeyId: ApiKeyId },
      success: Envelope({ apiKey: RevokedApiKey }),
      error: [NotFound, Conflict]
    }).annotateMerge(
      doc("Revoke an API key", "The key answers 401 from then on; revoking it again is a 409 `conflict`.")
    ).annotateMerge(requires.permission("organization.api_key.revoke"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({
    title: "API keys",
    description: "Workspace API keys, each backed by a service principal with one role binding"
  }))
{}
