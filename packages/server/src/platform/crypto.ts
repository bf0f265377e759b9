/** Hashing, random tokens and HMAC-signed opaque tokens (cursors, OAuth state). */
import {
  createHash,
  createHmac,
  type KeyObject,
  randomBytes,
  randomFillSync,
  randomInt,
  timingSafeEqual
} from "node:crypto"

export const sha256Hex = (value: string): string => createHash("sha256").update(value).digest("hex")

export const hmacSha256Hex = (key: KeyObject | Uint8Array | string, value: string): string =>
  createHmac("sha256", key).update(value).digest("hex")

/** Constant-time equality for secrets and hashes. */
export const safeEqual = (a: string, b: string): boolean => {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}

export const randomHex = (bytes: number): string => randomBytes(bytes).toString("hex")

export const randomBase64Url = (bytes: number): string => randomBytes(bytes).toString("base64url")

/** A uniformly random string of `length` decimal digits. */
export const randomDigits = (length: number): string =>
  Array.from({ length }, () => randomInt(0, 10).toString()).join("")

/**
 * Signs a JSON payload for one purpose: `base64url(json).hex(hmac(purpose.payload))`. A token signed for
 * one purpose never verifies for another.
 */
export const signToken = (key: KeyObject, purpose: string, payload: unknown): string => {
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url")
  return `${body}.${createHmac("sha256", key).update(`${purpose}.${body}`).digest("base64url")}`
}

/** The payload of a token signed for `purpose`, or undefined when it is malformed or tampered with. */
export const verifyToken = (key: KeyObject, purpose: string, token: string): unknown => {
  const dot = token.indexOf(".")
  if (dot <= 0) return undefined
  const body = token.slice(0, dot)
  const expected = createHmac("sha256", key).update(`${purpose}.${body}`).digest("base64url")
  if (!safeEqual(expected, token.slice(dot + 1))) return undefined
  try {
    return JSON.parse(Buffer.from(body, "base64url").toString("utf8"))
  } catch {
    return undefined
  }
}

/** `a***@example.com`: enough to recognise an address, not enough to harvest it. */
export const maskEmail = (email: string): string => {
  const at = email.lastIndexOf("@")
  const local = email.slice(0, at)
  return `${local.charAt(0)}***${email.slice(at)}`
}

const pool = new Uint8Array(4096)
let poolOffset = pool.length

/**
 * A uniform number in [0, 1) from a pooled buffer of cryptographic random bytes: one `randomFillSync`
 * per 4 KiB instead of one call per value (ULIDs draw one value per character).
 */
export const pooledRandom = (): number => {
  if (poolOffset >= pool.length) {
    randomFillSync(pool)
    poolOffset = 0
  }
  return (pool[poolOffset++] ?? 0) / 256
}
