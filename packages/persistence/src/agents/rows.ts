/** The stored shape of agent provider connections (the key encrypted under its own data key, never plaintext). */
import { AgentProviderConnection } from "@cp/domain/agents"
import { AgentConnectionId, OrgId } from "@cp/domain/ids"
import { Schema, Struct } from "effect"
import { storedFields } from "../stored.ts"

/**
 * A row of `agent_connections`: the API's fields (config as its JSON text, so every value round-trips verbatim) plus
 * the custody columns. `sealedKey` is the provider key sealed under the connection's own data key; `wrappedDataKey`
 * is that data key sealed under the KEK whose id is `kekId`. Disconnecting shreds both (null) before `deletedAt` is
 * set, so no key can be recovered from the row or from a backup taken afterwards.
 */
export const AgentConnectionRow = Schema.Struct({
  ...storedFields(Struct.omit(AgentProviderConnection.fields, ["config", "source", "id"])),
  id: AgentConnectionId,
  orgId: OrgId,
  configJson: Schema.String,
  sealedKey: Schema.NullOr(Schema.String),
  wrappedDataKey: Schema.NullOr(Schema.String),
  kekId: Schema.NullOr(Schema.String),
  deletedAt: Schema.NullOr(Schema.Date)
})
export type AgentConnectionRow = typeof AgentConnectionRow.Type

/** One live connection of one workspace (another workspace's, or a disconnected one, is not found). */
export const AgentConnectionKey = Schema.Struct({ orgId: OrgId, connectionId: AgentConnectionId })
export type AgentConnectionKey = typeof AgentConnectionKey.Type

/** The workspace's live connections, optionally of one provider. */
export const AgentConnectionsQuery = Schema.Struct({ orgId: OrgId, provider: Schema.NullOr(Schema.String) })
export type AgentConnectionsQuery = typeof AgentConnectionsQuery.Type

/** Crypto-shredding at `at`: the sealed key and its wrapped data key are destroyed. */
export const AgentConnectionShred = Schema.Struct({ ...AgentConnectionKey.fields, at: Schema.Date })
export type AgentConnectionShred = typeof AgentConnectionShred.Type

/** A data key re-wrapped under `kekId`, only if it is still wrapped under `previousKekId`. */
export const AgentDataKeyRewrap = Schema.Struct({
  id: AgentConnectionId,
  previousKekId: Schema.String,
  wrappedDataKey: Schema.String,
  kekId: Schema.String
})
export type AgentDataKeyRewrap = typeof AgentDataKeyRewrap.Type

/** A wrapped data key as a rotation pass reads it. */
export const AgentWrappedKey = Schema.Struct({
  id: AgentConnectionId,
  wrappedDataKey: Schema.String,
  kekId: Schema.String
})
export type AgentWrappedKey = typeof AgentWrappedKey.Type

/** Up to `limit` wrapped data keys not under `kekId`, in id order after `afterId` (`""`: from the start). */
export const AgentWrappedKeysQuery = Schema.Struct({ kekId: Schema.String, afterId: Schema.String, limit: Schema.Int })
export type AgentWrappedKeysQuery = typeof AgentWrappedKeysQuery.Type
