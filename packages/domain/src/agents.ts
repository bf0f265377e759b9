/**
 * Agent provider connections (spec: "Agent provider connections"; integrations-agents.md §4): model keys for
 * `anthropic`, `openai` and `gemini`, and a compute account for `modal`, held in custody. The key is write-only:
 * verified against the provider before it is stored, encrypted under its own data key (wrapped by `SECRETS_KEK`),
 * and never returned, logged or evented; answers carry only `keyHint`. Platform rows (`AGENT_PLATFORM_PROVIDERS`)
 * are synthetic and read-only. Also the operator's KEK rotation route that `cpctl admin rotate-kek` calls.
 */
import { Effect, Schema, SchemaGetter } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, NotFound, PreconditionFailed, ProviderConnectionConflict, ProviderUnavailable } from "./errors.ts"
import { AgentConnectionId } from "./ids.ts"
import { doc } from "./reference.ts"
import { Authentication, Authorization, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { JsonValue, LineText, Text } from "./text.ts"
import { CurrentRequestId, Envelope, Meta, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** Three model-key providers and one compute-account provider. */
export const AgentProvider = Schema.Literals(["anthropic", "openai", "gemini", "modal"])
export type AgentProvider = typeof AgentProvider.Type
export const agentProviders: ReadonlyArray<AgentProvider> = AgentProvider.literals

/** `verified` (the provider accepted the key), `unverified` (it could not be reached), `invalid` (it refused). */
export const AgentConnectionStatus = Schema.Literals(["verified", "unverified", "invalid"])
export type AgentConnectionStatus = typeof AgentConnectionStatus.Type

/** Workspace rows are the workspace's own; platform rows come from the server's configuration. */
export const AgentConnectionSource = Schema.Literals(["workspace", "platform"])
export type AgentConnectionSource = typeof AgentConnectionSource.Type

/** A free-form map of settings (for example `defaultModel`); its values bounded JSON. */
export const AgentConnectionConfig = Schema.Record(Text, JsonValue)
export type AgentConnectionConfig = typeof AgentConnectionConfig.Type

/** Names starting `platform-` are reserved for platform rows (spec). */
export const RESERVED_NAME_PREFIX = "platform-"
export const RESERVED_NAME_MESSAGE = "names starting 'platform-' are reserved"

export const AgentConnectionName = LineText.check(Schema.isMinLength(1), Schema.isMaxLength(63))

/** The key as pasted: 8 to 4096 characters, no whitespace (a key never has any; a stray newline is a mistake). */
export const AgentApiKey = Text.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(4096),
  Schema.isPattern(/^\S+$/, { message: "must not contain whitespace" })
)

export const AgentProviderConnection = Schema.Struct({
  id: AgentConnectionId,
  provider: AgentProvider,
  name: Schema.String,
  config: Schema.Record(Schema.String, Schema.Json),
  keyHint: Schema.NullOr(Schema.String),
  status: AgentConnectionStatus,
  lastVerifiedAt: Schema.NullOr(Timestamp),
  createdBy: Schema.String,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  source: Schema.optionalKey(AgentConnectionSource)
})
export type AgentProviderConnection = typeof AgentProviderConnection.Type

export const AgentConnectionInput = Schema.Struct({
  provider: AgentProvider,
  apiKey: AgentApiKey,
  name: Schema.optionalKey(AgentConnectionName),
  config: Schema.optionalKey(AgentConnectionConfig)
})
export type AgentConnectionInput = typeof AgentConnectionInput.Type

export const AgentConnectionPatch = Schema.Struct({
  name: Schema.optionalKey(AgentConnectionName),
  config: Schema.optionalKey(AgentConnectionConfig),
  apiKey: Schema.optionalKey(AgentApiKey)
})
export type AgentConnectionPatch = typeof AgentConnectionPatch.Type

/** What one KEK rotation pass did: data keys re-wrapped under `kekId`, and how many still are not. */
export const KekRotation = Schema.Struct({
  kekId: Schema.String,
  rewrapped: Schema.Int,
  remaining: Schema.Int
})
export type KekRotation = typeof KekRotation.Type

/**
 * The `data` of each event this area writes (for the event catalog). No key material, not even the hint's source:
 * `keyHint` is already public.
 */
const EventConnection = {
  id: Schema.String,
  provider: AgentProvider,
  name: Schema.String,
  status: AgentConnectionStatus,
  keyHint: Schema.NullOr(Schema.String)
}
export const AgentEventData = {
  "agent_provider.connected": Schema.Struct(EventConnection),
  "agent_provider.updated": Schema.Struct({
    ...EventConnection,
    changed: Schema.Array(Schema.Literals(["name", "config", "key", "status"]))
  }),
  "agent_provider.disconnected": Schema.Struct(EventConnection)
} as const
export type AgentEventType = keyof typeof AgentEventData

/** The list's envelope: `data` is the bare array (spec's success envelope), `meta.cursor` always null. */
const ConnectionList = Schema.Array(AgentProviderConnection)
const ListEnvelope = Schema.Struct({ data: ConnectionList, meta: Meta }).pipe(
  Schema.decodeTo(Schema.toType(ConnectionList), {
    decode: SchemaGetter.transform((envelope) => envelope.data),
    encode: SchemaGetter.transformEffect((rows) =>
      Effect.map(Effect.service(CurrentRequestId), (requestId) => ({ data: rows, meta: { requestId, cursor: null } }))
    )
  })
)

const collection = "/v1/organizations/:orgId/agents/providers"
const orgParams = { orgId: OrgRef }
const oneParams = { ...orgParams, connectionId: AgentConnectionId }
const One = Envelope({ connection: AgentProviderConnection })

/** The list answers a bare array (spec's success envelope); the rest `{ connection }`. */
export class AgentProvidersApi extends HttpApiGroup.make("agentProviders")
  .add(
    HttpApiEndpoint.get("list", collection, {
      params: orgParams,
      query: {
        provider: Schema.optionalKey(AgentProvider.annotate({ description: "Only this provider's connections" }))
      },
      success: ListEnvelope,
      error: NotFound
    }).annotateMerge(doc(
      "List agent provider connections",
      "A bare array: the workspace's connections (newest first), then the platform's read-only rows."
    )).annotateMerge(requires.permission("organization.agent.provider.read")),
    HttpApiEndpoint.post("create", collection, {
      params: orgParams,
      payload: AgentConnectionInput,
      success: One,
      error: [NotFound, ProviderConnectionConflict, PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(doc(
      "Connect an agent provider",
      "The key is verified with the provider first (rejected: 412 `key_rejected`; unreachable: stored `unverified`)."
    )).annotateMerge(requires.permission("organization.agent.provider.write")),
    HttpApiEndpoint.patch("update", `${collection}/:connectionId`, {
      params: oneParams,
      payload: AgentConnectionPatch,
      success: One,
      error: [NotFound, Conflict, ProviderConnectionConflict, PreconditionFailed, ProviderUnavailable]
    }).annotateMerge(doc("Update an agent provider connection", "A new `apiKey` is verified first."))
      .annotateMerge(requires.permission("organization.agent.provider.write")),
    HttpApiEndpoint.delete("disconnect", `${collection}/:connectionId`, {
      params: oneParams,
      success: One,
      error: [NotFound, Conflict]
    }).annotateMerge(doc("Disconnect an agent provider", "The key is crypto-shredded; the final state is returned."))
      .annotateMerge(requires.permission("organization.agent.provider.write")),
    HttpApiEndpoint.post("verify", `${collection}/:connectionId/verify`, {
      params: oneParams,
      success: One,
      error: [NotFound, Conflict, ProviderUnavailable]
    }).annotateMerge(doc("Verify an agent provider connection", "Re-checks the stored key: `verified` or `invalid`."))
      .annotateMerge(requires.permission("organization.agent.provider.write"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({
    title: "Agent providers",
    description: "Model-key and compute-account connections held in custody"
  }))
{}

/**
 * Operator routes: only signed-in users whose email `PLATFORM_ADMIN_EMAILS` lists may call them; to anyone else they
 * do not exist (404, like an unknown route).
 */
export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.post("rotateKek", "/v1/admin/kek/rotate", {
      success: Envelope({ rotation: KekRotation }),
      error: NotFound
    }).annotateMerge(doc("Rotate the key-encryption key", "Operators only: re-wraps every data key under SECRETS_KEK."))
      .annotateMerge(requires.session)
  )
  .middleware(Authorization)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Admin", description: "Operator routes (KEK rotation)" }))
{}
