/**
 * API keys (spec: API key, API keys endpoints, Authentication 4–6): minting a key with its service principal and
 * role binding, listing, revoking. Only signed-in users manage keys, and nobody mints a key stronger than itself.
 */
import {
  type Actor,
  ApiKey,
  type ApiKeyId,
  Conflict,
  type CreateApiKey,
  type CreatedApiKey,
  Forbidden,
  isProjectRole,
  NotFound,
  type Paged,
  type ProjectId,
  type ResolvedWorkspace,
  type RevokedApiKey,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  type ApiKeyRow,
  ApiKeysRepo,
  idPosition,
  OrganizationsRepo,
  ProjectsRepo,
  RoleBindingsRepo,
  Transactor,
  type UserRow,
  UsersRepo
} from "@cp/persistence"
import { Clock, Context, Effect, Layer } from "effect"
import { SecurityLog } from "../identity/securityLog.ts"
import { authenticatedUser } from "../identity/users.ts"
import { lockedAuthority } from "../platform/authority.ts"
import { randomHex, sha256Hex } from "../platform/crypto.ts"
import { apiJson, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { coversRole } from "../platform/rbac.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { requireProjectIn } from "../projects/scope.ts"

/** The secret's first characters kept in clear, the only key material lists show. */
export const KEY_PREFIX_LENGTH = 12

/** `sk_` + 64 hex characters (256 random bits). */
export const mintSecret = (): string => `sk_${randomHex(32)}`

export const toApiKey = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  label: row.label,
  prefix: row.prefix,
  createdAt: row.createdAt,
  expiresAt: row.expiresAt,
  lastUsedAt: row.lastUsedAt,
  revokedAt: row.revokedAt,
  servicePrincipal: {
    id: row.servicePrincipalId,
    displayName: row.servicePrincipalName,
    role: row.role,
    projectId: row.projectId
  }
})

/** The checks the body schema cannot make: `projectId` against the role, `expiresAt` against the clock. */
const invalidFields = (input: CreateApiKey, now: number): Record<string, ReadonlyArray<string>> => ({
  ...(isProjectRole(input.role) && input.projectId === undefined
    ? { projectId: ["is required when role is a project role"] }
    : {}),
  ...(!isProjectRole(input.role) && input.projectId !== undefined
    ? { projectId: ["must be absent when role is a workspace role"] }
    : {}),
  ...(input.expiresAt !== undefined && input.expiresAt.getTime() <= now
    ? { expiresAt: ["must be in the future"] }
    : {})
})

type UserActor = Extract<Actor, { readonly kind: "user" }>

/** Keys are managed by people: an API key gets 403 here even when its role holds the permission. */
const userOnly = (actor: Actor): Effect.Effect<UserActor, Forbidden> =>
  actor.kind === "user"
    ? Effect.succeed(actor)
    : Effect.fail(wireError(Forbidden, "Only a signed-in user can create or revoke API keys"))

