/** Identity: email-code sign-in, sessions, the profile and the security-event log (spec: Identity). */
import {
  type Actor,
  ChallengeId,
  type LoginChallenge,
  type LoginResult,
  NotFound,
  type Paged,
  PreconditionFailed,
  type RateLimited,
  type SecurityEvent,
  type Session,
  type User,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  ChallengesRepo,
  OrganizationsRepo,
  securityEventPosition,
  SecurityEventsRepo,
  SessionsRepo,
  Transactor,
  type UserRow,
  UsersRepo
} from "@cp/persistence"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { domainToASCII } from "node:url"
import { hmacSha256Hex, maskEmail, randomDigits, safeEqual } from "../platform/crypto.ts"
import { mint } from "../platform/ids.ts"
import { ServerKeys } from "../platform/keys.ts"
import { Mailer } from "../platform/mailer.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { authFamily, RateLimiter } from "../platform/rateLimit.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { WorkspacesService } from "../workspaces/service.ts"
import { SecurityLog } from "./securityLog.ts"
import { mintSessionToken } from "./tokens.ts"
import { authenticatedUser } from "./users.ts"

export const CHALLENGE_TTL_MS = 10 * 60 * 1000
export const SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000
export const MAX_FAILED_CODES = 5

/** `local@domain` split at the last `@` (the domain is empty when there is none). */
const splitAddress = (email: string) => {
  const at = email.lastIndexOf("@")
  return at === -1 ? { local: email, domain: "" } : { local: email.slice(0, at), domain: email.slice(at + 1) }
}

/**
 * Addresses compare trimmed and lower-cased (contract §4), in Unicode NFC, without the root dot a fully qualified
 * domain may end with: `Ann@Example.COM.` and `ann@example.com` are one address and one user.
 */
export const normalizeEmail = (email: string): string => {
  const { domain, local } = splitAddress(email.trim().normalize("NFC").toLowerCase())
  return domain === "" ? local : `${local}@${domain.replace(/\.+$/, "")}`
}

/**
 * The rate-limit identity of an address: one key for every spelling that reaches the same mailbox. Beyond
 * `normalizeEmail`, the domain is taken in its ASCII (IDNA) form, so `bücher.example` and `xn--bcher-kva.example`
 * count together, and a quoted local part without anything that needs the quotes counts as the bare one.
 */
export const mailboxKey = (email: string): string => {
  const { domain, local } = splitAddress(normalizeEmail(email))
  if (domain === "") return local
  const bare = /^"[^"\\]+"$/.test(local) ? local.slice(1, -1) : local
  return `${bare}@${domainToASCII(domain) || domain}`
}

const isChallengeId = Schema.is(ChallengeId)

const toUser = (row: UserRow): User => ({
  id: row.id,
  email: row.email,
  displayName: row.displayName,
  lastOrgSlug: row.lastOrgSlug
})

type UserActor = Extract<Actor, { readonly kind: "user" }>

