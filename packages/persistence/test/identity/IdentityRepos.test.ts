import { ChallengeId, IdPrefix, SessionId, UserId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import { type ChallengeRow, ChallengesRepo } from "../../src/identity/ChallengesRepo.ts"
import { OAuthRepo, type OAuthStateRow } from "../../src/identity/OAuthRepo.ts"
import { type SecurityEventRow, SecurityEventsRepo } from "../../src/identity/SecurityEventsRepo.ts"
import { type SessionRow, SessionsRepo } from "../../src/identity/SessionsRepo.ts"
import { type UserRow, UsersRepo } from "../../src/identity/UsersRepo.ts"
import type { PagePosition } from "../../src/keyset.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { RoleBindingsRepo } from "../../src/workspaces/RoleBindingsRepo.ts"
import { accountRootRow, at, bindingRow, newId, newUserId } from "../fixtures.ts"
import { describeContract, unique } from "../harness.ts"

const userRow = (overrides: Partial<UserRow> = {}): UserRow => ({
  id: newId(UserId, IdPrefix.user),
  email: `${unique("ada")}@example.test`,
  displayName: null,
  lastOrgSlug: null,
  emailVerified: true,
  createdAt: at(0),
  updatedAt: at(0),
  ...overrides
})

/** Runs `self` `n` times at once and counts the callers that won. */
const racers = (n: number, self: Effect.Effect<boolean>) =>
  Effect.all(Array.from({ length: n }, () => self), { concurrency: "unbounded" }).pipe(
    Effect.map((results) => results.filter((won) => won).length)
  )

describeContract("UsersRepo", UsersRepo, (it) => {
  it.effect("finds a user by id and by (normalized) email", () =>
    Effect.gen(function*() {
      const repo = yield* UsersRepo
      const user = userRow({ displayName: "Ada" })
      yield* repo.insert(user)
      assert.deepStrictEqual(yield* repo.findById(user.id), Option.some(user))
      assert.deepStrictEqual(yield* repo.findByEmail(user.email), Option.some(user))
      assert.isTrue(Option.isNone(yield* repo.findByEmail(user.email.toUpperCase())))
      assert.isTrue(Option.isNone(yield* repo.findById(newId(UserId, IdPrefix.user))))
    }))

  it.effect("a second user with the same email is a UniqueViolation on users_email_key", () =>
    Effect.gen(function*() {
      const repo = yield* UsersRepo
      const first = userRow()
      yield* repo.insert(first)
      const error = yield* Effect.flip(repo.insert(userRow({ email: first.email })))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "users_email_key")
    }))

  it.effect("update changes only the given fields, clears with null and stamps updatedAt", () =>
    Effect.gen(function*() {
      const repo = yield* UsersRepo
      const user = userRow({ displayName: "Ada" })
      yield* repo.insert(user)
      const renamed = yield* repo.update({ id: user.id, lastOrgSlug: "personal", updatedAt: at(5) })
      assert.deepStrictEqual(renamed, { ...user, lastOrgSlug: "personal", updatedAt: at(5) })
      const cleared = yield* repo.update({ id: user.id, displayName: null, updatedAt: at(6) })
      assert.deepStrictEqual(cleared, { ...user, lastOrgSlug: "personal", displayName: null, updatedAt: at(6) })
      assert.deepStrictEqual(yield* repo.findById(user.id), Option.some(cleared))
    }))
})

class Abort extends Data.TaggedError("Abort")<{}> {}

const challengeRow = (overrides: Partial<ChallengeRow> = {}): ChallengeRow => ({
  id: newId(ChallengeId, IdPrefix.challenge),
  email: `${unique("ada")}@example.test`,
  codeHash: "hash",
  expiresAt: at(10),
  failedAttempts: 0,
  consumedAt: null,
  createdAt: at(0),
  ...overrides
})

/** The service's wrong-code limit. */
const MAX = 5

