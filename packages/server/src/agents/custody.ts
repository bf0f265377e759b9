/**
 * Envelope encryption of custody keys (integrations-agents.md §4; contract §3): each key is sealed under its own
 * random 256-bit data key, and the data key is sealed under the KEK, whose id is kept so the KEK can rotate. Both use
 * the platform's `seal`/`open` (AES-256-GCM). Nothing here logs; the plaintext lives only in the returned values.
 */
import { randomBytes } from "node:crypto"
import type { KeyEncryptionKey } from "../platform/keys.ts"
import { open, openWithAny, seal } from "../platform/secretBox.ts"

/** The custody columns of one connection. */
export interface Custody {
  readonly sealedKey: string
  readonly wrappedDataKey: string
  readonly kekId: string
}

export interface Keks {
  readonly kek: KeyEncryptionKey
  readonly previousKeks: ReadonlyArray<KeyEncryptionKey>
}

/** The data key's own "key id" inside its sealed value: it is never stored apart from the value it seals. */
const DATA_KEY_ID = "dek"

const dataKeyOf = (key: Uint8Array): KeyEncryptionKey => ({ id: DATA_KEY_ID, key })

/** Seals `apiKey` under a fresh data key, wrapped under the current KEK. */
export const lock = (kek: KeyEncryptionKey, apiKey: string): Custody => {
  const dataKey = randomBytes(32)
  return {
    sealedKey: seal(dataKeyOf(dataKey), apiKey),
    wrappedDataKey: seal(kek, dataKey.toString("base64")),
    kekId: kek.id
  }
}

/** The data key, unwrapped with whichever known KEK (current or previous) wrapped it; undefined if none did. */
const unwrap = (keks: Keks, wrappedDataKey: string): Buffer | undefined => {
  const dataKey = openWithAny([keks.kek, ...keks.previousKeks], wrappedDataKey)
  return dataKey === undefined ? undefined : Buffer.from(dataKey, "base64")
}

/** The provider key, or undefined when no known KEK opens its data key (or the row was tampered with). */
export const unlock = (keks: Keks, custody: Custody): string | undefined => {
  const dataKey = unwrap(keks, custody.wrappedDataKey)
  return dataKey === undefined ? undefined : open(dataKeyOf(dataKey), custody.sealedKey)
}

/** The data key re-wrapped under the current KEK, without touching the sealed provider key; undefined if unopenable. */
export const rewrap = (keks: Keks, wrappedDataKey: string): string | undefined => {
  const dataKey = unwrap(keks, wrappedDataKey)
  return dataKey === undefined ? undefined : seal(keks.kek, dataKey.toString("base64"))
}

/** `…` and the last four characters (spec: keyHint). */
export const keyHintOf = (apiKey: string): string => `…${apiKey.slice(-4)}`
