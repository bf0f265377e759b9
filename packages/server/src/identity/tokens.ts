/** Session bearer tokens: `sps_ses_<ULID>.<secret>`; only a hash of the secret is stored. */
import { SessionId } from "@cp/domain"
import { Schema } from "effect"
import { randomHex, sha256Hex } from "../platform/crypto.ts"

const SESSION_TOKEN = /^sps_(ses_[0-9A-HJKMNP-TV-Z]{26})\.([0-9a-f]{64})$/
const isSessionId = Schema.is(SessionId)

export interface ParsedSessionToken {
  readonly sessionId: SessionId
  readonly secretHash: string
}

/** The session a token names and the hash to compare, or undefined when it is not a session token. */
export const parseSessionToken = (token: string): ParsedSessionToken | undefined => {
  const match = SESSION_TOKEN.exec(token)
  const sessionId = match?.[1]
  const secret = match?.[2]
  if (sessionId === undefined || secret === undefined || !isSessionId(sessionId)) return undefined
  return { sessionId, secretHash: sha256Hex(secret) }
}

/** A fresh token for a session id, with the hash to store. */
export const mintSessionToken = (sessionId: SessionId): { readonly token: string; readonly secretHash: string } => {
  const secret = randomHex(32)
  return { token: `sps_${sessionId}.${secret}`, secretHash: sha256Hex(secret) }
}