describeContract("ChallengesRepo", {
  memory: Layer.mergeAll(ChallengesRepo.memory.pipe(Layer.provideMerge(SecurityEventsRepo.memory)), UsersRepo.memory),
  sql: Layer.mergeAll(ChallengesRepo.sql, SecurityEventsRepo.sql, UsersRepo.sql)
}, (it) => {
  it.effect("insertWithEvent stores the challenge and its security event together", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const user = userRow()
      yield* (yield* UsersRepo).insert(user)
      const challenge = challengeRow({ email: user.email })
      const event = eventRow(user.email, 0, { userId: user.id, metadata: { challengeId: challenge.id } })
      yield* repo.insertWithEvent({ challenge, event })
      assert.deepStrictEqual(yield* repo.findById(challenge.id), Option.some(challenge))
      assert.deepStrictEqual(yield* (yield* SecurityEventsRepo).listForUser({ userId: user.id, limit: 10 }), [event])
    }))

  it.effect("insertWithEvent writes neither row when either one collides", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const events = yield* SecurityEventsRepo
      const user = userRow()
      yield* (yield* UsersRepo).insert(user)
      const taken = challengeRow({ email: user.email })
      yield* repo.insert(taken)
      const lost = eventRow(user.email, 1, { userId: user.id })
      const challengeClash = yield* Effect.flip(repo.insertWithEvent({ challenge: taken, event: lost }))
      assert.instanceOf(challengeClash, UniqueViolation)
      assert.strictEqual(challengeClash.constraint, "login_challenges_pkey")
      assert.deepStrictEqual(yield* events.listForUser({ userId: user.id, limit: 10 }), [])

      const recorded = eventRow(user.email, 2, { userId: user.id })
      yield* events.insert(recorded)
      const fresh = challengeRow({ email: user.email })
      const eventClash = yield* Effect.flip(repo.insertWithEvent({ challenge: fresh, event: recorded }))
      assert.instanceOf(eventClash, UniqueViolation)
      assert.strictEqual(eventClash.constraint, "security_events_pkey")
      assert.isTrue(Option.isNone(yield* repo.findById(fresh.id)))
      assert.deepStrictEqual(yield* events.listForUser({ userId: user.id, limit: 10 }), [recorded])
    }))

  it.effect("stores a challenge and finds it by id", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const challenge = challengeRow()
      yield* repo.insert(challenge)
      assert.deepStrictEqual(yield* repo.findById(challenge.id), Option.some(challenge))
    }))

  it.effect("counts wrong codes atomically, never past the limit, and a challenge at the limit is not consumed", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const challenge = challengeRow()
      yield* repo.insert(challenge)
      assert.deepStrictEqual(yield* repo.recordFailure({ id: challenge.id, maxFailures: MAX }), Option.some(1))
      const counts = yield* Effect.all(
        [1, 2, 3, 4, 5, 6, 7].map(() => repo.recordFailure({ id: challenge.id, maxFailures: MAX })),
        {
          concurrency: 7
        }
      )
      assert.deepStrictEqual(counts.flatMap(Option.toArray).sort((a, b) => a - b), [2, 3, 4, 5])
      assert.strictEqual(counts.filter(Option.isNone).length, 3)
      assert.strictEqual(Option.getOrThrow(yield* repo.findById(challenge.id)).failedAttempts, MAX)
      assert.isFalse(yield* repo.consume({ id: challenge.id, now: at(1), maxFailures: MAX }))
    }))

  it.effect("consume succeeds once, and never on an expired challenge", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const challenge = challengeRow()
      const expired = challengeRow()
      yield* repo.insert(challenge)
      yield* repo.insert(expired)
      assert.isFalse(yield* repo.consume({ id: expired.id, now: expired.expiresAt, maxFailures: MAX }))
      assert.isTrue(yield* repo.consume({ id: challenge.id, now: at(1), maxFailures: MAX }))
      assert.isFalse(yield* repo.consume({ id: challenge.id, now: at(2), maxFailures: MAX }))
      assert.deepStrictEqual(yield* repo.recordFailure({ id: challenge.id, maxFailures: MAX }), Option.none())
      assert.deepStrictEqual(
        Option.map(yield* repo.findById(challenge.id), (row) => row.consumedAt),
        Option.some(at(1))
      )
      assert.isFalse(yield* repo.consume({ id: newId(ChallengeId, IdPrefix.challenge), now: at(1), maxFailures: MAX }))
    }))

  it.effect("a consume inside a failed transaction is undone", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const { withTransaction } = yield* Transactor
      const challenge = challengeRow()
      yield* repo.insert(challenge)
      const error = yield* Effect.flip(withTransaction(Effect.gen(function*() {
        assert.deepStrictEqual(yield* repo.recordFailure({ id: challenge.id, maxFailures: MAX }), Option.some(1))
        assert.isTrue(yield* repo.consume({ id: challenge.id, now: at(1), maxFailures: MAX }))
        return yield* new Abort()
      })))
      assert.instanceOf(error, Abort)
      assert.deepStrictEqual(yield* repo.findById(challenge.id), Option.some(challenge))
      assert.isTrue(yield* repo.consume({ id: challenge.id, now: at(2), maxFailures: MAX }))
    }))

  it.effect("exactly one of many concurrent consumers wins", () =>
    Effect.gen(function*() {
      const repo = yield* ChallengesRepo
      const challenge = challengeRow()
      yield* repo.insert(challenge)
      assert.strictEqual(yield* racers(8, repo.consume({ id: challenge.id, now: at(1), maxFailures: MAX })), 1)
    }))
})

