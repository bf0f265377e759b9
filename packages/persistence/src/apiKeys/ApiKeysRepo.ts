/** API keys with the service principal behind each one: minted, looked up by secret hash, listed, revoked. */
import { Role } from "@cp/domain/access"
import { ApiKey } from "@cp/domain/apiKeys"
import { ApiKeyId, OrgId, ProjectId, ServicePrincipalId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema, Struct } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { idPosition, keysetQuery, pageFields, windowOf } from "../keyset.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { storedFields } from "../stored.ts"
import { SubjectTables } from "../subjects.ts"

/**
 * A row of `api_keys` joined with its row of `service_principals`: the API's key, its principal flattened
 * (`servicePrincipalName` is the principal's display name), plus the secret's hash.
 */
export const ApiKeyRow = Schema.Struct({
  ...storedFields(Struct.omit(ApiKey.fields, ["servicePrincipal"])),
  orgId: OrgId,
  servicePrincipalId: ServicePrincipalId,
  /** `API Key: <label>`, the principal's display name. */
  servicePrincipalName: Schema.String,
  /** SHA-256 (hex) of the whole secret; the secret itself is never stored. */
  secretHash: Schema.String,
  /** The role of the principal's one binding; a project role comes with `projectId`. */
  role: Role,
  projectId: Schema.NullOr(ProjectId)
})
export type ApiKeyRow = typeof ApiKeyRow.Type

/** One key of one workspace (another workspace's key is not found). */
export const ApiKeyKey = Schema.Struct({ orgId: OrgId, id: ApiKeyId })
export type ApiKeyKey = typeof ApiKeyKey.Type

/** A page of a workspace's keys, optionally only those of one project. */
export const ApiKeysPage = Schema.Struct({ orgId: OrgId, projectId: Schema.optionalKey(ProjectId), ...pageFields })
export type ApiKeysPage = typeof ApiKeysPage.Type

/** Revoking a key at `now`. */
export const ApiKeyRevocation = Schema.Struct({ id: ApiKeyId, now: Schema.Date })
export type ApiKeyRevocation = typeof ApiKeyRevocation.Type

/** Recording a use at `now` when the stored one is older than `staleBefore`. */
export const ApiKeyUse = Schema.Struct({ id: ApiKeyId, now: Schema.Date, staleBefore: Schema.Date })
export type ApiKeyUse = typeof ApiKeyUse.Type

const uniques: ReadonlyArray<UniqueKey<ApiKeyRow>> = [
  primaryKey("api_keys_pkey"),
  { constraint: "api_keys_secret_hash_key", key: (key) => key.secretHash },
  { constraint: "api_keys_service_principal_key", key: (key) => key.servicePrincipalId }
]

const UpdatedRow = Schema.Struct({ id: ApiKeyId })