export class IdentityService extends Context.Service<IdentityService, {
  readonly loginStart: (email: string) => Effect.Effect<LoginChallenge, RateLimited>
  readonly loginComplete: (
    challengeId: string,
    code: string
  ) => Effect.Effect<LoginResult, NotFound | PreconditionFailed | RateLimited>
  /** Signs in the owner of a verified email (creating the user and a first workspace if new). */
  readonly signInVerifiedEmail: (email: string, via: string) => Effect.Effect<LoginResult>
  readonly session: (actor: UserActor) => Effect.Effect<{ readonly session: Session; readonly user: User }>
  readonly logout: (actor: UserActor) => Effect.Effect<{ readonly success: true }>
  readonly profile: (actor: UserActor) => Effect.Effect<{ readonly user: User }>
  readonly updateProfile: (
    actor: UserActor,
    patch: { readonly displayName?: string | null; readonly lastOrgSlug?: string }
  ) => Effect.Effect<{ readonly user: User }, ValidationFailed>
  readonly securityEvents: (
    actor: UserActor,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly securityEvents: ReadonlyArray<SecurityEvent> }>, ValidationFailed>
}>()("@cp/server/IdentityService") {
  static readonly layer = Layer.effect(
    IdentityService,
    Effect.gen(function*() {
      const users = yield* UsersRepo
      const challenges = yield* ChallengesRepo
      const sessions = yield* SessionsRepo
      const securityEvents = yield* SecurityEventsRepo
      const tx = yield* Transactor
      const keys = yield* ServerKeys
      const mailer = yield* Mailer
      const limiter = yield* RateLimiter
      const workspaces = yield* WorkspacesService
      const resolver = yield* WorkspaceResolver
      const orgs = yield* OrganizationsRepo
      const cursors = yield* Cursors
      const securityLog = yield* SecurityLog

      const codeHash = (challengeId: string, code: string) =>
        hmacSha256Hex(keys.signingKey, `login:${challengeId}:${code}`)

      /** Auth-family limits: per email, and per the workspace the user last used (when the user exists). */
      const consumeAuthLimit = Effect.fnUntraced(function*(email: string) {
        const user = yield* users.findByEmail(email)
        const lastOrg = Option.flatMapNullishOr(user, (row) => row.lastOrgSlug)
        const org = Option.isSome(lastOrg) ? yield* orgs.findBySlug(lastOrg.value) : Option.none()
        yield* limiter.consume(authFamily, mailboxKey(email), Option.getOrUndefined(Option.map(org, (row) => row.id)))
        return user
      })

      const userOf = (actor: UserActor) => authenticatedUser(users, actor.userId)

      /**
       * Finds or creates the user for a verified email and opens a session, in one transaction that first runs `claim`
       * (spending the sign-in challenge): a challenge is spent only by the session it opens. Sign-ins of one email take
       * a lock on it, so the first one creates the user and the others find it.
       */
      const openSession = Effect.fnUntraced(function*<E>(email: string, via: string, claim: Effect.Effect<void, E>) {
        const now = yield* Clock.currentTimeMillis
        const result = yield* tx.withTransaction(Effect.gen(function*() {
          yield* claim
          yield* tx.lock(`user-email:${email}`)
          const existing = yield* users.findByEmail(email)
          const user = Option.isSome(existing) ? existing.value : yield* createUser(email, now)
          const sessionId = mint.session(now)
          const { token, secretHash } = mintSessionToken(sessionId)
          const expiresAt = new Date(now + SESSION_TTL_MS)
          yield* sessions.insert({
            id: sessionId,
            userId: user.id,
            secretHash,
            expiresAt,
            revokedAt: null,
            createdAt: new Date(now)
          }).pipe(Effect.orDie)
          yield* securityLog.record({
            email,
            userId: user.id,
            eventType: "login.succeeded",
            outcome: "success",
            metadata: { via }
          })
          yield* securityLog.record({
            email,
            userId: user.id,
            eventType: "session.created",
            outcome: "success",
            metadata: { sessionId }
          })
          return { user, token, expiresAt }
        }))
        return {
          token: result.token,
          tokenType: "bearer" as const,
          expiresAt: result.expiresAt,
          user: { id: result.user.id, email: result.user.email, displayName: result.user.displayName }
        }
      })

      /** First sign-in: the user, its `Personal` workspace, and the events recorded for the email before. */
      const createUser = Effect.fnUntraced(function*(email: string, now: number) {
        const id = mint.user(now)
        const row: UserRow = {
          id,
          email,
          displayName: null,
          lastOrgSlug: null,
          emailVerified: true,
          createdAt: new Date(now),
          updatedAt: new Date(now)
        }
        yield* users.insert(row).pipe(Effect.orDie)
        const { organization } = yield* workspaces.createPersonal(id, email.slice(0, email.lastIndexOf("@")))
        yield* securityEvents.attachToEmail({ email, userId: id })
        return yield* users.update({ id, lastOrgSlug: organization.slug, updatedAt: new Date(now) })
      })

      return IdentityService.of({
        loginStart: Effect.fn("Identity.loginStart")(function*(rawEmail) {
          const email = normalizeEmail(rawEmail)
          const user = yield* consumeAuthLimit(email)
          const now = yield* Clock.currentTimeMillis
          const challengeId = mint.challenge(now)
          const code = randomDigits(6)
          const expiresAt = new Date(now + CHALLENGE_TTL_MS)
          // The challenge and its event are written by one statement: no transaction (and its context copy) needed.
          const event = yield* securityLog.row({
            email,
            userId: Option.match(user, { onNone: () => null, onSome: (row) => row.id }),
            eventType: "login.challenge.created",
            outcome: "success",
            metadata: { challengeId }
          })
          yield* challenges.insertWithEvent({
            challenge: {
              id: challengeId,
              email,
              codeHash: codeHash(challengeId, code),
              expiresAt,
              failedAttempts: 0,
              consumedAt: null,
              createdAt: new Date(now)
            },
            event
          }).pipe(Effect.orDie)
          yield* mailer.send({
            to: email,
            template: "login_code",
            subject: `Your sign-in code is ${code}`,
            text:
              `Your sign-in code is ${code}. It expires in 10 minutes. If you did not ask for it, ignore this message.`,
            data: { code, challengeId }
          })
          return { challengeId, expiresAt, delivery: { mode: "email" as const, emailHint: maskEmail(email) } }
        }),

        loginComplete: Effect.fn("Identity.loginComplete")(function*(opaqueId, code) {
          // Clients treat the id as opaque: one that is not of our form names no challenge.
          if (!isChallengeId(opaqueId)) return yield* wireError(NotFound, "Unknown challenge or wrong code")
          const challengeId = opaqueId
          const found = yield* challenges.findById(challengeId)
          if (Option.isNone(found)) return yield* wireError(NotFound, "Unknown challenge or wrong code")
          const challenge = found.value
          const user = yield* consumeAuthLimit(challenge.email)
          const userId = Option.match(user, { onNone: () => null, onSome: (row) => row.id })
          const now = yield* Clock.currentTimeMillis
          const spent = challenge.consumedAt !== null || challenge.failedAttempts >= MAX_FAILED_CODES
          if (spent || challenge.expiresAt.getTime() <= now) {
            yield* securityLog.record({
              email: challenge.email,
              userId,
              eventType: "login.failed",
              outcome: "failure",
              metadata: { challengeId, reason: spent ? "challenge_spent" : "challenge_expired" }
            })
            return yield* wireError(PreconditionFailed, "This sign-in challenge has expired or was already used", {
              reason: spent ? "challenge_spent" : "challenge_expired"
            })
          }
          const spentAnswer = wireError(PreconditionFailed, "This sign-in challenge has expired or was already used", {
            reason: "challenge_spent"
          })
          if (!safeEqual(codeHash(challengeId, code), challenge.codeHash)) {
            // Counted atomically: however many guesses race, at most MAX_FAILED_CODES are ever checked.
            const failures = yield* challenges.recordFailure({ id: challengeId, maxFailures: MAX_FAILED_CODES })
            if (Option.isNone(failures)) return yield* spentAnswer
            yield* securityLog.record({
              email: challenge.email,
              userId,
              eventType: "login.failed",
              outcome: "failure",
              metadata: { challengeId, reason: "wrong_code", attemptsLeft: MAX_FAILED_CODES - failures.value }
            })
            return yield* wireError(NotFound, "Unknown challenge or wrong code")
          }
          const claim = Effect.flatMap(
            challenges.consume({ id: challengeId, now: new Date(now), maxFailures: MAX_FAILED_CODES }),
            (consumed) => consumed ? Effect.void : Effect.fail(spentAnswer)
          )
          return yield* openSession(challenge.email, "email_code", claim)
        }),

        signInVerifiedEmail: (email, via) => openSession(normalizeEmail(email), via, Effect.void),

        session: Effect.fn("Identity.session")(function*(actor) {
          const session = yield* sessions.findById(actor.sessionId)
          if (Option.isNone(session)) return yield* Effect.die(new Error("authenticated session vanished"))
          const user = yield* userOf(actor)
          return {
            session: { id: session.value.id, expiresAt: session.value.expiresAt, createdAt: session.value.createdAt },
            user: toUser(user)
          }
        }),

        logout: Effect.fn("Identity.logout")(function*(actor) {
          const now = yield* Clock.currentTimeMillis
          const user = yield* userOf(actor)
          yield* tx.withTransaction(Effect.gen(function*() {
            yield* sessions.revoke({ id: actor.sessionId, now: new Date(now) })
            yield* securityLog.record({
              email: user.email,
              userId: user.id,
              eventType: "session.revoked",
              outcome: "success",
              metadata: { sessionId: actor.sessionId }
            })
          }))
          return { success: true as const }
        }),

        profile: (actor) => Effect.map(userOf(actor), (user) => ({ user: toUser(user) })),

        updateProfile: Effect.fn("Identity.updateProfile")(function*(actor, patch) {
          if (patch.lastOrgSlug !== undefined) {
            const visible = yield* resolver.resolve(patch.lastOrgSlug, actor)
            if (Option.isNone(visible) || visible.value.organization.slug !== patch.lastOrgSlug) {
              return yield* validationFailed({ lastOrgSlug: ["must be the slug of a workspace you belong to"] })
            }
          }
          const now = yield* Clock.currentTimeMillis
          const before = yield* userOf(actor)
          const displayName = patch.displayName === undefined ? undefined : patch.displayName?.trim() || null
          const updated = yield* tx.withTransaction(Effect.gen(function*() {
            const row = yield* users.update({
              id: actor.userId,
              ...(displayName === undefined ? {} : { displayName }),
              ...(patch.lastOrgSlug === undefined ? {} : { lastOrgSlug: patch.lastOrgSlug }),
              updatedAt: new Date(now)
            })
            if (displayName !== undefined && displayName !== before.displayName) {
              yield* securityLog.record({
                email: row.email,
                userId: row.id,
                eventType: "user.profile.updated",
                outcome: "success",
                metadata: { fields: ["displayName"] }
              })
            }
            return row
          }))
          return { user: toUser(updated) }
        }),

        securityEvents: Effect.fn("Identity.securityEvents")(function*(actor, page) {
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "auth.securityEvents", scope: actor.userId },
            page,
            (window) => securityEvents.listForUser({ userId: actor.userId, ...window }),
            securityEventPosition
          )
          return {
            data: {
              securityEvents: items.map((row) => ({
                eventType: row.eventType,
                outcome: row.outcome,
                occurredAt: row.occurredAt,
                requestId: row.requestId,
                ip: row.ip,
                userAgent: row.userAgent,
                metadata: row.metadata
              }))
            },
            cursor
          }
        })
      })
    })
  )
}