const sessionRow = (userId: UserId, overrides: Partial<SessionRow> = {}): SessionRow => ({
  id: newId(SessionId, IdPrefix.session),
  userId,
  secretHash: "sha256",
  expiresAt: at(60 * 24 * 30),
  revokedAt: null,
  createdAt: at(0),
  ...overrides
})

describeContract(
  "SessionsRepo",
  {
    memory: Layer.mergeAll(SessionsRepo.memory, UsersRepo.memory, OrganizationsRepo.memory, RoleBindingsRepo.memory),
    sql: Layer.mergeAll(SessionsRepo.sql, UsersRepo.sql, OrganizationsRepo.sql, RoleBindingsRepo.sql)
  },
  (it) => {
    const withUser = Effect.gen(function*() {
      const user = userRow()
      yield* (yield* UsersRepo).insert(user)
      return user
    })

    it.effect("finds a session by id; revoke stamps it once", () =>
      Effect.gen(function*() {
        const repo = yield* SessionsRepo
        const session = sessionRow((yield* withUser).id)
        yield* repo.insert(session)
        assert.deepStrictEqual(yield* repo.findById(session.id), Option.some(session))
        assert.isTrue(yield* repo.revoke({ id: session.id, now: at(3) }))
        assert.isFalse(yield* repo.revoke({ id: session.id, now: at(4) }))
        assert.deepStrictEqual(yield* repo.findById(session.id), Option.some({ ...session, revokedAt: at(3) }))
        assert.isFalse(yield* repo.revoke({ id: newId(SessionId, IdPrefix.session), now: at(3) }))
      }))

    it.effect("findWithWorkspace reads the session with the workspace resolved for its user, by any reference", () =>
      Effect.gen(function*() {
        const repo = yield* SessionsRepo
        const user = yield* withUser
        const session = sessionRow(user.id)
        yield* repo.insert(session)
        const root = accountRootRow("Acme")
        const child = {
          ...accountRootRow("Child", 1),
          kind: "workspace",
          accountId: root.publicId,
          isAccountRoot: false
        }
        yield* Effect.forEach([root, child], (yield* OrganizationsRepo).insert, { discard: true })
        const onRoot = bindingRow(root, user.id, "admin")
        const onChild = bindingRow(child, user.id, "viewer", { createdAt: at(1) })
        const bindings = yield* RoleBindingsRepo
        yield* Effect.forEach([onRoot, onChild, bindingRow(child, newUserId(), "owner")], bindings.insert, {
          discard: true
        })
        for (const ref of [child.id, child.publicId, child.slug]) {
          assert.deepStrictEqual(
            yield* repo.findWithWorkspace({ id: session.id, ref }),
            Option.some({ session, workspace: Option.some({ organization: child, bindings: [onRoot, onChild] }) })
          )
        }
      }))

    it.effect("findWithWorkspace: an unknown workspace is None beside the session; an unknown session is None", () =>
      Effect.gen(function*() {
        const repo = yield* SessionsRepo
        const session = sessionRow((yield* withUser).id)
        yield* repo.insert(session)
        const root = accountRootRow("Acme")
        yield* (yield* OrganizationsRepo).insert(root)
        assert.deepStrictEqual(
          yield* repo.findWithWorkspace({ id: session.id, ref: `ws-${randomUUID()}` }),
          Option.some({ session, workspace: Option.none() })
        )
        const unknown = newId(SessionId, IdPrefix.session)
        assert.isTrue(Option.isNone(yield* repo.findWithWorkspace({ id: unknown, ref: root.id })))
      }))

    it.effect("exactly one of many concurrent revokes wins", () =>
      Effect.gen(function*() {
        const repo = yield* SessionsRepo
        const session = sessionRow((yield* withUser).id)
        yield* repo.insert(session)
        assert.strictEqual(yield* racers(8, repo.revoke({ id: session.id, now: at(1) })), 1)
      }))
  }
)

