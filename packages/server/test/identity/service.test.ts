/**
 * The identity service on memory repositories under `TestClock` (time starts at 0 and moves only when a test moves
 * it): the moment a login challenge expires (10 minutes), the moment a session stops resolving (30 days), logout
 * revocation, and the auth rate-limit window. The layer graph is the server's own (`app.ts`) minus HTTP.
 */
import { type Actor, type ChallengeId, type LoginResult, NotFound, PreconditionFailed, RateLimited } from "@cp/domain"
import { OutboxRepo, SessionsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { ActorResolverLive } from "../../src/identity/actors.ts"
import { SecurityLog } from "../../src/identity/securityLog.ts"
import { CHALLENGE_TTL_MS, IdentityService, MAX_FAILED_CODES, SESSION_TTL_MS } from "../../src/identity/service.ts"
import { ActorResolver } from "../../src/platform/actors.ts"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { EventLog } from "../../src/platform/events.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Mailer } from "../../src/platform/mailer.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { RateLimiter } from "../../src/platform/rateLimit.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspaceResolverLive } from "../../src/workspaces/resolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"

const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE

/** The services of `app.ts` (without OAuth and HTTP) on fresh memory repositories, in test mode. */
const ServicesLayer = WorkspacesService.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(ActorResolverLive, WorkspaceResolverLive, SecurityLog.layer)),
  Layer.provideMerge(Layer.mergeAll(EventLog.layer, RateLimiter.layer, Cursors.layer, Mailer.layer)),
  Layer.provideMerge(ServerKeys.layer),
  Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
  Layer.provideMerge(RepositoriesMemory)
)

const TestLayer = IdentityService.layer.pipe(Layer.provideMerge(ServicesLayer))

/** As `TestLayer`, but the first session insert dies (the database went away in the middle of a sign-in). */
const FirstSessionFailsLayer = IdentityService.layer.pipe(
  Layer.provide(Layer.effect(
    SessionsRepo,
    Effect.gen(function*() {
      const real = yield* SessionsRepo
      let failures = 1
      return SessionsRepo.of({
        ...real,
        insert: (row) =>
          Effect.suspend(() => failures-- > 0 ? Effect.die(new Error("the database went away")) : real.insert(row))
      })
    })
  )),
  Layer.provideMerge(ServicesLayer)
)

/** The code mailed for a challenge, read from the outbox the test-mode mailer writes. */
const codeFor = (email: string, challengeId: ChallengeId) =>
  Effect.gen(function*() {
    const messages = yield* (yield* OutboxRepo).list({ to: email })
    const message = messages.find((m) => m.data["challengeId"] === challengeId)
    assert.isDefined(message, `no code mailed for ${challengeId}`)
    return String(message?.data["code"])
  })

const startWithCode = (email: string) =>
  Effect.gen(function*() {
    const challenge = yield* (yield* IdentityService).loginStart(email)
    return {
      challengeId: challenge.challengeId,
      expiresAt: challenge.expiresAt,
      code: yield* codeFor(email, challenge.challengeId)
    }
  })

const signIn = (email: string) =>
  Effect.gen(function*() {
    const { challengeId, code } = yield* startWithCode(email)
    return yield* (yield* IdentityService).loginComplete(challengeId, code)
  })

const wrongCode = (code: string) => (code === "000000" ? "111111" : "000000")

/** The user actor a session token resolves to, if it still does. */
const resolve = (token: string) => Effect.flatMap(ActorResolver, (resolver) => resolver.resolve(token))

const userActor = (result: LoginResult) =>
  Effect.gen(function*() {
    const actor = yield* resolve(result.token)
    assert.isTrue(Option.isSome(actor), "the token resolves")
    const value: Actor = Option.getOrThrow(actor)
    if (value.kind !== "user") return assert.fail(`a session token resolved to a ${value.kind}`)
    return value
  })

const eventsOf = (result: LoginResult) =>
  Effect.gen(function*() {
    const actor = yield* userActor(result)
    const page = yield* (yield* IdentityService).securityEvents(actor, { limit: 100 })
    return page.data.securityEvents
  })

/** A challenge for `email` at its expiry instant (10 minutes on), with the code that was mailed. */
const expiredChallenge = (email: string) => Effect.tap(startWithCode(email), () => TestClock.adjust(CHALLENGE_TTL_MS))

