/**
 * Identity end to end over real HTTP (spec: Identity, Authentication 1–5; contract §2 and §4): email-code
 * sign-in, sessions, logout, the profile, the security-event log, the auth rate limit and the dev outbox.
 * Every flow is pinned byte for byte with raw `fetch` and driven again through the typed client derived from
 * the domain API. The whole suite runs on PGlite; the core flow also runs on PostgreSQL when `DATABASE_URL`
 * is set. Challenge and session expiry need a movable clock: `packages/server/test/identity/service.test.ts`.
 */
import {
  LoginChallenge,
  LoginResult,
  NotFound,
  Organization,
  OutboxMessage,
  PreconditionFailed,
  RateLimited,
  SecurityEvent,
  Session,
  Unauthenticated,
  User,
  ValidationFailed
} from "@cp/domain"
import { assert, layer, type Vitest } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import {
  failed,
  FieldMessages,
  invalidFields,
  ISO_MS,
  ok,
  okData,
  pageOf,
  type Res,
  ULID,
  wire
} from "./support/envelope.ts"
import { call, clientFor, TestServer, testServer } from "./support/server.ts"

// ---------------------------------------------------------------------------------------------------------
// Wire helpers
// ---------------------------------------------------------------------------------------------------------

const REQUEST_ID = new RegExp(`^req_${ULID}$`)
const TOKEN = new RegExp(`^sps_(ses_${ULID})\\.([0-9a-f]{64})$`)
const CHALLENGE_ID = new RegExp(`^chl_${ULID}$`)
const USER_ID = new RegExp(`^usr_${ULID}$`)
const SESSION_ID = new RegExp(`^ses_${ULID}$`)
const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE

/** A fresh address per test, so tests sharing one server never share a user or a rate-limit bucket. */
const freshEmail = (tag: string) => `${tag}-${randomBytes(5).toString("hex")}@example.test`

const sortedKeys = (value: object): Array<string> => Object.keys(value).sort()

const Messages = { messages: Schema.Array(OutboxMessage) }
const SecurityEvents = { securityEvents: Schema.Array(SecurityEvent) }
const Organizations = { organizations: Schema.Array(Organization) }
const Profile = { user: User }
const Success = { success: Schema.Literal(true) }

/** 422 `validation_failed` naming `field` in `details.fields` (each field maps to an array of messages). */
const validationOn = (res: Res, field: string) => {
  const fields = invalidFields(res)
  assert.isObject(fields, res.text)
  assert.isArray(fields[field], res.text)
  assert.isAbove(fields[field]?.length ?? 0, 0)
  for (const message of fields[field] ?? []) assert.isString(message)
  return fields
}

/** An ISO timestamp with milliseconds, about `offsetMs` after `from` (allowing `slackMs` of request time). */
const assertTimestampNear = (value: string, from: number, offsetMs: number, slackMs = 30_000) => {
  assert.isString(value)
  assert.match(value, ISO_MS)
  const at = Date.parse(value)
  assert.isAtLeast(at, from + offsetMs - 1_000, `${value} vs +${offsetMs}`)
  assert.isAtMost(at, from + offsetMs + slackMs, `${value} vs +${offsetMs}`)
}

// ---------------------------------------------------------------------------------------------------------
// Flows
// ---------------------------------------------------------------------------------------------------------

const startLogin = (baseUrl: string, email: string) =>
  Effect.map(call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), (res) => okData(res, LoginChallenge))