export class ApiKeysService extends Context.Service<ApiKeysService, {
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: CreateApiKey
  ) => Effect.Effect<{ readonly apiKey: CreatedApiKey }, Forbidden | ValidationFailed>
  readonly list: (
    workspace: ResolvedWorkspace,
    query: PageRequest & { readonly projectId?: ProjectId }
  ) => Effect.Effect<Paged<{ readonly apiKeys: ReadonlyArray<ApiKey> }>, ValidationFailed>
  readonly revoke: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    id: ApiKeyId
  ) => Effect.Effect<{ readonly apiKey: RevokedApiKey }, Forbidden | NotFound | Conflict>
}>()("@cp/server/ApiKeysService") {
  static readonly layer = Layer.effect(
    ApiKeysService,
    Effect.gen(function*() {
      const keys = yield* ApiKeysRepo
      const bindings = yield* RoleBindingsRepo
      const users = yield* UsersRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const securityLog = yield* SecurityLog
      const cursors = yield* Cursors
      const authority = lockedAuthority(yield* OrganizationsRepo, yield* WorkspaceResolver)

      const keyMetadata = (key: ApiKeyRow) =>
        Object.fromEntries(Object.entries(apiJson(ApiKey, toApiKey(key))).filter(([field]) => field !== "prefix"))

      /** The workspace event (and its audit entry) and the user's security event; no key material in either. */
      const recordKeyEvent = Effect.fnUntraced(function*(
        user: UserRow,
        key: ApiKeyRow,
        type: "api_key.created" | "api_key.revoked"
      ) {
        yield* events.record({
          orgId: key.orgId,
          type,
          actor: { actorType: "user", actorId: user.id },
          subject: { kind: "api_key", id: key.id, name: key.label },
          projectId: key.projectId,
          // webhooks.md §1: the key's API metadata, less its `prefix` (key material); a revoke changed `revokedAt`.
          data: type === "api_key.created"
            ? { apiKey: keyMetadata(key) }
            : { apiKey: keyMetadata(key), previous: { revokedAt: null } },
          description: type === "api_key.created"
            ? `API key ${key.label} created with role ${key.role}`
            : `API key ${key.label} revoked`
        })
        yield* securityLog.record({
          email: user.email,
          userId: user.id,
          eventType: type,
          outcome: "success",
          metadata: {
            keyId: key.id,
            label: key.label,
            role: key.role,
            projectId: key.projectId,
            servicePrincipalId: key.servicePrincipalId,
            expiresAt: key.expiresAt?.toISOString() ?? null,
            orgId: key.orgId
          }
        })
      })

      return ApiKeysService.of({
        create: Effect.fn("ApiKeys.create")(function*(actor, workspace, input) {
          const caller = yield* userOnly(actor)
          const now = yield* Clock.currentTimeMillis
          const fields = invalidFields(input, now)
          if (Object.keys(fields).length > 0) return yield* validationFailed(fields)
          const projectId = input.projectId ?? null
          if (projectId !== null) yield* requireProjectIn(projects, workspace.organization.id, projectId, "projectId")
          const user = yield* authenticatedUser(users, caller.userId)
          const secret = mintSecret()
          const label = input.label.trim()
          const createdAt = new Date(now)
          const row: ApiKeyRow = {
            id: mint.apiKey(now),
            orgId: workspace.organization.id,
            servicePrincipalId: mint.servicePrincipal(now),
            servicePrincipalName: `API Key: ${label}`,
            label,
            prefix: secret.slice(0, KEY_PREFIX_LENGTH),
            secretHash: sha256Hex(secret),
            role: input.role,
            projectId,
            createdAt,
            expiresAt: input.expiresAt ?? null,
            lastUsedAt: null,
            revokedAt: null
          }
          yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "organization.api_key.create")
            if (!coversRole(current.grants, input.role, projectId)) {
              return yield* wireError(
                Forbidden,
                `You cannot create a key with role ${input.role}: it would hold permissions you do not`,
                { role: input.role }
              )
            }
            // Fresh random ids and a fresh 256-bit secret: a collision is a defect, not the caller's conflict.
            yield* keys.insert(row).pipe(Effect.orDie)
            yield* bindings.insert({
              id: mint.roleBinding(now),
              orgId: row.orgId,
              subjectType: "service_principal",
              subjectId: row.servicePrincipalId,
              role: row.role,
              scopeKind: projectId === null ? "organization" : "project",
              scopeRef: projectId,
              createdAt
            }).pipe(Effect.orDie)
            yield* recordKeyEvent(user, row, "api_key.created")
          }))
          return { apiKey: { ...toApiKey(row), secret } }
        }),

        list: Effect.fn("ApiKeys.list")(function*(workspace, query) {
          const orgId = workspace.organization.id
          const filter = query.projectId === undefined ? {} : { projectId: query.projectId }
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "apiKeys.list", scope: orgId, filters: filter },
            query,
            (window) => keys.list({ orgId, ...filter, ...window }),
            idPosition
          )
          return { data: { apiKeys: items.map(toApiKey) }, cursor }
        }),

        revoke: Effect.fn("ApiKeys.revoke")(function*(actor, workspace, id) {
          const caller = yield* userOnly(actor)
          const found = yield* keys.findById({ orgId: workspace.organization.id, id }).pipe(
            orFail(() => wireError(NotFound, "API key not found"))
          )
          const alreadyRevoked = wireError(Conflict, "This API key is already revoked")
          if (found.revokedAt !== null) return yield* alreadyRevoked
          const user = yield* authenticatedUser(users, caller.userId)
          const revokedAt = yield* currentDate
          yield* tx.withTransaction(Effect.gen(function*() {
            yield* authority(actor, workspace, "organization.api_key.revoke")
            // Conditional: of two concurrent revokes exactly one wins; the other is the same 409.
            if (!(yield* keys.revoke({ id, now: revokedAt }))) return yield* alreadyRevoked
            yield* recordKeyEvent(user, { ...found, revokedAt }, "api_key.revoked")
          }))
          const { label, prefix } = found
          return { apiKey: { id, label, prefix, revokedAt } }
        })
      })
    })
  )
}
