/**
 * API-key bearer tokens (spec Authentication 4): the token's SHA-256 names the key. A revoked or expired key
 * resolves to nothing (401); a live one to its service principal, pinned to the key's workspace and project.
 */
import type { Actor } from "@cp/domain"
import type { ApiKeysRepo } from "@cp/persistence"
import { Clock, Effect, Option } from "effect"
import { sha256Hex } from "../platform/crypto.ts"

/** `lastUsedAt` is kept to this precision, so a busy key costs one write a minute rather than one per request. */
export const LAST_USED_PRECISION_MS = 60_000

/** The actor an API key authenticates as, or None; refreshes a stale `lastUsedAt` with a conditional update. */
export const resolveApiKey = Effect.fnUntraced(function*(keys: ApiKeysRepo["Service"], token: string) {
  const found = yield* keys.findBySecretHash(sha256Hex(token))
  if (Option.isNone(found)) return Option.none<Actor>()
  const key = found.value
  const now = yield* Clock.currentTimeMillis
  if (key.revokedAt !== null || (key.expiresAt !== null && key.expiresAt.getTime() <= now)) return Option.none<Actor>()
  const staleBefore = now - LAST_USED_PRECISION_MS
  if (key.lastUsedAt === null || key.lastUsedAt.getTime() < staleBefore) {
    yield* keys.touchLastUsed({ id: key.id, now: new Date(now), staleBefore: new Date(staleBefore) })
  }
  return Option.some<Actor>({
    kind: "service_principal",
    principalId: key.servicePrincipalId,
    apiKeyId: key.id,
    orgId: key.orgId,
    projectId: key.projectId,
    role: key.role
  })
})
