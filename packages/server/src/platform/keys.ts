/**
 * The server's own keys (contract §3): the HMAC signing key for cursors and state tokens, and the
 * key-encryption key for secrets at rest. Production reads them from the environment; development and
 * test generate them once and keep them in the database so every process on one database shares them.
 */
import { ServerSecretsRepo } from "@cp/persistence"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { createSecretKey, type KeyObject } from "node:crypto"
import { AppConfig } from "./config.ts"
import { randomBase64Url, sha256Hex } from "./crypto.ts"

export interface KeyEncryptionKey {
  readonly id: string
  readonly key: Uint8Array
}

/** A KEK and its id: the first 12 hex characters of the SHA-256 of its base64 form. */
const keyEncryptionKey = (key: Buffer): KeyEncryptionKey => ({
  id: sha256Hex(key.toString("base64")).slice(0, 12),
  key
})

export class ServerKeys extends Context.Service<ServerKeys, {
  /** A prepared key object: HMAC with it skips the per-call key import. */
  readonly signingKey: KeyObject
  readonly kek: KeyEncryptionKey
  /** Earlier KEKs (`SECRETS_KEK_PREVIOUS`): values sealed under them still open until a rotation re-wraps them. */
  readonly previousKeks: ReadonlyArray<KeyEncryptionKey>
}>()("@cp/server/ServerKeys") {
  static readonly layer = Layer.effect(
    ServerKeys,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const secrets = yield* ServerSecretsRepo
      const read = (configured: Option.Option<Redacted.Redacted>, name: string) =>
        Option.match(configured, {
          onSome: (value) => Effect.succeed(Redacted.value(value)),
          onNone: () =>
            secrets.getOrCreate(name, () => Buffer.from(randomBase64Url(32), "base64url").toString("base64"))
        })
      const signing = yield* read(config.tokenSigningKey, "token_signing_key")
      const kek = Buffer.from(yield* read(config.secretsKek, "secrets_kek"), "base64")
      if (kek.length !== 32) return yield* Effect.die(new Error("SECRETS_KEK must be base64 of exactly 32 bytes"))
      const previous = config.previousKeks.map((value) => Buffer.from(Redacted.value(value), "base64"))
      if (previous.some((key) => key.length !== 32)) {
        return yield* Effect.die(new Error("SECRETS_KEK_PREVIOUS must list base64 keys of exactly 32 bytes"))
      }
      return ServerKeys.of({
        signingKey: createSecretKey(Buffer.from(signing, "utf8")),
        kek: keyEncryptionKey(kek),
        previousKeks: previous.map(keyEncryptionKey)
      })
    })
  )
}
