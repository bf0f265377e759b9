/**
 * Encryption at rest with the key-encryption key (contract §3): AES-256-GCM, a fresh 96-bit nonce per
 * value, and the key id stored with the value so the KEK can rotate. Sealed form:
 * `v1.<kid>.<nonce>.<tag>.<ciphertext>`, each part base64url.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import type { KeyEncryptionKey } from "./keys.ts"

export const seal = (kek: KeyEncryptionKey, plaintext: string): string => {
  const nonce = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", kek.key, nonce)
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
  return [
    "v1",
    kek.id,
    nonce.toString("base64url"),
    cipher.getAuthTag().toString("base64url"),
    ciphertext.toString("base64url")
  ]
    .join(".")
}

/** The plaintext, or undefined when the value was sealed under another key or was tampered with. */
export const open = (kek: KeyEncryptionKey, sealed: string): string | undefined => {
  const [version, kid, nonce, tag, ciphertext] = sealed.split(".")
  if (version !== "v1" || kid !== kek.id || nonce === undefined || tag === undefined || ciphertext === undefined) {
    return undefined
  }
  try {
    const decipher = createDecipheriv("aes-256-gcm", kek.key, Buffer.from(nonce, "base64url"))
    decipher.setAuthTag(Buffer.from(tag, "base64url"))
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString("utf8")
  } catch {
    return undefined
  }
}

/** The plaintext, opened with whichever of `keks` sealed it (its id is in the sealed form); undefined if none did. */
export const openWithAny = (keks: ReadonlyArray<KeyEncryptionKey>, sealed: string): string | undefined => {
  const kid = sealed.split(".")[1]
  const kek = keks.find((candidate) => candidate.id === kid)
  return kek === undefined ? undefined : open(kek, sealed)
}
