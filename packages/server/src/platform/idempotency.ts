/** `Idempotency-Key` (contract §4), remembered in the database so it holds across replicas. */
import { Conflict, IDEMPOTENCY_KEY_PATTERN, ValidationFailed, wireError } from "@cp/domain"
import type { IdempotencyRepo, Transactor } from "@cp/persistence"
import { Duration, Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import type { KeyObject } from "node:crypto"
import { hmacSha256Hex } from "./crypto.ts"
import type { KeyEncryptionKey } from "./keys.ts"
import { renderError } from "./render.ts"
import { openWithAny, seal } from "./secretBox.ts"

export const IDEMPOTENCY_HEADER = "idempotency-key"
// One definition, shared with the API reference that documents the header.
export { IDEMPOTENT_METHODS } from "@cp/domain"

export const isValidIdempotencyKey = (key: string): boolean => IDEMPOTENCY_KEY_PATTERN.test(key)

/** JSON with object keys sorted, so two bodies that differ only in key order compare equal. */
export const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${canonicalJson(inner)}`).join(",")}}`
  }
  return JSON.stringify(value) ?? "null"
}

/** The fingerprint a repeated request must match: canonical JSON when the body parses, raw bytes otherwise. */
export const bodyFingerprint = (key: KeyObject, text: string): string => {
  // Keyed: a body can carry a secret value, and a plain hash would let a database reader test guesses.
  if (text === "") return hmacSha256Hex(key, "")
  try {
    return hmacSha256Hex(key, canonicalJson(JSON.parse(text)))
  } catch {
    return hmacSha256Hex(key, text)
  }
}

/** Answers that are remembered: everything below 500 except 429 (contract §4). */
export const isRememberedStatus = (status: number): boolean => status < 500 && status !== 429

const IN_FLIGHT_RELEASE_AFTER = Duration.seconds(60)

/** One request under an `Idempotency-Key`: who sent it where, with which body, and its own request id. */
export interface KeyedRequest {
  readonly key: string
  readonly principal: string
  readonly method: string
  readonly canonicalPath: string
  readonly body: string
  readonly now: number
  readonly requestId: string
}

/** The body of a response built in memory, as text; undefined for streamed bodies. */
export const responseText = (response: HttpServerResponse.HttpServerResponse): string | undefined => {
  const body = response.body
  if (body._tag === "Uint8Array") return new TextDecoder().decode(body.body)
  if (body._tag === "Empty") return ""
  return undefined
}

/**
 * Runs `routed` at most once per key (contract §4): a repeat replays the stored answer byte for byte,
 * a repeat with another body is 422 `key_reused`, a repeat while the first runs is 409; 5xx and 429
 * answers release the key instead of being remembered.
 *
 * The request runs in one transaction with the storing of its answer: the mutation and its answer commit together,
 * so a process killed in between leaves neither (the retry runs the request afresh once the claim is stale) and never
 * a committed mutation without its answer.
 */
export const withIdempotencyKey = Effect.fnUntraced(function*<E>(
  repo: IdempotencyRepo["Service"],
  tx: Transactor["Service"],
  keys: {
    readonly kek: KeyEncryptionKey
    readonly previousKeks: ReadonlyArray<KeyEncryptionKey>
    readonly signingKey: KeyObject
  },
  request: KeyedRequest,
  routed: Effect.Effect<HttpServerResponse.HttpServerResponse, E>
) {
  if (!isValidIdempotencyKey(request.key)) {
    return yield* renderError(wireError(ValidationFailed, "Idempotency-Key is malformed", {
      header: "Idempotency-Key",
      reason: "malformed"
    }))
  }
  const bodyHash = bodyFingerprint(keys.signingKey, request.body)
  const slot = { principal: request.principal, method: request.method, path: request.canonicalPath, key: request.key }
  const now = new Date(request.now)
  const started = yield* repo.begin({ ...slot, bodyHash, now, staleAfter: IN_FLIGHT_RELEASE_AFTER })
  switch (started._tag) {
    case "InFlight":
      return yield* renderError(wireError(Conflict, "A request with this Idempotency-Key is still in progress"))
    case "Completed": {
      if (started.bodyHash !== bodyHash) {
        return yield* renderError(wireError(ValidationFailed, "Idempotency-Key was used with a different body", {
          header: "Idempotency-Key",
          reason: "key_reused"
        }))
      }
      // A KEK being rotated away still opens the answers it sealed (`SECRETS_KEK_PREVIOUS`).
      const body = openWithAny([keys.kek, ...keys.previousKeks], started.body)
      if (body === undefined) {
        return yield* renderError(
          wireError(Conflict, "The stored answer for this Idempotency-Key can no longer be read")
        )
      }
      return HttpServerResponse.text(body, {
        status: started.status,
        contentType: "application/json",
        headers: { ...started.headers, "idempotent-replayed": "true" }
      })
    }
    case "Started": {
      const { response, remembered } = yield* tx.withTransaction(Effect.gen(function*() {
        const response = yield* routed
        const text = responseText(response)
        if (!isRememberedStatus(response.status) || text === undefined) return { response, remembered: false }
        yield* repo.complete({
          ...slot,
          status: response.status,
          headers: { "x-request-id": request.requestId },
          // Stored answers can carry secrets shown once (API keys, session tokens): sealed at rest.
          body: seal(keys.kek, text),
          now
        })
        return { response, remembered: true }
      })).pipe(Effect.onError(() => repo.release(slot)))
      if (!remembered) yield* repo.release(slot)
      return response
    }
  }
})
