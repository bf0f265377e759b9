/**
 * Bearer resolution: a token that parses as a session token is a session; anything else is looked up as
 * an API key (spec Authentication 4). Sessions are read from the database on every request, so a logout
 * on any replica stops the token at once.
 */
import type { Actor } from "@cp/domain"
import { ApiKeysRepo, type SessionRow, SessionsRepo } from "@cp/persistence"
import { Clock, Effect, Layer, Option } from "effect"
import { resolveApiKey } from "../apiKeys/bearer.ts"
import { ActorResolver } from "../platform/actors.ts"
import { safeEqual } from "../platform/crypto.ts"
import { ServerKeys } from "../platform/keys.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { visibleTo, WorkspaceResolverLive } from "../workspaces/resolver.ts"
import { type ParsedSessionToken, parseSessionToken } from "./tokens.ts"
import { parseWorkflowToken, WORKFLOW_TOKEN_PREFIX } from "./workflowTokens.ts"

/** The user of a session that is neither revoked nor expired and whose secret matches the token's. */
const acceptSession = (session: SessionRow, token: ParsedSessionToken, now: number): Option.Option<Actor> =>
  session.revokedAt === null && session.expiresAt.getTime() > now && safeEqual(session.secretHash, token.secretHash)
    ? Option.some({ kind: "user", userId: session.userId, sessionId: session.id })
    : Option.none()

export const ActorResolverLive = Layer.effect(
  ActorResolver,
  Effect.gen(function*() {
    const sessions = yield* SessionsRepo
    const apiKeys = yield* ApiKeysRepo
    const workspaces = yield* WorkspaceResolver
    const { signingKey } = yield* ServerKeys
    /** A workflow token (OIDC exchange) or else an API key: what a token that is not a session token is. */
    const notASession = Effect.fnUntraced(function*(token: string) {
      if (!token.startsWith(WORKFLOW_TOKEN_PREFIX)) return yield* resolveApiKey(apiKeys, token)
      return parseWorkflowToken(signingKey, token, yield* Clock.currentTimeMillis)
    })
    return ActorResolver.of({
      resolve: Effect.fnUntraced(function*(token) {
        const parsed = parseSessionToken(token)
        if (parsed === undefined) return yield* notASession(token)
        const found = yield* sessions.findById(parsed.sessionId)
        const now = yield* Clock.currentTimeMillis
        return Option.flatMap(found, (session) => acceptSession(session, parsed, now))
      }),
      resolveOnWorkspace: Effect.fnUntraced(function*(token, ref) {
        const parsed = parseSessionToken(token)
        if (parsed === undefined) {
          const actor = yield* notASession(token)
          const workspace = Option.isSome(actor) ? yield* workspaces.resolve(ref, actor.value) : Option.none()
          return { actor, workspace }
        }
        const found = yield* sessions.findWithWorkspace({ id: parsed.sessionId, ref })
        const now = yield* Clock.currentTimeMillis
        const actor = Option.flatMap(found, ({ session }) => acceptSession(session, parsed, now))
        if (Option.isNone(actor) || Option.isNone(found)) return { actor: Option.none(), workspace: Option.none() }
        return { actor, workspace: visibleTo(actor.value, found.value.workspace) }
      })
    })
  })
).pipe(Layer.provide(WorkspaceResolverLive))
