/** `Idempotency-Key` rules of contract §4 that do not depend on storage. */
import { sha256Hex } from "./crypto.ts"

export const IDEMPOTENCY_HEADER = "idempotency-key"
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])
const KEY_PATTERN = /^[A-Za-z0-9\-_.:]{1,255}$/

export const isValidIdempotencyKey = (key: string): boolean => KEY_PATTERN.test(key)

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
export const bodyFingerprint = (text: string): string => {
  if (text === "") return sha256Hex("")
  try {
    return sha256Hex(canonicalJson(JSON.parse(text)))
  } catch {
    return sha256Hex(text)
  }
}

/** Answers that are remembered: everything below 500 except 429 (contract §4). */
export const isRememberedStatus = (status: number): boolean => status < 500 && status !== 429