describe("IdentityService timing", () => {
  it.effect("a challenge is valid until its 10th minute: the right code succeeds 1 ms before", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const { challengeId, expiresAt, code } = yield* startWithCode("early@example.test")
      assert.strictEqual(expiresAt.getTime(), CHALLENGE_TTL_MS)
      assert.strictEqual(CHALLENGE_TTL_MS, 10 * MINUTE)
      yield* TestClock.adjust(CHALLENGE_TTL_MS - 1)
      const result = yield* identity.loginComplete(challengeId, code)
      assert.strictEqual(result.tokenType, "bearer")
      assert.strictEqual(result.user.email, "early@example.test")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("at exactly 10 minutes the challenge is expired: PreconditionFailed whatever the code, and later too", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const { challengeId, code } = yield* expiredChallenge("late@example.test")
      for (const attempt of [code, wrongCode(code)]) {
        const error = yield* Effect.flip(identity.loginComplete(challengeId, attempt))
        assert.instanceOf(error, PreconditionFailed)
        assert.deepStrictEqual(error.error.details, { reason: "challenge_expired" })
      }
      yield* TestClock.adjust(MINUTE)
      assert.instanceOf(yield* Effect.flip(identity.loginComplete(challengeId, code)), PreconditionFailed)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("each refusal of an expired challenge is logged, and belongs to the user once it signs in", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const email = "late-logged@example.test"
      const { challengeId, code } = yield* expiredChallenge(email)
      for (const attempt of [code, wrongCode(code)]) yield* Effect.flip(identity.loginComplete(challengeId, attempt))
      yield* TestClock.adjust(MINUTE)
      yield* Effect.flip(identity.loginComplete(challengeId, code))
      const result = yield* signIn(email)
      const failures = (yield* eventsOf(result)).filter((event) => event.eventType === "login.failed")
      assert.strictEqual(failures.length, 3)
      for (const failure of failures) {
        assert.strictEqual(failure.outcome, "failure")
        assert.strictEqual(failure.metadata["reason"], "challenge_expired")
        assert.notInclude(JSON.stringify(failure.metadata), code)
      }
    }).pipe(Effect.provide(TestLayer)))

  it.effect("five wrong codes spend a challenge even before it expires", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const { challengeId, code } = yield* startWithCode("spent@example.test")
      for (let i = 0; i < MAX_FAILED_CODES; i++) {
        const error = yield* Effect.flip(identity.loginComplete(challengeId, wrongCode(code)))
        assert.instanceOf(error, NotFound)
      }
      const error = yield* Effect.flip(identity.loginComplete(challengeId, code))
      assert.instanceOf(error, PreconditionFailed)
      assert.deepStrictEqual(error.error.details, { reason: "challenge_spent" })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a session resolves until its 30th day and not from that instant on", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const result = yield* signIn("long@example.test")
      assert.strictEqual(result.expiresAt.getTime(), SESSION_TTL_MS)
      assert.strictEqual(SESSION_TTL_MS, 30 * DAY)
      const actor = yield* userActor(result)
      const { session } = yield* identity.session(actor)
      assert.deepStrictEqual(session, { id: actor.sessionId, createdAt: new Date(0), expiresAt: new Date(30 * DAY) })

      yield* TestClock.adjust(SESSION_TTL_MS - 1)
      assert.isTrue(Option.isSome(yield* resolve(result.token)), "valid 1 ms before expiry")
      yield* TestClock.adjust(1)
      assert.isTrue(Option.isNone(yield* resolve(result.token)), "expired at 30 days")
      yield* TestClock.adjust(DAY)
      assert.isTrue(Option.isNone(yield* resolve(result.token)), "still expired later")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("signing in again after a session expired opens a fresh 30-day session for the same user", () =>
    Effect.gen(function*() {
      const result = yield* signIn("long-again@example.test")
      yield* TestClock.adjust(SESSION_TTL_MS + DAY)
      assert.isTrue(Option.isNone(yield* resolve(result.token)))
      const again = yield* signIn("long-again@example.test")
      assert.strictEqual(again.user.id, result.user.id)
      assert.strictEqual(again.expiresAt.getTime(), SESSION_TTL_MS + SESSION_TTL_MS + DAY)
      assert.isTrue(Option.isSome(yield* resolve(again.token)))
    }).pipe(Effect.provide(TestLayer)))

  it.effect("logout revokes the session at once, and only that session", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const one = yield* signIn("twice@example.test")
      const two = yield* signIn("twice@example.test")
      const actor = yield* userActor(one)
      assert.deepStrictEqual(yield* identity.logout(actor), { success: true })
      assert.isTrue(Option.isNone(yield* resolve(one.token)), "revoked")
      assert.isTrue(Option.isSome(yield* resolve(two.token)), "the other session lives on")
      // revocation is permanent, not a time thing
      yield* TestClock.adjust(MINUTE)
      assert.isTrue(Option.isNone(yield* resolve(one.token)))
      const revoked = (yield* eventsOf(two)).filter((event) => event.eventType === "session.revoked")
      assert.deepStrictEqual(revoked.map((event) => [event.outcome, event.metadata["sessionId"]]), [
        ["success", actor.sessionId]
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a token with the right session id but another secret never resolves", () =>
    Effect.gen(function*() {
      const result = yield* signIn("forge@example.test")
      const forged = result.token.replace(/\.[0-9a-f]{64}$/, `.${"0".repeat(64)}`)
      assert.notStrictEqual(forged, result.token)
      assert.isTrue(Option.isNone(yield* resolve(forged)))
      assert.isTrue(Option.isNone(yield* resolve("sps_garbage")))
      assert.isTrue(Option.isSome(yield* resolve(result.token)))
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the auth rate limit: 10 per email per 60 s window, Retry-After counts down to the reset", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const email = "busy@example.test"
      for (let i = 0; i < 10; i++) yield* identity.loginStart(i % 2 === 0 ? email : ` ${email.toUpperCase()}`)
      const first = yield* Effect.flip(identity.loginStart(email))
      assert.instanceOf(first, RateLimited)
      assert.deepStrictEqual(first.error.details, { scope: "identity", retryAfterSeconds: 60 })
      yield* TestClock.adjust(30_500)
      const later = yield* Effect.flip(identity.loginStart(email))
      assert.instanceOf(later, RateLimited)
      assert.deepStrictEqual(later.error.details, { scope: "identity", retryAfterSeconds: 30 })
      // another address has its own bucket
      yield* identity.loginStart("calm@example.test")
      // the window resets 60 s after its first counted request
      yield* TestClock.adjust(60_000 - 30_500)
      yield* identity.loginStart(email)
    }).pipe(Effect.provide(TestLayer)))

  // Security-event ids are UUIDv7 minted in order within one millisecond (`mint.securityEvent`), so the log keeps
  // the order events happened in; under TestClock every event shares one instant, which makes this deterministic.
  it.effect("events recorded in the same millisecond list newest first, in the order they happened", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const email = "order@example.test"
      const { challengeId, code } = yield* startWithCode(email)
      for (let i = 0; i < MAX_FAILED_CODES; i++) {
        yield* Effect.flip(identity.loginComplete(challengeId, wrongCode(code)))
      }
      const result = yield* signIn(email)
      const events = yield* eventsOf(result)
      assert.deepStrictEqual(
        events.map((event) =>
          [event.eventType, event.metadata["reason"] ?? null, event.metadata["attemptsLeft"] ?? null].join(" ")
        ),
        [
          "session.created  ",
          "login.succeeded  ",
          "login.challenge.created  ",
          "login.failed wrong_code 0",
          "login.failed wrong_code 1",
          "login.failed wrong_code 2",
          "login.failed wrong_code 3",
          "login.failed wrong_code 4",
          "login.challenge.created  "
        ]
      )
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a complete that fails after the code matched leaves the challenge unspent: the retry signs in", () =>
    Effect.gen(function*() {
      const identity = yield* IdentityService
      const { challengeId, code } = yield* startWithCode("retry@example.com")
      assert.isTrue(Exit.hasDies(yield* Effect.exit(identity.loginComplete(challengeId, code))))
      const result = yield* identity.loginComplete(challengeId, code)
      assert.strictEqual(result.user.email, "retry@example.com")
      const spent = yield* Effect.flip(identity.loginComplete(challengeId, code))
      assert.instanceOf(spent, PreconditionFailed)
    }).pipe(Effect.provide(FirstSessionFailsLayer)))
})
