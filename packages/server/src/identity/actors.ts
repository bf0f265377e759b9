/**
 * Bearer resolution: a token that parses as a session token is a session; anything else is looked up as
 * an API key (spec Authentication 4). Sessions are read from the database on every request, so a logout
 * on any replica stops the token at once.
 */
import { ApiKeysRepo, SessionsRepo } from "@cp/persistence"
import { Clock, Effect, Layer, Option } from "effect"
import { resolveApiKey } from "../apiKeys/bearer.ts"
import { ActorResolver } from "../platform/actors.ts"
import { safeEqual } from "../platform/crypto.ts"
import { parseSessionToken } from "./tokens.ts"

export const ActorResolverLive = Layer.effect(
  ActorResolver,
  Effect.gen(function*() {
    const sessions = yield* SessionsRepo
    const apiKeys = yield* ApiKeysRepo
    return ActorResolver.of({
      resolve: Effect.fnUntraced(function*(token) {
        const parsed = parseSessionToken(token)
        if (parsed === undefined) return yield* resolveApiKey(apiKeys, token)
        const found = yield* sessions.findById(parsed.sessionId)
        const now = yield* Clock.currentTimeMillis
        return Option.flatMap(found, (session) =>
          session.revokedAt === null && session.expiresAt.getTime() > now &&
            safeEqual(session.secretHash, parsed.secretHash)
            ? Option.some({ kind: "user" as const, userId: session.userId, sessionId: session.id })
            : Option.none())
      })
    })
  })
)