const eventRow = (email: string, minutes: number, overrides: Partial<SecurityEventRow> = {}): SecurityEventRow => ({
  id: randomUUID(),
  userId: null,
  email,
  eventType: "login.challenge.created",
  outcome: "success",
  occurredAt: at(minutes),
  requestId: unique("req"),
  ip: "127.0.0.1",
  userAgent: "vitest",
  metadata: {},
  ...overrides
})

describeContract(
  "SecurityEventsRepo",
  {
    memory: Layer.merge(SecurityEventsRepo.memory, UsersRepo.memory),
    sql: Layer.merge(SecurityEventsRepo.sql, UsersRepo.sql)
  },
  (it) => {
    const withUser = Effect.gen(function*() {
      const user = userRow()
      yield* (yield* UsersRepo).insert(user)
      return user
    })

    it.effect("keeps metadata exactly as written, keys and nesting included", () =>
      Effect.gen(function*() {
        const repo = yield* SecurityEventsRepo
        const user = yield* withUser
        const event = eventRow(user.email, 1, {
          userId: user.id,
          requestId: null,
          ip: null,
          userAgent: null,
          metadata: { challenge_id: "chl_x", attemptsLeft: 4, nested: { some_key: [1, null, true, "s"] } }
        })
        yield* repo.insert(event)
        assert.deepStrictEqual(yield* repo.listForUser({ userId: user.id, limit: 10 }), [event])
        const error = yield* Effect.flip(repo.insert(event))
        assert.instanceOf(error, UniqueViolation)
        assert.strictEqual(error.constraint, "security_events_pkey")
      }))

    it.effect("attachToEmail gives a new user the events recorded for its email before it existed", () =>
      Effect.gen(function*() {
        const repo = yield* SecurityEventsRepo
        const user = yield* withUser
        const someoneElse = yield* withUser
        const before = eventRow(user.email, 1)
        const alreadyOwned = eventRow(user.email, 2, { userId: someoneElse.id })
        const otherEmail = eventRow(someoneElse.email, 3)
        yield* Effect.forEach([before, alreadyOwned, otherEmail], repo.insert)
        yield* repo.attachToEmail({ email: user.email, userId: user.id })
        assert.deepStrictEqual(yield* repo.listForUser({ userId: user.id, limit: 10 }), [{
          ...before,
          userId: user.id
        }])
        assert.deepStrictEqual(yield* repo.listForUser({ userId: someoneElse.id, limit: 10 }), [alreadyOwned])
      }))

    it.effect("pages newest first by (occurredAt desc, id desc), unaffected by rows inserted during the walk", () =>
      Effect.gen(function*() {
        const repo = yield* SecurityEventsRepo
        const user = yield* withUser
        // Three events share one instant, so the id breaks the tie.
        const events = [1, 2, 2, 2, 3, 4].map((minutes) => eventRow(user.email, minutes, { userId: user.id }))
        yield* Effect.forEach(events, repo.insert)
        const expected = [...events].sort((a, b) =>
          b.occurredAt.getTime() - a.occurredAt.getTime() || (a.id < b.id ? 1 : -1)
        )
        const walked: Array<SecurityEventRow> = []
        let after: PagePosition | undefined
        for (;;) {
          const page = yield* repo.listForUser({ userId: user.id, limit: 3, ...(after === undefined ? {} : { after }) })
          const rows = page.slice(0, 2)
          walked.push(...rows)
          // A newer event arriving mid-walk sorts before the cursor, so this walk never sees it.
          if (walked.length === 2) yield* repo.insert(eventRow(user.email, 99, { userId: user.id }))
          const last = rows.at(-1)
          if (page.length <= 2 || last === undefined) break
          after = { at: last.occurredAt, key: last.id }
        }
        assert.deepStrictEqual(walked.map((event) => event.id), expected.map((event) => event.id))
      }))
  }
)

