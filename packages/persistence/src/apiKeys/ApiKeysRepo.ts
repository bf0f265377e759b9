/** API keys with the service principal behind each one: minted, looked up by secret hash, listed, revoked. */
import { Role } from "@cp/domain/access"
import { ApiKeyId, OrgId, ProjectId, ServicePrincipalId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Order, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"

/** A row of `api_keys` joined with its row of `service_principals` (`servicePrincipalName`). */
export const ApiKeyRow = Schema.Struct({
  /** A UUIDv7 minted by the server. */
  id: ApiKeyId,
  orgId: OrgId,
  servicePrincipalId: ServicePrincipalId,
  /** `API Key: <label>`, the principal's display name. */
  servicePrincipalName: Schema.String,
  label: Schema.String,
  /** The first 12 characters of the secret. */
  prefix: Schema.String,
  /** SHA-256 (hex) of the whole secret; the secret itself is never stored. */
  secretHash: Schema.String,
  /** The role of the principal's one binding; a project role comes with `projectId`. */
  role: Role,
  projectId: Schema.NullOr(ProjectId),
  createdAt: Schema.Date,
  expiresAt: Schema.NullOr(Schema.Date),
  lastUsedAt: Schema.NullOr(Schema.Date),
  revokedAt: Schema.NullOr(Schema.Date)
})
export type ApiKeyRow = typeof ApiKeyRow.Type

/** Where a page of a workspace's keys starts: the last key of the previous page. */
export interface ApiKeyPosition {
  readonly createdAt: Date
  readonly id: string
}

/** One keyset page of a workspace's keys, optionally only those of one project. */
export interface ApiKeyQuery {
  readonly orgId: OrgId
  readonly projectId?: ProjectId
  /** At most this many rows: ask for one more than the page size to learn whether another page follows. */
  readonly limit: number
  /** Exclusive: the page holds the keys strictly older than this position. */
  readonly after?: ApiKeyPosition
}

/** `order by created_at desc, id desc`: lists, newest first. */
const newestFirst: Order.Order<ApiKeyPosition> = Order.flip(Order.Struct({ createdAt: Order.Date, id: Order.String }))

const uniques: ReadonlyArray<UniqueKey<ApiKeyRow>> = [
  primaryKey("api_keys_pkey"),
  { constraint: "api_keys_secret_hash_key", key: (key) => key.secretHash },
  { constraint: "api_keys_service_principal_key", key: (key) => key.servicePrincipalId }
]

const KeyInOrg = Schema.Struct({ orgId: OrgId, id: ApiKeyId })
const ListKeys = Schema.Struct({
  orgId: OrgId,
  projectId: Schema.optionalKey(ProjectId),
  limit: Schema.Int,
  after: Schema.optionalKey(Schema.Struct({ createdAt: Schema.Date, id: Schema.String }))
})
const Revoke = Schema.Struct({ id: ApiKeyId, now: Schema.Date })
const Touch = Schema.Struct({ id: ApiKeyId, now: Schema.Date, staleBefore: Schema.Date })
const UpdatedId = Schema.Struct({ id: ApiKeyId })

/** API keys; `findBySecretHash` is the indexed read behind every API-key-authenticated request. */
export class ApiKeysRepo extends Context.Service<ApiKeysRepo, {
  /** Inserts the principal and the key together; `UniqueViolation` on a duplicate id, principal or secret hash. */
  readonly insert: (key: ApiKeyRow) => Effect.Effect<void, UniqueViolation>
  /** The key with this id in this workspace; None for an unknown id or another workspace's key. */
  readonly findById: (orgId: OrgId, id: ApiKeyId) => Effect.Effect<Option.Option<ApiKeyRow>>
  /** The key whose secret hashes to `secretHash`, whatever its state (the caller checks revocation and expiry). */
  readonly findBySecretHash: (secretHash: string) => Effect.Effect<Option.Option<ApiKeyRow>>
  /** Up to `limit` of the workspace's keys strictly after `after`, newest first (createdAt desc, id desc). */
  readonly list: (query: ApiKeyQuery) => Effect.Effect<ReadonlyArray<ApiKeyRow>>
  /** Sets `revokedAt` to `now` unless the key is already revoked; true when this call revoked it. */
  readonly revoke: (id: ApiKeyId, now: Date) => Effect.Effect<boolean>
  /** Sets `lastUsedAt` to `now` only when it is unset or older than `staleBefore`; true when it wrote. */
  readonly touchLastUsed: (id: ApiKeyId, now: Date, staleBefore: Date) => Effect.Effect<boolean>
}>()("@cp/persistence/apiKeys/ApiKeysRepo") {
  /** Keys in a Map, for fast deterministic tests. */
  static readonly memory = Layer.sync(ApiKeysRepo, () => {
    const keys = new Map<ApiKeyId, ApiKeyRow>()
    const first = (predicate: (key: ApiKeyRow) => boolean) =>
      Option.fromUndefinedOr(Array.from(keys.values()).find(predicate))
    return ApiKeysRepo.of({
      insert: Effect.fn("ApiKeysRepo.insert")((key: ApiKeyRow) => insertUnique(keys, key.id, key, uniques)),
      findById: Effect.fn("ApiKeysRepo.findById")(function*(orgId: OrgId, id: ApiKeyId) {
        return Option.filter(Option.fromUndefinedOr(keys.get(id)), (key) => key.orgId === orgId)
      }),
      findBySecretHash: Effect.fn("ApiKeysRepo.findBySecretHash")(function*(secretHash: string) {
        return first((key) => key.secretHash === secretHash)
      }),
      list: Effect.fn("ApiKeysRepo.list")(function*({ orgId, projectId, limit, after }: ApiKeyQuery) {
        return Array.from(keys.values())
          .filter((key) =>
            key.orgId === orgId &&
            (projectId === undefined || key.projectId === projectId) &&
            (after === undefined || newestFirst(key, after) > 0)
          )
          .sort(newestFirst)
          .slice(0, limit)
      }),
      revoke: Effect.fn("ApiKeysRepo.revoke")((id: ApiKeyId, now: Date) =>
        updateRow(keys, id, (key) => key.revokedAt === null ? Option.some({ ...key, revokedAt: now }) : Option.none())
          .pipe(Effect.map(Option.isSome))
      ),
      touchLastUsed: Effect.fn("ApiKeysRepo.touchLastUsed")((id: ApiKeyId, now: Date, staleBefore: Date) =>
        updateRow(keys, id, (key) =>
          key.lastUsedAt === null || key.lastUsedAt < staleBefore
            ? Option.some({ ...key, lastUsedAt: now })
            : Option.none()).pipe(Effect.map(Option.isSome))
      )
    })
  })

  /** Keys in `api_keys`, their principals in `service_principals`. */
  static readonly sql = Layer.effect(
    ApiKeysRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const selectKeys = sql`
        select k.*, p.display_name as service_principal_name
        from api_keys k join service_principals p on p.id = k.service_principal_id`
      // One statement writes both rows, so neither can exist without the other even outside a transaction.
      const insert = SqlSchema.void({
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
      })
      const findById = SqlSchema.findOneOption({
        Request: KeyInOrg,
        Result: ApiKeyRow,
        execute: ({ orgId, id }) => sql`${selectKeys} where k.id = ${id} and k.org_id = ${orgId}`
      })
      const findBySecretHash = SqlSchema.findOneOption({
        Request: Schema.String,
        Result: ApiKeyRow,
        execute: (secretHash) => sql`${selectKeys} where k.secret_hash = ${secretHash}`
      })
      const list = SqlSchema.findAll({
        Request: ListKeys,
        Result: ApiKeyRow,
        execute: ({ orgId, projectId, limit, after }) =>
          sql`
            ${selectKeys}
            where ${
            sql.and([
              sql`k.org_id = ${orgId}`,
              ...(projectId === undefined ? [] : [sql`k.project_id = ${projectId}`]),
              ...(after === undefined ? [] : [sql`(k.created_at, k.id) < (${after.createdAt}, ${after.id})`])
            ])
          }
            order by k.created_at desc, k.id desc
            limit ${limit}`
      })
      const revoke = SqlSchema.findOneOption({
        Request: Revoke,
        Result: UpdatedId,
        execute: ({ id, now }) =>
          sql`update api_keys set revoked_at = ${now} where id = ${id} and revoked_at is null returning id`
      })
      const touchLastUsed = SqlSchema.findOneOption({
        Request: Touch,
        Result: UpdatedId,
        execute: ({ id, now, staleBefore }) =>
          sql`
            update api_keys set last_used_at = ${now}
            where id = ${id} and (last_used_at is null or last_used_at < ${staleBefore})
            returning id`
      })
      return ApiKeysRepo.of({
        insert: Effect.fn("ApiKeysRepo.insert")((key: ApiKeyRow) => uniqueViolationOrDie(insert(key))),
        findById: Effect.fn("ApiKeysRepo.findById")((orgId: OrgId, id: ApiKeyId) =>
          Effect.orDie(findById({ orgId, id }))
        ),
        findBySecretHash: Effect.fn("ApiKeysRepo.findBySecretHash")((secretHash: string) =>
          Effect.orDie(findBySecretHash(secretHash))
        ),
        list: Effect.fn("ApiKeysRepo.list")((query: ApiKeyQuery) => Effect.orDie(list(query))),
        revoke: Effect.fn("ApiKeysRepo.revoke")((id: ApiKeyId, now: Date) =>
          revoke({ id, now }).pipe(Effect.map(Option.isSome), Effect.orDie)
        ),
        touchLastUsed: Effect.fn("ApiKeysRepo.touchLastUsed")((id: ApiKeyId, now: Date, staleBefore: Date) =>
          touchLastUsed({ id, now, staleBefore }).pipe(Effect.map(Option.isSome), Effect.orDie)
        )
      })
    })
  )
}