/** API keys; `findBySecretHash` is the indexed read behind every API-key-authenticated request. */
export class ApiKeysRepo extends Context.Service<ApiKeysRepo, {
  /** Inserts the principal and the key together; `UniqueViolation` on a duplicate id, principal or secret hash. */
  readonly insert: (key: ApiKeyRow) => Effect.Effect<void, UniqueViolation>
  /** The key with this id in this workspace; None for an unknown id or another workspace's key. */
  readonly findById: (key: ApiKeyKey) => Effect.Effect<Option.Option<ApiKeyRow>>
  /** The key whose secret hashes to `secretHash`, whatever its state (the caller checks revocation and expiry). */
  readonly findBySecretHash: (secretHash: string) => Effect.Effect<Option.Option<ApiKeyRow>>
  /** Up to `limit` of the workspace's keys strictly after `after`, newest first (createdAt desc, id desc). */
  readonly list: (page: ApiKeysPage) => Effect.Effect<ReadonlyArray<ApiKeyRow>>
  /** Sets `revokedAt` to `now` unless the key is already revoked; true when this call revoked it. */
  readonly revoke: (revocation: ApiKeyRevocation) => Effect.Effect<boolean>
  /** Sets `lastUsedAt` to `now` only when it is unset or older than `staleBefore`; true when it wrote. */
  readonly touchLastUsed: (use: ApiKeyUse) => Effect.Effect<boolean>
}>()("@cp/persistence/apiKeys/ApiKeysRepo") {
  /** Keys in the shared subject tables (members and teams read their principals), for fast deterministic tests. */
  static readonly memory = Layer.effect(
    ApiKeysRepo,
    Effect.gen(function*() {
      const { apiKeys: keys } = yield* SubjectTables
      return ApiKeysRepo.of({
        insert: (key) => insertUnique(keys, key.id, key, uniques),
        findById: ({ orgId, id }) =>
          Effect.sync(() => Option.filter(Option.fromUndefinedOr(keys.get(id)), (key) => key.orgId === orgId)),
        findBySecretHash: (secretHash) =>
          Effect.sync(() =>
            Option.fromUndefinedOr(Array.from(keys.values()).find((key) => key.secretHash === secretHash))
          ),
        list: (page) =>
          Effect.sync(() => {
            const rows = Array.from(keys.values()).filter((key) =>
              key.orgId === page.orgId && (page.projectId === undefined || key.projectId === page.projectId)
            )
            return windowOf(rows, idPosition, page)
          }),
        revoke: ({ id, now }) =>
          updateRow(keys, id, (key) => key.revokedAt === null ? Option.some({ ...key, revokedAt: now }) : Option.none())
            .pipe(Effect.map(Option.isSome)),
        touchLastUsed: ({ id, now, staleBefore }) =>
          updateRow(keys, id, (key) =>
            key.lastUsedAt === null || key.lastUsedAt < staleBefore
              ? Option.some({ ...key, lastUsedAt: now })
              : Option.none()).pipe(Effect.map(Option.isSome))
      })
    })
  ).pipe(Layer.provide(SubjectTables.layer))

  /** Keys in `api_keys`, their principals in `service_principals`. */
  static readonly sql = Layer.effect(
    ApiKeysRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const selectKeys = sql`
        select k.*, p.display_name as service_principal_name
        from api_keys k join service_principals p on p.id = k.service_principal_id`
      return ApiKeysRepo.of({
        // One statement writes both rows, so neither can exist without the other even outside a transaction.
        insert: flow(
          SqlSchema.void({
            Request: ApiKeyRow,
            execute: ({ servicePrincipalName, ...key }) =>
              sql`
                with principal as (
                  insert into service_principals ${
                sql.insert({
                  id: key.servicePrincipalId,
                  orgId: key.orgId,
                  displayName: servicePrincipalName,
                  createdAt: key.createdAt
                })
              }
                )
                insert into api_keys ${sql.insert(key)}`
          }),
          uniqueViolationOrDie
        ),
        findById: flow(
          SqlSchema.findOneOption({
            Request: ApiKeyKey,
            Result: ApiKeyRow,
            execute: ({ orgId, id }) => sql`${selectKeys} where k.id = ${id} and k.org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        findBySecretHash: flow(
          SqlSchema.findOneOption({
            Request: Schema.String,
            Result: ApiKeyRow,
            execute: (secretHash) => sql`${selectKeys} where k.secret_hash = ${secretHash}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: ApiKeysPage,
            Result: ApiKeyRow,
            execute: ({ orgId, projectId, ...window }) =>
              keysetQuery(
                sql,
                selectKeys,
                [sql`k.org_id = ${orgId}`, ...(projectId === undefined ? [] : [sql`k.project_id = ${projectId}`])],
                window,
                { at: "k.created_at", key: "k.id" }
              )
          }),
          Effect.orDie
        ),
        revoke: flow(
          SqlSchema.findOneOption({
            Request: ApiKeyRevocation,
            Result: UpdatedRow,
            execute: ({ id, now }) =>
              sql`update api_keys set revoked_at = ${now} where id = ${id} and revoked_at is null returning id`
          }),
          Effect.map(Option.isSome),
          Effect.orDie
        ),
        touchLastUsed: flow(
          SqlSchema.findOneOption({
            Request: ApiKeyUse,
            Result: UpdatedRow,
            execute: ({ id, now, staleBefore }) =>
              sql`
                update api_keys set last_used_at = ${now}
                where id = ${id} and (last_used_at is null or last_used_at < ${staleBefore})
                returning id`
          }),
          Effect.map(Option.isSome),
          Effect.orDie
        )
      })
    })
  )
}
