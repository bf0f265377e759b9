/**
 * Agent provider connections (spec "Agent provider connections"; integrations-agents.md §4). A key is verified with
 * the provider before anything is stored (401/403: 412 `key_rejected`, nothing stored; unreachable: stored
 * `unverified`), then held in custody under envelope encryption (`custody.ts`). Platform rows are synthetic and
 * read-only. Responses, events and audit entries carry `keyHint` only; nothing here logs a key.
 */
import {
  type Actor,
  actorId,
  AgentConnectionId,
  type AgentConnectionInput,
  type AgentConnectionPatch,
  type AgentEventType,
  type AgentProvider,
  type AgentProviderConnection,
  Conflict,
  type KekRotation,
  NotFound,
  PreconditionFailed,
  ProviderConnectionConflict,
  ProviderUnavailable,
  RESERVED_NAME_MESSAGE,
  RESERVED_NAME_PREFIX,
  type ResolvedWorkspace,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import { type AgentConnectionRow, AgentConnectionsRepo, Transactor, UsersRepo } from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { type AgentPlatformProvider, AppConfig } from "../platform/config.ts"
import { eventActorOf, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { ServerKeys } from "../platform/keys.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { keyHintOf, lock, rewrap, unlock } from "./custody.ts"
import { AgentProviderClient } from "./providers.ts"

const EPOCH = new Date(0)
const ROTATION_BATCH = 100

/** The synthetic row of one `AGENT_PLATFORM_PROVIDERS` entry (spec: ids, names, epoch timestamps, always verified). */
export const platformRow = (entry: AgentPlatformProvider): AgentProviderConnection => ({
  id: AgentConnectionId.make(`apc_platform_${entry.provider}_${entry.slug}`),
  provider: entry.provider,
  name: `${RESERVED_NAME_PREFIX}${entry.slug}`,
  config: {
    ...(entry.defaultModel === undefined ? {} : { defaultModel: entry.defaultModel }),
    ...(entry.baseUrl === undefined ? {} : { baseUrl: entry.baseUrl })
  },
  keyHint: null,
  status: "verified",
  lastVerifiedAt: EPOCH,
  createdBy: "platform",
  createdAt: EPOCH,
  updatedAt: EPOCH,
  source: "platform"
})

const ConfigJson = Schema.fromJsonString(Schema.Record(Schema.String, Schema.Json))

/** The API view of a stored row: never the sealed key, its data key or the KEK id. */
export const toConnection = (row: AgentConnectionRow): AgentProviderConnection => ({
  id: row.id,
  provider: row.provider,
  name: row.name,
  config: Schema.decodeUnknownSync(ConfigJson)(row.configJson),
  keyHint: row.keyHint,
  status: row.status,
  lastVerifiedAt: row.lastVerifiedAt,
  createdBy: row.createdBy,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
  source: "workspace"
})

const notFound = (connectionId: string) => wireError(NotFound, "Agent provider connection not found", { connectionId })
const keyRejected = (provider: AgentProvider) =>
  wireError(PreconditionFailed, `The ${provider} API rejected the key; nothing was stored`, {
    reason: "key_rejected",
    provider
  })
const nameTaken = (provider: AgentProvider, name: string) =>
  wireError(ProviderConnectionConflict, `A ${provider} connection named ${name} already exists`, { provider, name })
const reservedName = () => validationFailed({ name: [RESERVED_NAME_MESSAGE] })
const readOnly = (connectionId: string) =>
  wireError(Conflict, "Platform connections are read-only", { connectionId, reason: "platform_connection_read_only" })

export class AgentProvidersService extends Context.Service<AgentProvidersService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    provider: AgentProvider | undefined
  ) => Effect.Effect<ReadonlyArray<AgentProviderConnection>>
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: AgentConnectionInput
  ) => Effect.Effect<
    { readonly connection: AgentProviderConnection },
    ValidationFailed | ProviderConnectionConflict | PreconditionFailed
  >
  readonly update: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: AgentConnectionId,
    patch: AgentConnectionPatch
  ) => Effect.Effect<
    { readonly connection: AgentProviderConnection },
    NotFound | Conflict | ValidationFailed | ProviderConnectionConflict | PreconditionFailed
  >
  readonly disconnect: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: AgentConnectionId
  ) => Effect.Effect<{ readonly connection: AgentProviderConnection }, NotFound | Conflict>
  readonly verify: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: AgentConnectionId
  ) => Effect.Effect<{ readonly connection: AgentProviderConnection }, NotFound | Conflict | ProviderUnavailable>
  /** Re-wraps every data key not under the current KEK (operators only: `PLATFORM_ADMIN_EMAILS`). */
  readonly rotateKek: (actor: Actor) => Effect.Effect<KekRotation, NotFound>
}>()("@cp/server/AgentProvidersService") {
  static readonly layer = Layer.effect(
    AgentProvidersService,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const connections = yield* AgentConnectionsRepo
      const users = yield* UsersRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const client = yield* AgentProviderClient
      const keys = yield* ServerKeys
      const platform = config.agentPlatformProviders.map(platformRow)
      const platformIds = new Set<string>(platform.map((row) => row.id))

      /** A live workspace connection; a platform id is read-only (409), anything else 404. */
      const findWritable = (workspace: ResolvedWorkspace, connectionId: AgentConnectionId) =>
        platformIds.has(connectionId)
          ? Effect.fail(readOnly(connectionId))
          : connections.find({ orgId: workspace.organization.id, connectionId }).pipe(
            orFail(() => notFound(connectionId))
          )

      const record = (
        actor: Actor,
        type: AgentEventType,
        row: AgentConnectionRow,
        changed?: ReadonlyArray<"name" | "config" | "key" | "status">
      ) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "agent_provider_connection", id: row.id, name: row.name },
          // Metadata only: the key, its data key and the KEK id never reach an event or audit entry.
          data: {
            id: row.id,
            provider: row.provider,
            name: row.name,
            status: row.status,
            keyHint: row.keyHint,
            ...(changed === undefined ? {} : { changed: [...changed] })
          },
          description: `Agent provider ${row.provider} connection ${row.name} ${type.slice("agent_provider.".length)}`
        })

      /** Verifies a new key: rejected fails (nothing stored), otherwise its custody and status. */
      const admit = Effect.fnUntraced(function*(provider: AgentProvider, apiKey: string) {
        const check = yield* client.check(provider, apiKey)
        if (check === "rejected") return yield* keyRejected(provider)
        const at = yield* currentDate
        return {
          ...lock(keys.kek, apiKey),
          keyHint: keyHintOf(apiKey),
          status: check === "accepted" ? "verified" as const : "unverified" as const,
          lastVerifiedAt: check === "accepted" ? at : null
        }
      })

      /** Whether another live connection of the workspace has this (provider, name): checked before the provider. */
      const nameInUse = (orgId: AgentConnectionRow["orgId"], provider: AgentProvider, name: string, except?: string) =>
        Effect.map(
          connections.list({ orgId, provider }),
          (rows) => rows.some((row) => row.name === name && row.id !== except)
        )

      return AgentProvidersService.of({
        list: Effect.fn("AgentProvidersService.list")(function*(workspace, provider) {
          const rows = yield* connections.list({ orgId: workspace.organization.id, provider: provider ?? null })
          return [
            ...rows.map(toConnection),
            ...platform.filter((row) => provider === undefined || row.provider === provider)
          ]
        }),

        create: Effect.fn("AgentProvidersService.create")(function*(actor, workspace, input) {
          const name = input.name ?? "default"
          // Reserved names are refused before custody is touched: no provider call, no encryption.
          if (name.startsWith(RESERVED_NAME_PREFIX)) return yield* reservedName()
          const orgId = workspace.organization.id
          if (yield* nameInUse(orgId, input.provider, name)) return yield* nameTaken(input.provider, name)
          const admitted = yield* admit(input.provider, input.apiKey)
          const at = yield* currentDate
          const row: AgentConnectionRow = {
            id: mint.agentConnection(at.getTime()),
            orgId,
            provider: input.provider,
            name,
            configJson: JSON.stringify(input.config ?? {}),
            ...admitted,
            createdBy: actorId(actor),
            createdAt: at,
            updatedAt: at,
            deletedAt: null
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* connections.insert(row).pipe(
              Effect.catchTag("UniqueViolation", () => Effect.fail(nameTaken(row.provider, name)))
            )
            yield* record(actor, "agent_provider.connected", row)
            return { connection: toConnection(row) }
          }))
        }),

        update: Effect.fn("AgentProvidersService.update")(function*(actor, workspace, connectionId, patch) {
          const current = yield* findWritable(workspace, connectionId)
          if (patch.name?.startsWith(RESERVED_NAME_PREFIX) === true) return yield* reservedName()
          const name = patch.name ?? current.name
          if (name !== current.name && (yield* nameInUse(current.orgId, current.provider, name, current.id))) {
            return yield* nameTaken(current.provider, name)
          }
          // A new key is verified first; a rejected one changes nothing.
          const admitted = patch.apiKey === undefined ? undefined : yield* admit(current.provider, patch.apiKey)
          const next: AgentConnectionRow = {
            ...current,
            ...admitted,
            name,
            configJson: patch.config === undefined ? current.configJson : JSON.stringify(patch.config),
            updatedAt: yield* currentDate
          }
          const changed = [
            ...(name !== current.name ? ["name" as const] : []),
            ...(next.configJson !== current.configJson ? ["config" as const] : []),
            ...(admitted === undefined ? [] : ["key" as const]),
            ...(next.status !== current.status ? ["status" as const] : [])
          ]
          return yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* connections.update(next).pipe(
              Effect.catchTag("UniqueViolation", () => Effect.fail(nameTaken(current.provider, name))),
              orFail(() => notFound(connectionId))
            )
            yield* record(actor, "agent_provider.updated", stored, changed)
            return { connection: toConnection(stored) }
          }))
        }),

        disconnect: Effect.fn("AgentProvidersService.disconnect")(function*(actor, workspace, connectionId) {
          yield* findWritable(workspace, connectionId)
          return yield* tx.withTransaction(Effect.gen(function*() {
            // Crypto-shredding: the wrapped data key and the sealed key are destroyed as the row is marked deleted.
            const shredded = yield* connections.shred({
              orgId: workspace.organization.id,
              connectionId,
              at: yield* currentDate
            }).pipe(orFail(() => notFound(connectionId)))
            yield* record(actor, "agent_provider.disconnected", shredded)
            return { connection: toConnection(shredded) }
          }))
        }),

        verify: Effect.fn("AgentProvidersService.verify")(function*(actor, workspace, connectionId) {
          const current = yield* findWritable(workspace, connectionId)
          const { kekId, sealedKey, wrappedDataKey } = current
          const apiKey = sealedKey === null || wrappedDataKey === null || kekId === null
            ? undefined
            : unlock(keys, { sealedKey, wrappedDataKey, kekId })
          if (apiKey === undefined) {
            return yield* Effect.die(
              new Error(`No configured KEK opens the data key of ${connectionId} (kek ${kekId})`)
            )
          }
          const check = yield* client.check(current.provider, apiKey)
          if (check === "unreachable") {
            return yield* wireError(ProviderUnavailable, `The ${current.provider} API could not be reached`, {
              provider: current.provider
            })
          }
          const at = yield* currentDate
          const next: AgentConnectionRow = {
            ...current,
            status: check === "accepted" ? "verified" : "invalid",
            lastVerifiedAt: at,
            updatedAt: at
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* connections.update(next).pipe(
              Effect.catchTag("UniqueViolation", Effect.die),
              orFail(() => notFound(connectionId))
            )
            if (stored.status !== current.status) {
              yield* record(actor, "agent_provider.updated", stored, ["status"])
            }
            return { connection: toConnection(stored) }
          }))
        }),

        rotateKek: Effect.fn("AgentProvidersService.rotateKek")(function*(actor) {
          const user = actor.kind === "user"
            ? yield* users.findById(actor.userId)
            : Option.none()
          if (Option.isNone(user) || !config.platformAdminEmails.includes(user.value.email.toLowerCase())) {
            return yield* wireError(NotFound, "No route matches this path")
          }
          let rewrapped = 0
          let afterId = ""
          // Batches in id order, claimed with `for update skip locked` so two rotations at once share the work; a key
          // no configured KEK opens is passed over (counted in `remaining`), never retried in a loop.
          while (true) {
            const batch = yield* tx.withTransaction(Effect.gen(function*() {
              const claimed = yield* connections.claimWrappedNotUnder({
                kekId: keys.kek.id,
                afterId,
                limit: ROTATION_BATCH
              })
              let stored = 0
              for (const row of claimed) {
                const wrapped = rewrap(keys, row.wrappedDataKey)
                if (wrapped === undefined) continue
                const ok = yield* connections.rewrap({
                  id: row.id,
                  previousKekId: row.kekId,
                  wrappedDataKey: wrapped,
                  kekId: keys.kek.id
                })
                if (ok) stored++
              }
              return { stored, lastId: claimed.at(-1)?.id }
            }))
            rewrapped += batch.stored
            if (batch.lastId === undefined) break
            afterId = batch.lastId
          }
          const remaining = yield* connections.countNotUnder(keys.kek.id)
          if (remaining > 0) {
            yield* Effect.logWarning("KEK rotation left data keys that no configured KEK opens").pipe(
              Effect.annotateLogs({ remaining })
            )
          }
          return { kekId: keys.kek.id, rewrapped, remaining }
        })
      })
    })
  )
}