/** The code mailed for `challengeId`, read from the dev outbox (contract §2). */
const codeFor = (baseUrl: string, email: string, challengeId: string) =>
  Effect.gen(function*() {
    const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`), Messages)
    const message = outbox.messages.find((m) => m.data["challengeId"] === challengeId)
    assert.isDefined(message, `no login code mailed for ${challengeId}`)
    assert.strictEqual(message.template, "login_code")
    const code = wire(Schema.String, message.data["code"])
    assert.match(code, /^\d{6}$/)
    return code
  })

const completeLogin = (baseUrl: string, challengeId: string, code: string) =>
  call(baseUrl, "POST", "/v1/auth/login/complete", { body: { challengeId, code } })

/** A full email-code sign-in over raw HTTP. */
const signIn = (baseUrl: string, email: string) =>
  Effect.gen(function*() {
    const challenge = yield* startLogin(baseUrl, email)
    // the outbox matches `to` case-insensitively but does not trim it (contract §2)
    const code = yield* codeFor(baseUrl, email.trim(), challenge.challengeId)
    const result = okData(yield* completeLogin(baseUrl, challenge.challengeId, code), LoginResult)
    return { challengeId: challenge.challengeId, code, token: result.token, user: result.user }
  })

/** Every security event of the caller, newest first, as raw wire text and parsed. */
const allSecurityEvents = (baseUrl: string, token: string) =>
  Effect.gen(function*() {
    const res = yield* call(baseUrl, "GET", "/v1/auth/security-events?limit=100", { token })
    const data = okData(res, SecurityEvents)
    assert.deepStrictEqual(sortedKeys(data), ["securityEvents"])
    return { text: res.text, events: data.securityEvents }
  })

/**
 * Asserts newest-first order of event types. Events recorded at the same millisecond (login.succeeded and
 * session.created share one request) tie on `occurredAt`, and their ids do not order them within the tie (see the
 * service test's same-millisecond case), so only the order between distinct timestamps is pinned here.
 */
const assertNewestFirst = (
  events: ReadonlyArray<{ readonly eventType: string; readonly occurredAt: string }>,
  expected: ReadonlyArray<string>
) => {
  const types = events.map((event) => event.eventType)
  assert.deepStrictEqual([...types].sort(), [...expected].sort(), `${types}`)
  for (let i = 1; i < events.length; i++) {
    assert.isAtLeast(
      Date.parse(events[i - 1]?.occurredAt ?? ""),
      Date.parse(events[i]?.occurredAt ?? ""),
      "newest first"
    )
  }
  for (let i = 0; i < events.length;) {
    let j = i
    while (j < events.length && events[j]?.occurredAt === events[i]?.occurredAt) j++
    assert.deepStrictEqual(types.slice(i, j).sort(), expected.slice(i, j).sort(), `${types} vs ${expected}`)
    i = j
  }
}

const WRONG_CODE = (code: string) => code === "000000" ? "999999" : "000000"

/** Every metadata value, depth first, so tests can check none is a code, token or hash. */
const metadataEntries = (value: unknown, path = ""): Array<readonly [string, unknown]> =>
  value !== null && typeof value === "object"
    ? Object.entries(value).flatMap(([key, inner]) => metadataEntries(inner, path === "" ? key : `${path}.${key}`))
    : [[path, value]]

// ---------------------------------------------------------------------------------------------------------
// The core flow, on every backend
// ---------------------------------------------------------------------------------------------------------

/** Sign-in → session → profile → workspace → logout, raw then typed; shared by the PGlite and PostgreSQL runs. */
const coreFlow = (it: Vitest.MethodsNonLive<TestServer>) => {
  /** Login start for an address written in mixed case: the challenge, and when the request was sent. */
  const adaStarted = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const local = `Ada.Lovelace+${randomBytes(4).toString("hex")}`
    const email = `${local.toLowerCase()}@example.test`
    const before = Date.now()
    const challenge = yield* startLogin(baseUrl, `${local}@Example.TEST`)
    return { baseUrl, local, email, before, challenge }
  })

  /** Ada's sign-in completed: the answer's data, its token and session id, and the slug of her Personal workspace. */
  const adaSignedIn = Effect.gen(function*() {
    const started = yield* adaStarted
    const { baseUrl, challenge, email, local } = started
    const code = yield* codeFor(baseUrl, email, challenge.challengeId)
    const result = okData(yield* completeLogin(baseUrl, challenge.challengeId, code), LoginResult)
    const [, sessionId] = TOKEN.exec(result.token) ?? []
    return {
      ...started,
      code,
      result,
      token: result.token,
      sessionId,
      slug: local.toLowerCase().replace(/[^a-z0-9]+/g, "-")
    }
  })

  it.effect("login start answers the challenge (valid 10 minutes, a masked hint); the code travels by mail only", () =>
    Effect.gen(function*() {
      const { baseUrl, before, challenge, email } = yield* adaStarted
      assert.deepStrictEqual(sortedKeys(challenge), ["challengeId", "delivery", "expiresAt"])
      assert.match(challenge.challengeId, CHALLENGE_ID)
      assertTimestampNear(challenge.expiresAt, before, 10 * MINUTE)
      assert.deepStrictEqual(challenge.delivery, { mode: "email", emailHint: "a***@example.test" })
      // the code travels by mail (normalized recipient), never in the answer
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      assert.notInclude(JSON.stringify(challenge), code)
    }))

  it.effect("login complete answers a bearer token for a 30-day session and the user", () =>
    Effect.gen(function*() {
      const { before, email, result, sessionId, token } = yield* adaSignedIn
      assert.deepStrictEqual(sortedKeys(result), ["expiresAt", "token", "tokenType", "user"])
      assert.isDefined(sessionId, `token ${token}`)
      assert.strictEqual(result.tokenType, "bearer")
      assertTimestampNear(result.expiresAt, before, 30 * DAY)
      assert.deepStrictEqual(sortedKeys(result.user), ["displayName", "email", "id"])
      assert.match(result.user.id, USER_ID)
      assert.strictEqual(result.user.email, email)
      assert.isNull(result.user.displayName)
    }))

  it.effect("the first sign-in creates a Personal workspace; its slug, from the local part, is the lastOrgSlug", () =>
    Effect.gen(function*() {
      const { baseUrl, email, result, sessionId, slug, token } = yield* adaSignedIn
      const session = okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token }), {
        session: Session,
        user: User
      })
      assert.deepStrictEqual(sortedKeys(session), ["session", "user"])
      assert.deepStrictEqual(sortedKeys(session.session), ["createdAt", "expiresAt", "id"])
      assert.strictEqual(session.session.id, sessionId)
      assert.match(session.session.id, SESSION_ID)
      assert.match(session.session.createdAt, ISO_MS)
      assert.strictEqual(session.session.expiresAt, result.expiresAt)
      assert.strictEqual(Date.parse(session.session.expiresAt) - Date.parse(session.session.createdAt), 30 * DAY)
      assert.deepStrictEqual(session.user, { id: result.user.id, email, displayName: null, lastOrgSlug: slug })

      const organizations = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token }), Organizations).organizations
      assert.strictEqual(organizations.length, 1)
      assert.strictEqual(organizations[0]?.name, "Personal")
      assert.strictEqual(organizations[0]?.slug, slug)

      const profile = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token }), Profile)
      assert.deepStrictEqual(profile, { user: session.user })
    }))

  it.effect("logout answers { success: true }; the very next request with the token is 401", () =>
    Effect.gen(function*() {
      const { baseUrl, token } = yield* adaSignedIn
      assert.deepStrictEqual(
        okData(yield* call(baseUrl, "POST", "/v1/auth/logout", { token }), Success),
        { success: true }
      )
      failed(yield* call(baseUrl, "GET", "/v1/auth/session", { token }), 401, "unauthenticated")
      failed(yield* call(baseUrl, "POST", "/v1/auth/logout", { token }), 401, "unauthenticated")
    }))

  it.effect("a second sign-in for the same address (any spelling) is the same user, with no second workspace", () =>
    Effect.gen(function*() {
      const { baseUrl, email, result, token } = yield* adaSignedIn
      const again = yield* signIn(baseUrl, `  ${email.toUpperCase()}\t`)
      assert.notStrictEqual(again.token, token)
      assert.deepStrictEqual(again.user, result.user)
      const stillOne = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: again.token }), Organizations)
      assert.strictEqual(stillOne.organizations.length, 1)
    }))

  /**
   * The typed client's sign-in: login start, the code from the outbox, a wrong code, the right one, and the same
   * challenge again; every answer or error on the way.
   */
  const typedSignIn = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const email = freshEmail("typed")
    const anonymous = yield* clientFor(baseUrl)
    const challenge = yield* anonymous.identity.loginStart({ payload: { email } })
    const mail = yield* anonymous.system.outbox({ query: { to: email } })
    const code = String(mail.messages[0]?.data["code"])
    const wrong = yield* Effect.flip(
      anonymous.identity.loginComplete({ payload: { challengeId: challenge.challengeId, code: WRONG_CODE(code) } })
    )
    const result = yield* anonymous.identity.loginComplete({ payload: { challengeId: challenge.challengeId, code } })
    const reused = yield* Effect.flip(
      anonymous.identity.loginComplete({ payload: { challengeId: challenge.challengeId, code } })
    )
    return { baseUrl, email, challenge, mail, wrong, result, reused }
  })

  it.effect("typed client: login start, the mailed code, a wrong code (NotFound), sign-in, a spent challenge", () =>
    Effect.gen(function*() {
      const { challenge, email, mail, result, reused, wrong } = yield* typedSignIn
      assert.match(challenge.challengeId, CHALLENGE_ID)
      assert.instanceOf(challenge.expiresAt, Date)
      assert.deepStrictEqual(challenge.delivery, { mode: "email", emailHint: `${email.charAt(0)}***@example.test` })
      assert.strictEqual(mail.messages[0]?.data["challengeId"], challenge.challengeId)
      assert.instanceOf(wrong, NotFound)
      assert.strictEqual(result.tokenType, "bearer")
      assert.match(result.token, TOKEN)
      assert.instanceOf(result.expiresAt, Date)
      assert.strictEqual(result.user.email, email)
      assert.instanceOf(reused, PreconditionFailed)
    }))

  it.effect("typed client: session, profile, an update, the security events newest first, logout", () =>
    Effect.gen(function*() {
      const { baseUrl, email, result } = yield* typedSignIn
      const client = yield* clientFor(baseUrl, result.token)
      const { session, user } = yield* client.session.session()
      assert.match(session.id, SESSION_ID)
      assert.strictEqual(session.expiresAt.getTime() - session.createdAt.getTime(), 30 * DAY)
      assert.deepStrictEqual(user, { ...result.user, lastOrgSlug: email.slice(0, email.indexOf("@")) })
      assert.deepStrictEqual(yield* client.session.getProfile(), { user })

      const renamed = yield* client.session.updateProfile({ payload: { displayName: "Typed Tester" } })
      assert.deepStrictEqual(renamed, { user: { ...user, displayName: "Typed Tester" } })

      const page = yield* client.session.securityEvents({ query: { limit: 2 } })
      assert.strictEqual(page.data.securityEvents.length, 2)
      assert.strictEqual(page.data.securityEvents[0]?.eventType, "user.profile.updated")
      assert.instanceOf(page.data.securityEvents[0]?.occurredAt, Date)
      assert.isString(page.cursor)
      const rest = yield* client.session.securityEvents({ query: { limit: 100, cursor: page.cursor ?? "" } })
      assert.isNull(rest.cursor)
      // newest first: the profile change, the refused reuse, the sign-in, the wrong code, the challenge
      assertNewestFirst(
        [...page.data.securityEvents, ...rest.data.securityEvents].map((event) => ({
          ...event,
          occurredAt: event.occurredAt.toISOString()
        })),
        [
          "user.profile.updated",
          "login.failed",
          "session.created",
          "login.succeeded",
          "login.failed",
          "login.challenge.created"
        ]
      )

      assert.deepStrictEqual(yield* client.session.logout(), { success: true })
      const after = yield* Effect.flip(client.session.session())
      assert.instanceOf(after, Unauthenticated)
    }))
}

/** Races that only a database can settle: run on every SQL backend, where requests really interleave. */
const concurrency = (it: Vitest.MethodsNonLive<TestServer>) => {
  it.effect("concurrent login starts for one email: exactly 10 pass, the rest are 429", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("burst")
      const answers = yield* Effect.forEach(
        Array.from({ length: 14 }, () => email),
        (to) => call(baseUrl, "POST", "/v1/auth/login/start", { body: { email: to } }),
        { concurrency: "unbounded" }
      )
      const statuses = answers.map((res) => res.status)
      assert.strictEqual(statuses.filter((status) => status === 200).length, 10, statuses.join(","))
      assert.strictEqual(statuses.filter((status) => status === 429).length, 4, statuses.join(","))
    }))

  // Known product bug (reported): the wrong-code budget is checked on a stale read (identity/service.ts loginComplete
  // reads failedAttempts, compares, then increments), so concurrent guesses are all checked; ChallengesRepo.consume
  // does not look at failed_attempts either, so a right code among them still signs in.
  it.effect("concurrent wrong codes: still at most five are checked, the rest answer 412", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("race")
      const challenge = yield* startLogin(baseUrl, email)
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      // 1 start + 9 completes = 10 requests, inside the auth rate limit
      const guesses = Array.from({ length: 9 }, (_, i) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, "0"))
      const answers = yield* Effect.forEach(guesses, (guess) => completeLogin(baseUrl, challenge.challengeId, guess), {
        concurrency: "unbounded"
      })
      const statuses = answers.map((res) => res.status)
      assert.strictEqual(statuses.filter((status) => status === 404).length, 5, statuses.join(","))
      assert.strictEqual(statuses.filter((status) => status === 412).length, 4, statuses.join(","))
    }))
}

layer(testServer("pglite"), { excludeTestServices: true })("identity over HTTP [pglite]", (it) => {
  coreFlow(it)
  concurrency(it)

  // -------------------------------------------------------------------------------------------------------
  // login start
  // -------------------------------------------------------------------------------------------------------

  it.effect("login start: a bad, non-string or missing email, or no body at all, is 422 on email", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const path = "/v1/auth/login/start"
      for (const email of ["not-an-email", "", "a@b", "two@@example.test", `${"x".repeat(250)}@example.test`]) {
        validationOn(yield* call(baseUrl, "POST", path, { body: { email } }), "email")
      }
      validationOn(yield* call(baseUrl, "POST", path, { body: { email: 42 } }), "email")
      validationOn(yield* call(baseUrl, "POST", path, { body: {} }), "email")
      // no body at all
      for (const headers of [{ "content-type": "application/json" }, {}]) {
        const missing = invalidFields(yield* call(baseUrl, "POST", path, { headers }))
        assert.isAbove(Object.keys(missing).length, 0)
      }
    }))

  it.effect("login start: malformed JSON is 400, JSON as another media type 415, a method the path lacks 405", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const path = "/v1/auth/login/start"
      failed(yield* call(baseUrl, "POST", path, { body: "{\"email\":" }), 400, "bad_request")
      failed(
        yield* call(baseUrl, "POST", path, {
          body: JSON.stringify({ email: freshEmail("media") }),
          headers: { "content-type": "text/plain" }
        }),
        415,
        "unsupported"
      )
      failed(yield* call(baseUrl, "GET", path), 405, "unsupported")
    }))

  it.effect("the typed client checks a login start's payload against the same schema before sending it", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const client = yield* clientFor(baseUrl)
      const typed = yield* Effect.flip(client.identity.loginStart({ payload: { email: "nope" } }))
      assert.isTrue(Schema.isSchemaError(typed), String(typed))
    }))

  it.effect("the emailHint masks the address", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const tag = randomBytes(4).toString("hex")
      const challenge = yield* startLogin(baseUrl, `Zed.${tag}@Mail.Example.TEST`)
      assert.strictEqual(challenge.delivery.emailHint, "z***@mail.example.test")
      assert.notInclude(challenge.delivery.emailHint, tag)
    }))

  // -------------------------------------------------------------------------------------------------------
  // login complete
  // -------------------------------------------------------------------------------------------------------

  it.effect("login complete: wrong code and unknown challenge are not_found; malformed input is 422", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("wrong")
      const challenge = yield* startLogin(baseUrl, email)
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      failed(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 404, "not_found")
      failed(yield* completeLogin(baseUrl, `chl_${"0".repeat(26)}`, code), 404, "not_found")
      validationOn(yield* completeLogin(baseUrl, challenge.challengeId, "12345"), "code")
      validationOn(yield* completeLogin(baseUrl, challenge.challengeId, "abcdef"), "code")
      // Clients treat challenge ids as opaque: one not of our form is unknown (404), not malformed.
      failed(yield* completeLogin(baseUrl, "chl_nope", code), 404, "not_found")
      validationOn(yield* completeLogin(baseUrl, "", code), "challengeId")
      const both = invalidFields(yield* call(baseUrl, "POST", "/v1/auth/login/complete", { body: {} }))
      assert.includeMembers(Object.keys(both), ["challengeId", "code"])
      // one wrong code does not spend the challenge
      okData(yield* completeLogin(baseUrl, challenge.challengeId, code), LoginResult)
    }))

  it.effect("five wrong codes spend the challenge: the right code then gets 412", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("five")
      const challenge = yield* startLogin(baseUrl, email)
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      for (let attempt = 0; attempt < 5; attempt++) {
        failed(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 404, "not_found")
      }
      failed(yield* completeLogin(baseUrl, challenge.challengeId, code), 412, "precondition_failed")
      // spent whatever the code
      failed(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 412, "precondition_failed")
      // a fresh challenge for the same email still works
      const fresh = yield* signIn(baseUrl, email)
      assert.match(fresh.token, TOKEN)
    }))

  it.effect("a used challenge gets 412 whatever the code", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { challengeId, code } = yield* signIn(baseUrl, freshEmail("reuse"))
      failed(yield* completeLogin(baseUrl, challengeId, code), 412, "precondition_failed")
      failed(yield* completeLogin(baseUrl, challengeId, WRONG_CODE(code)), 412, "precondition_failed")
    }))

  it.effect("a challenge belongs to its own code: another challenge's code is wrong", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("pair")
      const first = yield* startLogin(baseUrl, email)
      const second = yield* startLogin(baseUrl, email)
      const firstCode = yield* codeFor(baseUrl, email, first.challengeId)
      const secondCode = yield* codeFor(baseUrl, email, second.challengeId)
      if (firstCode !== secondCode) {
        failed(yield* completeLogin(baseUrl, second.challengeId, firstCode), 404, "not_found")
      }
      okData(yield* completeLogin(baseUrl, first.challengeId, firstCode), LoginResult)
      okData(yield* completeLogin(baseUrl, second.challengeId, secondCode), LoginResult)
    }))

  // -------------------------------------------------------------------------------------------------------
  // users and workspaces
  // -------------------------------------------------------------------------------------------------------

  it.effect("email addresses compare trimmed and lower-cased: one user, one workspace", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("case")
      const first = yield* signIn(baseUrl, ` ${email.toUpperCase()} `)
      const second = yield* signIn(baseUrl, email)
      assert.strictEqual(first.user.email, email)
      assert.deepStrictEqual(second.user, first.user)
      const orgs = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: second.token }), Organizations)
      assert.deepStrictEqual(orgs.organizations.map((org) => org.name), ["Personal"])
    }))

  it.effect("a taken Personal slug gets a -2 suffix", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const local = `twin-${randomBytes(4).toString("hex")}`
      const first = yield* signIn(baseUrl, `${local}@one.example.test`)
      const second = yield* signIn(baseUrl, `${local}@two.example.test`)
      assert.notStrictEqual(first.user.id, second.user.id)
      const slugOf = (token: string) =>
        Effect.map(call(baseUrl, "GET", "/v1/auth/profile", { token }), (res) => okData(res, Profile).user.lastOrgSlug)
      assert.strictEqual(yield* slugOf(first.token), local)
      assert.strictEqual(yield* slugOf(second.token), `${local}-2`)
    }))

  // -------------------------------------------------------------------------------------------------------
  // session-only routes
  // -------------------------------------------------------------------------------------------------------

  const sessionRoutes: ReadonlyArray<readonly [string, string, unknown?]> = [
    ["GET", "/v1/auth/session"],
    ["POST", "/v1/auth/logout"],
    ["GET", "/v1/auth/profile"],
    ["PATCH", "/v1/auth/profile", { displayName: "x" }],
    ["GET", "/v1/auth/security-events"]
  ]

  it.effect("session routes answer 401 without a credential, with a garbage one, or a forged session token", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token } = yield* signIn(baseUrl, freshEmail("forged"))
      const [, sessionId] = TOKEN.exec(token) ?? []
      const credentials: ReadonlyArray<Record<string, string> | undefined> = [
        undefined,
        { authorization: "Bearer garbage" },
        { authorization: "Bearer " },
        { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` },
        { authorization: `Bearer sps_${sessionId}.${"0".repeat(64)}` },
        { authorization: `Bearer sps_ses_${"0".repeat(26)}.${"a".repeat(64)}` }
      ]
      for (const [method, path, body] of sessionRoutes) {
        for (const headers of credentials) {
          const res = yield* call(baseUrl, method, path, {
            ...(headers === undefined ? {} : { headers }),
            ...(body === undefined ? {} : { body })
          })
          failed(res, 401, "unauthenticated")
        }
      }
      // the credential is checked before the body: an invalid patch without a token is still 401, not 422
      failed(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { body: { displayName: 5 } }), 401, "unauthenticated")
      failed(yield* call(baseUrl, "GET", "/v1/auth/security-events?limit=0"), 401, "unauthenticated")
      // the genuine token still works: a forged one did not revoke it
      okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token }), { session: Session, user: User })
      const typed = yield* Effect.flip((yield* clientFor(baseUrl, "garbage")).session.getProfile())
      assert.instanceOf(typed, Unauthenticated)
    }))

  it.effect("logout revokes only its own session, at once", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("logout")
      const one = yield* signIn(baseUrl, email)
      const two = yield* signIn(baseUrl, email)
      assert.deepStrictEqual(okData(yield* call(baseUrl, "POST", "/v1/auth/logout", { token: one.token }), Success), {
        success: true
      })
      for (const [method, path, body] of sessionRoutes) {
        failed(
          yield* call(baseUrl, method, path, { token: one.token, ...(body === undefined ? {} : { body }) }),
          401,
          "unauthenticated"
        )
      }
      okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token: two.token }), { session: Session, user: User })
      const { events } = yield* allSecurityEvents(baseUrl, two.token)
      const revoked = events.filter((event) => event.eventType === "session.revoked")
      assert.strictEqual(revoked.length, 1)
      assert.strictEqual(revoked[0]?.outcome, "success")
    }))

  // -------------------------------------------------------------------------------------------------------
  // profile
  // -------------------------------------------------------------------------------------------------------

  /** A fresh user who renamed itself "Ada": its token, the user before and the profile answer after. */
  const renamed = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const { token, user } = yield* signIn(baseUrl, freshEmail("profile"))
    const personal = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token }), Profile).user.lastOrgSlug
    const countOf = (type: string) =>
      Effect.map(allSecurityEvents(baseUrl, token), ({ events }) => events.filter((e) => e.eventType === type).length)
    const profile = (body: unknown) =>
      Effect.map(call(baseUrl, "PATCH", "/v1/auth/profile", { token, body }), (res) => okData(res, Profile))
    const answer = yield* profile({ displayName: "Ada" })
    return { baseUrl, token, user, personal, countOf, profile, renamed: answer }
  })

  it.effect("profile: a displayName change answers the user and is a security event", () =>
    Effect.gen(function*() {
      const { baseUrl, countOf, personal, renamed: answer, token, user } = yield* renamed
      assert.deepStrictEqual(answer, { user: { ...user, displayName: "Ada", lastOrgSlug: personal } })
      assert.strictEqual(yield* countOf("user.profile.updated"), 1)
      const [latest] = (yield* allSecurityEvents(baseUrl, token)).events
      assert.strictEqual(latest?.eventType, "user.profile.updated")
      assert.strictEqual(latest?.outcome, "success")
    }))

  it.effect("profile: a lastOrgSlug change persists and is no security event", () =>
    Effect.gen(function*() {
      const { baseUrl, countOf, profile, renamed: answer, token } = yield* renamed
      // a second workspace to land on
      const created = okData(
        yield* call(baseUrl, "POST", "/v1/organizations", {
          token,
          body: { name: `Side ${randomBytes(3).toString("hex")}` }
        }),
        { organization: Organization }
      )
      const side = created.organization.slug
      const moved = yield* profile({ lastOrgSlug: side })
      assert.deepStrictEqual(moved.user, { ...answer.user, lastOrgSlug: side })
      assert.strictEqual(yield* countOf("user.profile.updated"), 1)
      assert.deepStrictEqual(okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token }), Profile), moved)
    }))

  it.effect("profile: an empty patch or the same displayName records nothing; clearing the displayName does", () =>
    Effect.gen(function*() {
      const { baseUrl, countOf, profile, renamed: answer, token } = yield* renamed
      assert.deepStrictEqual(yield* profile({}), answer)
      yield* profile({ displayName: "Ada" })
      assert.strictEqual(yield* countOf("user.profile.updated"), 1)
      const cleared = yield* profile({ displayName: null })
      assert.isNull(cleared.user.displayName)
      assert.strictEqual(yield* countOf("user.profile.updated"), 2)
      // the typed client sees the same user
      const client = yield* clientFor(baseUrl, token)
      assert.deepStrictEqual((yield* client.session.getProfile()).user, cleared.user)
    }))

  it.effect("profile: lastOrgSlug must name a workspace the caller belongs to (422)", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const mine = yield* signIn(baseUrl, freshEmail("mine"))
      const theirs = yield* signIn(baseUrl, freshEmail("theirs"))
      const before = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: mine.token }), Profile)
      const foreign =
        okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: theirs.token }), Profile).user.lastOrgSlug
      assert.isNotNull(foreign)
      const patch = (body: unknown) => call(baseUrl, "PATCH", "/v1/auth/profile", { token: mine.token, body })
      validationOn(yield* patch({ lastOrgSlug: foreign }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: `missing-${randomBytes(4).toString("hex")}` }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: "" }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: 7 }), "lastOrgSlug")
      validationOn(yield* patch({ displayName: "x".repeat(129) }), "displayName")
      // the workspace's other spellings are not slugs
      const [org] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: mine.token }), Organizations)
        .organizations
      assert.isDefined(org)
      validationOn(yield* patch({ lastOrgSlug: org.id }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: org.workspaceRef }), "lastOrgSlug")
      // a refused patch changes nothing, not even the fields that were valid
      validationOn(yield* patch({ displayName: "Changed", lastOrgSlug: foreign }), "lastOrgSlug")
      assert.deepStrictEqual(
        okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: mine.token }), Profile),
        before
      )
      const { events } = yield* allSecurityEvents(baseUrl, mine.token)
      assert.isFalse(events.some((event) => event.eventType === "user.profile.updated"))

      const client = yield* clientFor(baseUrl, mine.token)
      const typed = yield* Effect.flip(client.session.updateProfile({ payload: { lastOrgSlug: foreign } }))
      assert.instanceOf(typed, ValidationFailed)
      assert.deepStrictEqual(Object.keys(wire(FieldMessages, typed.error.details["fields"])), ["lastOrgSlug"])
    }))

  // -------------------------------------------------------------------------------------------------------
  // security events
  // -------------------------------------------------------------------------------------------------------

  /**
   * An address's history from before its user existed: a challenge, a wrong code, then the sign-in sent with a
   * user agent; and the new user's security-event page.
   */
  const history = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const email = freshEmail("history")
    const challenge = yield* startLogin(baseUrl, email)
    const code = yield* codeFor(baseUrl, email, challenge.challengeId)
    const wrong = WRONG_CODE(code)
    failed(yield* completeLogin(baseUrl, challenge.challengeId, wrong), 404, "not_found")
    const result = okData(
      yield* call(baseUrl, "POST", "/v1/auth/login/complete", {
        body: { challengeId: challenge.challengeId, code },
        headers: { "user-agent": "identity-e2e/1.0" }
      }),
      LoginResult
    )
    const token = result.token
    const res = yield* call(baseUrl, "GET", "/v1/auth/security-events", { token })
    const events = okData(res, SecurityEvents).securityEvents
    return { challenge, code, wrong, token, res, events }
  })

  it.effect("security events: the email's history before the user existed, newest first, in the wire shape", () =>
    Effect.gen(function*() {
      const { events } = yield* history
      assertNewestFirst(events, ["session.created", "login.succeeded", "login.failed", "login.challenge.created"])
      const outcomes = Object.fromEntries(events.map((event) => [event.eventType, event.outcome]))
      assert.deepStrictEqual(outcomes, {
        "session.created": "success",
        "login.succeeded": "success",
        "login.failed": "failure",
        "login.challenge.created": "success"
      })
      for (const event of events) {
        assert.deepStrictEqual(sortedKeys(event), [
          "eventType",
          "ip",
          "metadata",
          "occurredAt",
          "outcome",
          "requestId",
          "userAgent"
        ])
        assert.match(event.occurredAt, ISO_MS)
        assert.match(event.requestId ?? "", REQUEST_ID)
        assert.isObject(event.metadata)
      }
    }))

  it.effect("security events carry the request's user agent, client address and request id, and metadata", () =>
    Effect.gen(function*() {
      const { challenge, events } = yield* history
      const [signedIn, created, failedLogin] = ["login.succeeded", "session.created", "login.failed"].map((type) =>
        events.find((event) => event.eventType === type)
      )
      assert.strictEqual(signedIn?.userAgent, "identity-e2e/1.0")
      assert.strictEqual(created?.userAgent, "identity-e2e/1.0")
      assert.isString(signedIn?.ip)
      assert.strictEqual(signedIn?.requestId, created?.requestId)
      assert.notStrictEqual(failedLogin?.requestId, signedIn?.requestId)
      assert.deepStrictEqual(signedIn?.metadata, { via: "email_code" })
      assert.strictEqual(failedLogin?.metadata["reason"], "wrong_code")
      assert.strictEqual(failedLogin?.metadata["challengeId"], challenge.challengeId)
    }))

  it.effect("security events hold no code, token or hash: not in values, and no secret-named key has a value", () =>
    Effect.gen(function*() {
      const { code, events, res, token, wrong } = yield* history
      const secret = TOKEN.exec(token)?.[2] ?? ""
      assert.notInclude(res.text, token)
      assert.notInclude(res.text, secret)
      for (const [path, value] of events.flatMap((event) => metadataEntries(event.metadata))) {
        assert.notStrictEqual(value, code, path)
        assert.notStrictEqual(value, wrong, path)
        assert.notStrictEqual(String(value), code, path)
        if (/code|hash|token|secret/i.test(path) && !/challengeId$/.test(path)) {
          assert.strictEqual(value, "[REDACTED]", path)
        }
        if (typeof value === "string") assert.notMatch(value, /^[0-9a-f]{64}$/, path)
      }
    }))

  /** A fresh user with three profile changes, all its security events, and the cursor after the first. */
  const paging = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const { token } = yield* signIn(baseUrl, freshEmail("paging"))
    for (const displayName of ["One", "Two", "Three"]) {
      okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName } }), Profile)
    }
    const { events: all } = yield* allSecurityEvents(baseUrl, token)
    const eventsPage = (query: string, as = token) =>
      Effect.map(
        call(baseUrl, "GET", `/v1/auth/security-events${query}`, { token: as }),
        (res) => pageOf(res, SecurityEvents)
      )
    const first = (yield* eventsPage("?limit=1")).cursor ?? ""
    return { baseUrl, token, all, eventsPage, first }
  })

  it.effect("security events: a walk with limit=1 sees every event once, in order, ending with a null cursor", () =>
    Effect.gen(function*() {
      const { all, eventsPage } = yield* paging
      assertNewestFirst(all, [
        "user.profile.updated",
        "user.profile.updated",
        "user.profile.updated",
        "session.created",
        "login.succeeded",
        "login.challenge.created"
      ])
      const walked: Array<typeof SecurityEvent.Encoded> = []
      const cursors: Array<string> = []
      let cursor: string | null = null
      do {
        const query: string = cursor === null ? "?limit=1" : `?limit=1&cursor=${encodeURIComponent(cursor)}`
        const page = yield* eventsPage(query)
        assert.isAtMost(page.data.securityEvents.length, 1)
        walked.push(...page.data.securityEvents)
        cursor = page.cursor
        if (cursor !== null) cursors.push(cursor)
        assert.isAtMost(walked.length, all.length + 1, "the walk does not end")
      } while (cursor !== null)
      assert.deepStrictEqual(walked, all)
      assert.strictEqual(cursors.length, all.length - 1)
    }))

  it.effect("security events: the limit may change between pages; the default page holds them all (50)", () =>
    Effect.gen(function*() {
      const { all, eventsPage, first } = yield* paging
      const wide = yield* eventsPage(`?limit=100&cursor=${encodeURIComponent(first)}`)
      assert.deepStrictEqual(wide.data.securityEvents, all.slice(1))
      assert.isNull(wide.cursor)
      assert.deepStrictEqual((yield* eventsPage("")).data.securityEvents, all)
    }))

  it.effect("security events: a limit outside 1..100, or not an integer, is 422 on limit", () =>
    Effect.gen(function*() {
      const { baseUrl, token } = yield* paging
      for (const limit of ["0", "101", "-1", "1.5", "abc", ""]) {
        validationOn(yield* call(baseUrl, "GET", `/v1/auth/security-events?limit=${limit}`, { token }), "limit")
      }
    }))

  it.effect("security events: a tampered, garbage or another user's cursor, or another list's, is 422 on cursor", () =>
    Effect.gen(function*() {
      const { baseUrl, eventsPage, first, token } = yield* paging
      const flipped = `${first.slice(0, -2)}${first.at(-2) === "A" ? "B" : "A"}${first.at(-1)}`
      const other = yield* signIn(baseUrl, freshEmail("paging-other"))
      const theirs = yield* eventsPage("?limit=1", other.token)
      assert.isString(theirs.cursor)
      for (const bad of [flipped, "garbage", `${first}x`, theirs.cursor ?? ""]) {
        validationOn(
          yield* call(baseUrl, "GET", `/v1/auth/security-events?cursor=${encodeURIComponent(bad)}`, { token }),
          "cursor"
        )
      }
      // a cursor of another list (workspaces) is refused too
      ok(yield* call(baseUrl, "POST", "/v1/organizations", { token, body: { name: "Second" } }))
      const orgPage = pageOf(yield* call(baseUrl, "GET", "/v1/organizations?limit=1", { token }), Organizations)
      assert.isString(orgPage.cursor)
      validationOn(
        yield* call(baseUrl, "GET", `/v1/auth/security-events?cursor=${encodeURIComponent(orgPage.cursor ?? "")}`, {
          token
        }),
        "cursor"
      )
      // the typed client is refused another user's cursor the same way
      const client = yield* clientFor(baseUrl, other.token)
      const typedBad = yield* Effect.flip(client.session.securityEvents({ query: { cursor: first } }))
      assert.instanceOf(typedBad, ValidationFailed)
    }))

  it.effect("security events inserted during a walk never shift it: the rows after the cursor are unchanged", () =>
    Effect.gen(function*() {
      const { all, baseUrl, eventsPage, first, token } = yield* paging
      okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName: "Four" } }), Profile)
      const resumed = yield* eventsPage(`?limit=100&cursor=${encodeURIComponent(first)}`)
      assert.deepStrictEqual(resumed.data.securityEvents, all.slice(1))
    }))

  // -------------------------------------------------------------------------------------------------------
  // rate limit
  // -------------------------------------------------------------------------------------------------------

  it.effect("the 11th login start for one email within 60 s is 429 rate_limited with Retry-After", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("limit")
      for (let i = 0; i < 10; i++) yield* startLogin(baseUrl, i % 2 === 0 ? email : ` ${email.toUpperCase()} `)
      const res = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
      const error = failed(res, 429, "rate_limited")
      assert.deepStrictEqual(sortedKeys(error.details), ["retryAfterSeconds", "scope"])
      assert.strictEqual(error.details["scope"], "identity")
      const retryAfter = wire(Schema.Number, error.details["retryAfterSeconds"])
      assert.isTrue(Number.isInteger(retryAfter), String(retryAfter))
      assert.isAtLeast(retryAfter, 1)
      assert.isAtMost(retryAfter, 60)
      assert.strictEqual(res.headers.get("retry-after"), String(retryAfter))

      // login complete shares the bucket; rejected requests do not count but the bucket stays full
      const again = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
      failed(again, 429, "rate_limited")
      const typed = yield* Effect.flip((yield* clientFor(baseUrl)).identity.loginStart({ payload: { email } }))
      assert.instanceOf(typed, RateLimited)

      // the limit is per email: another address is unaffected, and nothing was mailed for the refused starts
      yield* startLogin(baseUrl, freshEmail("limit-other"))
      const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`), Messages)
      assert.strictEqual(outbox.messages.length, 10)
    }))

  it.effect("login complete counts against the same auth bucket", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("limit-complete")
      const challenge = yield* startLogin(baseUrl, email)
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      // 1 start + 4 wrong codes + 5 more starts = 10 counted requests
      for (let i = 0; i < 4; i++) {
        failed(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 404, "not_found")
      }
      for (let i = 0; i < 5; i++) yield* startLogin(baseUrl, email)
      const res = yield* completeLogin(baseUrl, challenge.challengeId, code)
      const error = failed(res, 429, "rate_limited")
      assert.strictEqual(error.details["scope"], "identity")
      assert.strictEqual(res.headers.get("retry-after"), String(error.details["retryAfterSeconds"]))
    }))

  // -------------------------------------------------------------------------------------------------------
  // dev outbox
  // -------------------------------------------------------------------------------------------------------

  /** Two login starts for one address around one for another: the addresses and the two challenges. */
  const mailed = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const email = freshEmail("outbox")
    const other = freshEmail("outbox-other")
    const first = yield* startLogin(baseUrl, email)
    yield* startLogin(baseUrl, other)
    const second = yield* startLogin(baseUrl, email)
    return { baseUrl, email, other, first, second }
  })

  it.effect("the dev outbox filters by recipient case-insensitively, newest first, in the message shape", () =>
    Effect.gen(function*() {
      const { baseUrl, email, first, second } = yield* mailed
      for (const to of [email, email.toUpperCase()]) {
        const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(to)}`), Messages)
        assert.deepStrictEqual(sortedKeys(outbox), ["messages"])
        const messages = outbox.messages
        assert.deepStrictEqual(messages.map((m) => m.data["challengeId"]), [second.challengeId, first.challengeId])
        for (const message of messages) {
          assert.deepStrictEqual(sortedKeys(message), ["createdAt", "data", "id", "subject", "template", "text", "to"])
          assert.strictEqual(message.to, email)
          assert.strictEqual(message.template, "login_code")
          assert.deepStrictEqual(sortedKeys(message.data), ["challengeId", "code"])
          assert.include(message.text, String(message.data["code"]))
          assert.match(message.createdAt, ISO_MS)
        }
        assert.isAtLeast(Date.parse(messages[0]?.createdAt ?? ""), Date.parse(messages[1]?.createdAt ?? ""))
      }
    }))

  it.effect("the dev outbox without `to` holds everyone's mail, newest first; an address never mailed has none", () =>
    Effect.gen(function*() {
      const { baseUrl, email, first, other, second } = yield* mailed
      const everyone = okData(yield* call(baseUrl, "GET", "/v1/dev/outbox"), Messages).messages
      const mine = everyone.filter((m) => m.to === email || m.to === other).map((m) => m.data["challengeId"])
      assert.strictEqual(mine.length, 3)
      assert.strictEqual(mine[0], second.challengeId)
      assert.strictEqual(mine[2], first.challengeId)
      for (let i = 1; i < everyone.length; i++) {
        assert.isAtLeast(Date.parse(everyone[i - 1]?.createdAt ?? ""), Date.parse(everyone[i]?.createdAt ?? ""))
      }
      const nobody = okData(
        yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(freshEmail("none"))}`),
        Messages
      )
      assert.deepStrictEqual(nobody, { messages: [] })
    }))

  it.effect("the typed client reads the dev outbox the same way", () =>
    Effect.gen(function*() {
      const { baseUrl, email, first, second } = yield* mailed
      const typed = yield* (yield* clientFor(baseUrl)).system.outbox({ query: { to: email.toUpperCase() } })
      assert.deepStrictEqual(typed.messages.map((m) => m.data["challengeId"]), [second.challengeId, first.challengeId])
      assert.instanceOf(typed.messages[0]?.createdAt, Date)
    }))
})

if (process.env["DATABASE_URL"]) {
  layer(testServer("postgres"), { excludeTestServices: true })("identity over HTTP [postgres]", (it) => {
    coreFlow(it)
    concurrency(it)
  })
}