const stateRow = (overrides: Partial<OAuthStateRow> = {}): OAuthStateRow => ({
  id: unique("nonce"),
  provider: "acme",
  codeVerifier: "verifier",
  redirectAfter: null,
  expiresAt: at(10),
  consumedAt: null,
  createdAt: at(0),
  ...overrides
})

describeContract(
  "OAuthRepo",
  { memory: Layer.merge(OAuthRepo.memory, UsersRepo.memory), sql: Layer.merge(OAuthRepo.sql, UsersRepo.sql) },
  (it) => {
    it.effect("consumeState returns the state once, and never when expired or unknown", () =>
      Effect.gen(function*() {
        const repo = yield* OAuthRepo
        const state = stateRow({ redirectAfter: "/settings" })
        const expired = stateRow()
        yield* repo.insertState(state)
        yield* repo.insertState(expired)
        const consumed = yield* repo.consumeState({ id: state.id, now: at(1) })
        assert.deepStrictEqual(consumed, Option.some({ ...state, consumedAt: at(1) }))
        assert.isTrue(Option.isNone(yield* repo.consumeState({ id: state.id, now: at(2) })))
        assert.isTrue(Option.isNone(yield* repo.consumeState({ id: expired.id, now: at(10) })))
        assert.isTrue(Option.isNone(yield* repo.consumeState({ id: unique("nonce"), now: at(1) })))
      }))

    it.effect("exactly one of many concurrent callbacks consumes the state", () =>
      Effect.gen(function*() {
        const repo = yield* OAuthRepo
        const state = stateRow()
        yield* repo.insertState(state)
        const consume = Effect.map(repo.consumeState({ id: state.id, now: at(1) }), Option.isSome)
        assert.strictEqual(yield* racers(8, consume), 1)
      }))

    it.effect("links a provider account once; a second link is a UniqueViolation on oauth_identities_pkey", () =>
      Effect.gen(function*() {
        const repo = yield* OAuthRepo
        const users = yield* UsersRepo
        const user = userRow()
        const other = userRow()
        yield* users.insert(user)
        yield* users.insert(other)
        const identity = {
          provider: "acme",
          subject: unique("sub"),
          userId: user.id,
          email: user.email,
          createdAt: at(0)
        }
        yield* repo.linkIdentity(identity)
        const found = yield* repo.findIdentity({ provider: "acme", subject: identity.subject })
        assert.deepStrictEqual(found, Option.some(identity))
        assert.isTrue(Option.isNone(yield* repo.findIdentity({ provider: "other", subject: identity.subject })))
        const error = yield* Effect.flip(repo.linkIdentity({ ...identity, userId: other.id }))
        assert.instanceOf(error, UniqueViolation)
        assert.strictEqual(error.constraint, "oauth_identities_pkey")
        yield* repo.linkIdentity({ ...identity, provider: "other" })
      }))
  }
)
