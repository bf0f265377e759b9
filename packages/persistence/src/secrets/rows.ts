/** The stored shape of the secrets area (one row per secret, its value sealed, never plaintext) and its requests. */
import { EnvironmentId, OrgId, ProjectId, SecretId } from "@cp/domain/ids"
import { Secret } from "@cp/domain/secrets"
import { Schema } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/**
 * A row of `secrets`: the API's metadata plus `sealedValue`, the AES-256-GCM sealed form
 * (`v1.<kid>.<nonce>.<tag>.<ciphertext>`), and `kekId`, the id of the key that sealed it, so the key can rotate. At
 * most one `active` row per key and scope.
 */
export const SecretRow = Schema.Struct({
  ...storedFields(Secret.fields),
  sealedValue: Schema.String,
  kekId: Schema.String,
  revokedAt: Schema.NullOr(Schema.Date)
})
export type SecretRow = typeof SecretRow.Type

/**
 * Which rows a list shows: `all` (every scope of the workspace), or exactly one scope (the workspace itself, one
 * project, or one environment).
 */
export const SecretScopeFilter = Schema.Union([
  Schema.Struct({ kind: Schema.Literal("all") }),
  Schema.Struct({ kind: Schema.Literal("organization") }),
  Schema.Struct({ kind: Schema.Literal("project"), projectId: ProjectId }),
  Schema.Struct({ kind: Schema.Literal("environment"), projectId: ProjectId, environmentId: EnvironmentId })
])
export type SecretScopeFilter = typeof SecretScopeFilter.Type

/** One secret of one workspace, any status (another workspace's is not found). */
export const SecretKey = Schema.Struct({ orgId: OrgId, secretId: SecretId })
export type SecretKey = typeof SecretKey.Type

/** A page of the workspace's active secrets in the filter's scope(s). */
export const SecretsPage = Schema.Struct({ orgId: OrgId, filter: SecretScopeFilter, ...pageFields })
export type SecretsPage = typeof SecretsPage.Type

/** A new sealed value for an active secret, at `at`. */
export const SecretRotation = Schema.Struct({
  ...SecretKey.fields,
  sealedValue: Schema.String,
  kekId: Schema.String,
  at: Schema.Date
})
export type SecretRotation = typeof SecretRotation.Type

/** Revoking an active secret at `at`. */
export const SecretRevocation = Schema.Struct({ ...SecretKey.fields, at: Schema.Date })
export type SecretRevocation = typeof SecretRevocation.Type
