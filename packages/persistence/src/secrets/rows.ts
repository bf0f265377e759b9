/** The stored shape of the secrets area: one row per secret, its value sealed (never plaintext). */
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { SecretId, SecretScopeKind, SecretStatus } from "@cp/domain/secrets"
import { Schema } from "effect"

/**
 * A row of `secrets`. `sealedValue` is the AES-256-GCM sealed form (`v1.<kid>.<nonce>.<tag>.<ciphertext>`) and
 * `kekId` the id of the key that sealed it, so the key can rotate. At most one `active` row per key and scope.
 */
export const SecretRow = Schema.Struct({
  id: SecretId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: SecretScopeKind,
  secretKey: Schema.String,
  displayName: Schema.String,
  status: SecretStatus,
  version: Schema.Int,
  sealedValue: Schema.String,
  kekId: Schema.String,
  rotationPolicy: Schema.NullOr(Schema.String),
  lastRotatedAt: Schema.NullOr(Schema.Date),
  expiresAt: Schema.NullOr(Schema.Date),
  createdBy: Schema.String,
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  revokedAt: Schema.NullOr(Schema.Date)
})
export type SecretRow = typeof SecretRow.Type

/**
 * Which rows a list shows: `all` (every scope of the workspace), or exactly one scope (the workspace itself, one
 * project, or one environment).
 */
export type SecretScopeFilter =
  | { readonly kind: "all" }
  | { readonly kind: "organization" }
  | { readonly kind: "project"; readonly projectId: ProjectId }
  | { readonly kind: "environment"; readonly projectId: ProjectId; readonly environmentId: EnvironmentId }

/** A keyset position in a newest-first list. */
export interface SecretPagePosition {
  readonly at: Date
  readonly key: string
}

export interface SecretPageWindow {
  readonly after?: SecretPagePosition | undefined
  readonly limit: number
}
