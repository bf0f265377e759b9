/**
 * Identity end to end over real HTTP (spec: Identity, Authentication 1–5; contract §2 and §4): email-code
 * sign-in, sessions, logout, the profile, the security-event log, the auth rate limit and the dev outbox.
 * Every flow is pinned byte for byte with raw `fetch` and driven again through the typed client derived from
 * the domain API. The whole suite runs on PGlite; the core flow also runs on PostgreSQL when `DATABASE_URL`
 * is set. Challenge and session expiry need a movable clock: `packages/server/test/identity/service.test.ts`.
 */
import { NotFound, PreconditionFailed, RateLimited, Unauthenticated, ValidationFailed } from "@cp/domain"
import { assert, layer, type Vitest } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { call, clientFor, TestServer, testServer } from "./support/server.ts"

// ---------------------------------------------------------------------------------------------------------
// Wire helpers
// ---------------------------------------------------------------------------------------------------------

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const REQUEST_ID = new RegExp(`^req_${ULID}$`)
const TOKEN = new RegExp(`^sps_(ses_${ULID})\\.([0-9a-f]{64})$`)
const CHALLENGE_ID = new RegExp(`^chl_${ULID}$`)
const USER_ID = new RegExp(`^usr_${ULID}$`)
const SESSION_ID = new RegExp(`^ses_${ULID}$`)
const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE

/** JSON as the tests read it: whatever the server sent, navigated without ceremony (the asserts are the types). */
type Json = any

type Raw = Effect.Success<ReturnType<typeof call>>

/** A fresh address per test, so tests sharing one server never share a user or a rate-limit bucket. */
const freshEmail = (tag: string) => `${tag}-${randomBytes(5).toString("hex")}@example.test`

const sortedKeys = (value: Json): Array<string> => Object.keys(value).sort()

/** Asserts the success envelope (`{ data, meta: { requestId, cursor } }`, header `x-request-id`) and returns it. */
const envelope = (res: Raw, status = 200): { readonly data: Json; readonly cursor: string | null } => {
  assert.strictEqual(res.status, status, res.text)
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/)
  const body: Json = res.json
  assert.deepStrictEqual(sortedKeys(body), ["data", "meta"], res.text)
  assert.deepStrictEqual(sortedKeys(body.meta), ["cursor", "requestId"], res.text)
  assert.match(body.meta.requestId, REQUEST_ID)
  assert.strictEqual(res.headers.get("x-request-id"), body.meta.requestId)
  return { data: body.data, cursor: body.meta.cursor }
}

/** The `data` of a success that is not a page (`meta.cursor` is null). */
const okData = (res: Raw): Json => {
  const { data, cursor } = envelope(res)
  assert.isNull(cursor)
  return data
}

/** Asserts the error envelope `{ error: { code, message, details, requestId } }` and returns `error`. */
const wireError = (res: Raw, status: number, code: string): Json => {
  assert.strictEqual(res.status, status, res.text)
  const body: Json = res.json
  assert.deepStrictEqual(sortedKeys(body), ["error"], res.text)
  assert.deepStrictEqual(sortedKeys(body.error), ["code", "details", "message", "requestId"], res.text)
  assert.strictEqual(body.error.code, code, res.text)
  assert.isString(body.error.message)
  assert.isObject(body.error.details)
  assert.match(body.error.requestId, REQUEST_ID)
  assert.strictEqual(res.headers.get("x-request-id"), body.error.requestId)
  return body.error
}

/** 422 `validation_failed` naming `field` in `details.fields` (each field maps to an array of messages). */
const validationOn = (res: Raw, field: string): Json => {
  const error = wireError(res, 422, "validation_failed")
  const fields = error.details.fields
  assert.isObject(fields, res.text)
  assert.isArray(fields[field], res.text)
  assert.isAbove(fields[field].length, 0)
  for (const message of fields[field]) assert.isString(message)
  return error
}

/** An ISO timestamp with milliseconds, about `offsetMs` after `from` (allowing `slackMs` of request time). */
const assertTimestampNear = (value: unknown, from: number, offsetMs: number, slackMs = 30_000) => {
  assert.isString(value)
  assert.match(value as string, ISO_MS)
  const at = Date.parse(value as string)
  assert.isAtLeast(at, from + offsetMs - 1_000, `${value} vs +${offsetMs}`)
  assert.isAtMost(at, from + offsetMs + slackMs, `${value} vs +${offsetMs}`)
}

// ---------------------------------------------------------------------------------------------------------
// Flows
// ---------------------------------------------------------------------------------------------------------

const startLogin = (baseUrl: string, email: string) =>
  Effect.map(call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), okData)

/** The code mailed for `challengeId`, read from the dev outbox (contract §2). */
const codeFor = (baseUrl: string, email: string, challengeId: string) =>
  Effect.gen(function*() {
    const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`))
    const message = outbox.messages.find((m: Json) => m.data.challengeId === challengeId)
    assert.isDefined(message, `no login code mailed for ${challengeId}`)
    assert.strictEqual(message.template, "login_code")
    assert.match(message.data.code, /^\d{6}$/)
    return message.data.code as string
  })

const completeLogin = (baseUrl: string, challengeId: string, code: string) =>
  call(baseUrl, "POST", "/v1/auth/login/complete", { body: { challengeId, code } })

/** A full email-code sign-in over raw HTTP. */
const signIn = (baseUrl: string, email: string) =>
  Effect.gen(function*() {
    const challenge = yield* startLogin(baseUrl, email)
    // the outbox matches `to` case-insensitively but does not trim it (contract §2)
    const code = yield* codeFor(baseUrl, email.trim(), challenge.challengeId)
    const result = okData(yield* completeLogin(baseUrl, challenge.challengeId, code))
    return { challengeId: challenge.challengeId as string, code, token: result.token as string, user: result.user }
  })

/** Every security event of the caller, newest first, as raw wire text and parsed. */
const allSecurityEvents = (baseUrl: string, token: string) =>
  Effect.gen(function*() {
    const res = yield* call(baseUrl, "GET", "/v1/auth/security-events?limit=100", { token })
    const { data, cursor } = envelope(res)
    assert.isNull(cursor)
    assert.deepStrictEqual(sortedKeys(data), ["securityEvents"])
    return { text: res.text, events: data.securityEvents as Array<Json> }
  })

/**
 * Asserts newest-first order of event types. Events recorded at the same millisecond (login.succeeded and
 * session.created share one request) tie on `occurredAt`, and their ids do not order them within the tie (see the
 * service test's same-millisecond case), so only the order between distinct timestamps is pinned here.
 */
const assertNewestFirst = (events: ReadonlyArray<Json>, expected: ReadonlyArray<string>) => {
  const types = events.map((event) => event.eventType as string)
  assert.deepStrictEqual([...types].sort(), [...expected].sort(), `${types}`)
  for (let i = 1; i < events.length; i++) {
    assert.isAtLeast(Date.parse(events[i - 1].occurredAt), Date.parse(events[i].occurredAt), "newest first")
  }
  for (let i = 0; i < events.length;) {
    let j = i
    while (j < events.length && events[j].occurredAt === events[i]?.occurredAt) j++
    assert.deepStrictEqual(types.slice(i, j).sort(), expected.slice(i, j).sort(), `${types} vs ${expected}`)
    i = j
  }
}

const WRONG_CODE = (code: string) => code === "000000" ? "999999" : "000000"

/** Every metadata value, depth first, so tests can check none is a code, token or hash. */
const metadataEntries = (value: Json, path = ""): Array<readonly [string, unknown]> =>
  value !== null && typeof value === "object"
    ? Object.entries(value).flatMap(([key, inner]) => metadataEntries(inner, path === "" ? key : `${path}.${key}`))
    : [[path, value]]

// ---------------------------------------------------------------------------------------------------------
// The core flow, on every backend
// ---------------------------------------------------------------------------------------------------------

/** Sign-in → session → profile → workspace → logout, raw then typed; shared by the PGlite and PostgreSQL runs. */
const coreFlow = (it: Vitest.MethodsNonLive<TestServer>) => {
  it.effect("email-code sign-in, session, profile and logout on the wire", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const local = `Ada.Lovelace+${randomBytes(4).toString("hex")}`
      const email = `${local.toLowerCase()}@example.test`
      const before = Date.now()

      // login start: { challengeId, expiresAt, delivery: { mode, emailHint } }, challenge valid 10 minutes
      const challenge = yield* startLogin(baseUrl, `${local}@Example.TEST`)
      assert.deepStrictEqual(sortedKeys(challenge), ["challengeId", "delivery", "expiresAt"])
      assert.match(challenge.challengeId, CHALLENGE_ID)
      assertTimestampNear(challenge.expiresAt, before, 10 * MINUTE)
      assert.deepStrictEqual(challenge.delivery, { mode: "email", emailHint: "a***@example.test" })

      // the code travels by mail (normalized recipient), never in the answer
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      assert.notInclude(JSON.stringify(challenge), code)

      // login complete: { token, tokenType, expiresAt, user: { id, email, displayName } }, session 30 days
      const completed = yield* completeLogin(baseUrl, challenge.challengeId, code)
      const result = okData(completed)
      assert.deepStrictEqual(sortedKeys(result), ["expiresAt", "token", "tokenType", "user"])
      const token: string = result.token
      const [, sessionId] = TOKEN.exec(token) ?? []
      assert.isDefined(sessionId, `token ${token}`)
      assert.strictEqual(result.tokenType, "bearer")
      assertTimestampNear(result.expiresAt, before, 30 * DAY)
      assert.deepStrictEqual(sortedKeys(result.user), ["displayName", "email", "id"])
      assert.match(result.user.id, USER_ID)
      assert.strictEqual(result.user.email, email)
      assert.isNull(result.user.displayName)

      // first sign-in created a `Personal` workspace, slug from the email's local part, now the lastOrgSlug
      const slug = local.toLowerCase().replace(/[^a-z0-9]+/g, "-")
      const session = okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token }))
      assert.deepStrictEqual(sortedKeys(session), ["session", "user"])
      assert.deepStrictEqual(sortedKeys(session.session), ["createdAt", "expiresAt", "id"])
      assert.strictEqual(session.session.id, sessionId)
      assert.match(session.session.id, SESSION_ID)
      assert.match(session.session.createdAt, ISO_MS)
      assert.strictEqual(session.session.expiresAt, result.expiresAt)
      assert.strictEqual(Date.parse(session.session.expiresAt) - Date.parse(session.session.createdAt), 30 * DAY)
      assert.deepStrictEqual(session.user, { id: result.user.id, email, displayName: null, lastOrgSlug: slug })

      const organizations = envelope(yield* call(baseUrl, "GET", "/v1/organizations", { token })).data.organizations
      assert.strictEqual(organizations.length, 1)
      assert.strictEqual(organizations[0].name, "Personal")
      assert.strictEqual(organizations[0].slug, slug)

      const profile = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token }))
      assert.deepStrictEqual(profile, { user: session.user })

      // logout: { success: true }; the very next request with the token is 401
      assert.deepStrictEqual(okData(yield* call(baseUrl, "POST", "/v1/auth/logout", { token })), { success: true })
      wireError(yield* call(baseUrl, "GET", "/v1/auth/session", { token }), 401, "unauthenticated")
      wireError(yield* call(baseUrl, "POST", "/v1/auth/logout", { token }), 401, "unauthenticated")

      // a second sign-in for the same address (any spelling) is the same user, with no second workspace
      const again = yield* signIn(baseUrl, `  ${email.toUpperCase()}\t`)
      assert.notStrictEqual(again.token, token)
      assert.deepStrictEqual(again.user, result.user)
      const stillOne = envelope(yield* call(baseUrl, "GET", "/v1/organizations", { token: again.token })).data
      assert.strictEqual(stillOne.organizations.length, 1)
    }))

  it.effect("the same flow through the typed client", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("typed")
      const anonymous = yield* clientFor(baseUrl)
      const challenge = yield* anonymous.identity.loginStart({ payload: { email } })
      assert.match(challenge.challengeId, CHALLENGE_ID)
      assert.instanceOf(challenge.expiresAt, Date)
      assert.deepStrictEqual(challenge.delivery, { mode: "email", emailHint: `${email.charAt(0)}***@example.test` })

      const mail = yield* anonymous.system.outbox({ query: { to: email } })
      const code = String(mail.messages[0]?.data["code"])
      assert.strictEqual(mail.messages[0]?.data["challengeId"], challenge.challengeId)

      const wrong = yield* Effect.flip(
        anonymous.identity.loginComplete({ payload: { challengeId: challenge.challengeId, code: WRONG_CODE(code) } })
      )
      assert.instanceOf(wrong, NotFound)
      assert.strictEqual(wrong instanceof NotFound ? wrong.error.code : undefined, "not_found")

      const result = yield* anonymous.identity.loginComplete({ payload: { challengeId: challenge.challengeId, code } })
      assert.strictEqual(result.tokenType, "bearer")
      assert.match(result.token, TOKEN)
      assert.instanceOf(result.expiresAt, Date)
      assert.strictEqual(result.user.email, email)

      const reused = yield* Effect.flip(
        anonymous.identity.loginComplete({ payload: { challengeId: challenge.challengeId, code } })
      )
      assert.instanceOf(reused, PreconditionFailed)

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

  it.effect("login start refuses a bad email, a missing body, malformed JSON and a non-JSON body", () =>
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
        const missing = wireError(yield* call(baseUrl, "POST", path, { headers }), 422, "validation_failed")
        assert.isAbove(Object.keys(missing.details.fields).length, 0)
      }
      // malformed JSON is 400 bad_request, not 422
      wireError(yield* call(baseUrl, "POST", path, { body: "{\"email\":" }), 400, "bad_request")
      // JSON sent as another media type is 415 unsupported
      wireError(
        yield* call(baseUrl, "POST", path, {
          body: JSON.stringify({ email: freshEmail("media") }),
          headers: { "content-type": "text/plain" }
        }),
        415,
        "unsupported"
      )
      // a method the path lacks is 405 unsupported
      wireError(yield* call(baseUrl, "GET", path), 405, "unsupported")

      const client = yield* clientFor(baseUrl)
      const typed = yield* Effect.flip(client.identity.loginStart({ payload: { email: "nope" } }))
      // the typed client checks its payload against the same schema before anything is sent
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
      wireError(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 404, "not_found")
      wireError(yield* completeLogin(baseUrl, `chl_${"0".repeat(26)}`, code), 404, "not_found")
      validationOn(yield* completeLogin(baseUrl, challenge.challengeId, "12345"), "code")
      validationOn(yield* completeLogin(baseUrl, challenge.challengeId, "abcdef"), "code")
      validationOn(yield* completeLogin(baseUrl, "chl_nope", code), "challengeId")
      const both = wireError(
        yield* call(baseUrl, "POST", "/v1/auth/login/complete", { body: {} }),
        422,
        "validation_failed"
      )
      assert.includeMembers(Object.keys(both.details.fields), ["challengeId", "code"])
      // one wrong code does not spend the challenge
      okData(yield* completeLogin(baseUrl, challenge.challengeId, code))
    }))

  it.effect("five wrong codes spend the challenge: the right code then gets 412", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("five")
      const challenge = yield* startLogin(baseUrl, email)
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      for (let attempt = 0; attempt < 5; attempt++) {
        wireError(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 404, "not_found")
      }
      wireError(yield* completeLogin(baseUrl, challenge.challengeId, code), 412, "precondition_failed")
      // spent whatever the code
      wireError(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 412, "precondition_failed")
      // a fresh challenge for the same email still works
      const fresh = yield* signIn(baseUrl, email)
      assert.match(fresh.token, TOKEN)
    }))

  it.effect("a used challenge gets 412 whatever the code", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { challengeId, code } = yield* signIn(baseUrl, freshEmail("reuse"))
      wireError(yield* completeLogin(baseUrl, challengeId, code), 412, "precondition_failed")
      wireError(yield* completeLogin(baseUrl, challengeId, WRONG_CODE(code)), 412, "precondition_failed")
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
        wireError(yield* completeLogin(baseUrl, second.challengeId, firstCode), 404, "not_found")
      }
      okData(yield* completeLogin(baseUrl, first.challengeId, firstCode))
      okData(yield* completeLogin(baseUrl, second.challengeId, secondCode))
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
      const orgs = envelope(yield* call(baseUrl, "GET", "/v1/organizations", { token: second.token })).data
      assert.deepStrictEqual(orgs.organizations.map((org: Json) => org.name), ["Personal"])
    }))

  it.effect("a taken Personal slug gets a -2 suffix", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const local = `twin-${randomBytes(4).toString("hex")}`
      const first = yield* signIn(baseUrl, `${local}@one.example.test`)
      const second = yield* signIn(baseUrl, `${local}@two.example.test`)
      assert.notStrictEqual(first.user.id, second.user.id)
      const slugOf = (token: string) =>
        Effect.map(call(baseUrl, "GET", "/v1/auth/profile", { token }), (res) => okData(res).user.lastOrgSlug)
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
          wireError(res, 401, "unauthenticated")
        }
      }
      // the credential is checked before the body: an invalid patch without a token is still 401, not 422
      wireError(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { body: { displayName: 5 } }), 401, "unauthenticated")
      wireError(yield* call(baseUrl, "GET", "/v1/auth/security-events?limit=0"), 401, "unauthenticated")
      // the genuine token still works: a forged one did not revoke it
      okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token }))
      const typed = yield* Effect.flip((yield* clientFor(baseUrl, "garbage")).session.getProfile())
      assert.instanceOf(typed, Unauthenticated)
    }))

  it.effect("logout revokes only its own session, at once", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("logout")
      const one = yield* signIn(baseUrl, email)
      const two = yield* signIn(baseUrl, email)
      assert.deepStrictEqual(okData(yield* call(baseUrl, "POST", "/v1/auth/logout", { token: one.token })), {
        success: true
      })
      for (const [method, path, body] of sessionRoutes) {
        wireError(
          yield* call(baseUrl, method, path, { token: one.token, ...(body === undefined ? {} : { body }) }),
          401,
          "unauthenticated"
        )
      }
      okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token: two.token }))
      const { events } = yield* allSecurityEvents(baseUrl, two.token)
      const revoked = events.filter((event) => event.eventType === "session.revoked")
      assert.strictEqual(revoked.length, 1)
      assert.strictEqual(revoked[0].outcome, "success")
    }))

  // -------------------------------------------------------------------------------------------------------
  // profile
  // -------------------------------------------------------------------------------------------------------

  it.effect("profile: a displayName change is a security event; a lastOrgSlug change is not", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token, user } = yield* signIn(baseUrl, freshEmail("profile"))
      const personal = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token })).user.lastOrgSlug
      const countOf = (type: string) =>
        Effect.map(allSecurityEvents(baseUrl, token), ({ events }) => events.filter((e) => e.eventType === type).length)

      const renamed = okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName: "Ada" } }))
      assert.deepStrictEqual(renamed, { user: { ...user, displayName: "Ada", lastOrgSlug: personal } })
      assert.strictEqual(yield* countOf("user.profile.updated"), 1)
      const [latest] = (yield* allSecurityEvents(baseUrl, token)).events
      assert.strictEqual(latest.eventType, "user.profile.updated")
      assert.strictEqual(latest.outcome, "success")

      // a second workspace to land on
      const created = okData(
        yield* call(baseUrl, "POST", "/v1/organizations", {
          token,
          body: { name: `Side ${randomBytes(3).toString("hex")}` }
        })
      )
      const side = created.organization.slug
      const moved = okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { lastOrgSlug: side } }))
      assert.deepStrictEqual(moved.user, { ...renamed.user, lastOrgSlug: side })
      assert.strictEqual(yield* countOf("user.profile.updated"), 1)
      assert.deepStrictEqual(okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token })), moved)

      // an empty patch and an unchanged displayName change nothing and record nothing
      assert.deepStrictEqual(okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: {} })), moved)
      okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName: "Ada" } }))
      assert.strictEqual(yield* countOf("user.profile.updated"), 1)

      // clearing the displayName is a change
      const cleared = okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName: null } }))
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
      const before = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: mine.token }))
      const foreign = okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: theirs.token })).user.lastOrgSlug
      const patch = (body: unknown) => call(baseUrl, "PATCH", "/v1/auth/profile", { token: mine.token, body })
      validationOn(yield* patch({ lastOrgSlug: foreign }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: `missing-${randomBytes(4).toString("hex")}` }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: "" }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: 7 }), "lastOrgSlug")
      validationOn(yield* patch({ displayName: "x".repeat(129) }), "displayName")
      // the workspace's other spellings are not slugs
      const org =
        envelope(yield* call(baseUrl, "GET", "/v1/organizations", { token: mine.token })).data.organizations[0]
      validationOn(yield* patch({ lastOrgSlug: org.id }), "lastOrgSlug")
      validationOn(yield* patch({ lastOrgSlug: org.workspaceRef }), "lastOrgSlug")
      // a refused patch changes nothing, not even the fields that were valid
      validationOn(yield* patch({ displayName: "Changed", lastOrgSlug: foreign }), "lastOrgSlug")
      assert.deepStrictEqual(okData(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: mine.token })), before)
      const { events } = yield* allSecurityEvents(baseUrl, mine.token)
      assert.isFalse(events.some((event) => event.eventType === "user.profile.updated"))

      const client = yield* clientFor(baseUrl, mine.token)
      const typed = yield* Effect.flip(client.session.updateProfile({ payload: { lastOrgSlug: foreign } }))
      assert.instanceOf(typed, ValidationFailed)
      assert.deepStrictEqual(
        typed instanceof ValidationFailed ? Object.keys(typed.error.details["fields"] as object) : [],
        ["lastOrgSlug"]
      )
    }))

  // -------------------------------------------------------------------------------------------------------
  // security events
  // -------------------------------------------------------------------------------------------------------

  it.effect("security events: the email's history before the user existed, newest first, nothing secret", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("history")
      const challenge = yield* startLogin(baseUrl, email)
      const code = yield* codeFor(baseUrl, email, challenge.challengeId)
      const wrong = WRONG_CODE(code)
      wireError(yield* completeLogin(baseUrl, challenge.challengeId, wrong), 404, "not_found")
      const result = okData(
        yield* call(baseUrl, "POST", "/v1/auth/login/complete", {
          body: { challengeId: challenge.challengeId, code },
          headers: { "user-agent": "identity-e2e/1.0" }
        })
      )
      const token: string = result.token
      const secret = TOKEN.exec(token)?.[2] ?? ""

      const res = yield* call(baseUrl, "GET", "/v1/auth/security-events", { token })
      const { data, cursor } = envelope(res)
      assert.isNull(cursor)
      const events: Array<Json> = data.securityEvents
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
        assert.match(event.requestId, REQUEST_ID)
        assert.isObject(event.metadata)
      }
      // the sign-in's own request carried this user agent; events have a client address
      const [signedIn, created, failed] = ["login.succeeded", "session.created", "login.failed"].map((type) =>
        events.find((event) => event.eventType === type)
      )
      assert.strictEqual(signedIn.userAgent, "identity-e2e/1.0")
      assert.strictEqual(created.userAgent, "identity-e2e/1.0")
      assert.isString(signedIn.ip)
      assert.strictEqual(signedIn.requestId, created.requestId)
      assert.notStrictEqual(failed.requestId, signedIn.requestId)
      assert.deepStrictEqual(signedIn.metadata, { via: "email_code" })
      assert.strictEqual(failed.metadata.reason, "wrong_code")
      assert.strictEqual(failed.metadata.challengeId, challenge.challengeId)

      // no code, token or hash anywhere: not in values, and no secret-named key carries a value
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

  it.effect("security events: cursor paging walks every event once; bad limit or cursor is 422", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token } = yield* signIn(baseUrl, freshEmail("paging"))
      for (const displayName of ["One", "Two", "Three"]) {
        okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName } }))
      }
      const { events: all } = yield* allSecurityEvents(baseUrl, token)
      assertNewestFirst(all, [
        "user.profile.updated",
        "user.profile.updated",
        "user.profile.updated",
        "session.created",
        "login.succeeded",
        "login.challenge.created"
      ])

      // walk with limit=1: every event exactly once, in order, the last page ending with a null cursor
      const walked: Array<Json> = []
      const cursors: Array<string> = []
      let cursor: string | null = null
      do {
        const query: string = cursor === null ? "?limit=1" : `?limit=1&cursor=${encodeURIComponent(cursor)}`
        const page = envelope(yield* call(baseUrl, "GET", `/v1/auth/security-events${query}`, { token }))
        assert.isAtMost(page.data.securityEvents.length, 1)
        walked.push(...page.data.securityEvents)
        cursor = page.cursor
        if (cursor !== null) cursors.push(cursor)
        assert.isAtMost(walked.length, all.length + 1, "the walk does not end")
      } while (cursor !== null)
      assert.deepStrictEqual(walked, all)
      assert.strictEqual(cursors.length, all.length - 1)

      // limit may change between pages of one walk
      const first = cursors[0] ?? ""
      const wide = envelope(
        yield* call(baseUrl, "GET", `/v1/auth/security-events?limit=100&cursor=${encodeURIComponent(first)}`, { token })
      )
      assert.deepStrictEqual(wide.data.securityEvents, all.slice(1))
      assert.isNull(wide.cursor)

      // the default page holds everything here (50)
      assert.deepStrictEqual(
        envelope(yield* call(baseUrl, "GET", "/v1/auth/security-events", { token })).data.securityEvents,
        all
      )

      // limit outside 1..100, or not an integer: 422 on `limit`
      for (const limit of ["0", "101", "-1", "1.5", "abc", ""]) {
        validationOn(yield* call(baseUrl, "GET", `/v1/auth/security-events?limit=${limit}`, { token }), "limit")
      }

      // a tampered cursor, garbage, or another user's cursor: 422 on `cursor`
      const flipped = `${first.slice(0, -2)}${first.at(-2) === "A" ? "B" : "A"}${first.at(-1)}`
      const other = yield* signIn(baseUrl, freshEmail("paging-other"))
      const theirs = envelope(yield* call(baseUrl, "GET", "/v1/auth/security-events?limit=1", { token: other.token }))
      assert.isString(theirs.cursor)
      for (const bad of [flipped, "garbage", `${first}x`, theirs.cursor ?? ""]) {
        validationOn(
          yield* call(baseUrl, "GET", `/v1/auth/security-events?cursor=${encodeURIComponent(bad)}`, { token }),
          "cursor"
        )
      }
      // a cursor of another list (workspaces) is refused too
      okData(yield* call(baseUrl, "POST", "/v1/organizations", { token, body: { name: "Second" } }))
      const orgPage = envelope(yield* call(baseUrl, "GET", "/v1/organizations?limit=1", { token }))
      assert.isString(orgPage.cursor)
      validationOn(
        yield* call(baseUrl, "GET", `/v1/auth/security-events?cursor=${encodeURIComponent(orgPage.cursor ?? "")}`, {
          token
        }),
        "cursor"
      )

      // events inserted during a walk never shift it: the rows after the cursor are unchanged
      okData(yield* call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName: "Four" } }))
      const resumed = envelope(
        yield* call(baseUrl, "GET", `/v1/auth/security-events?limit=100&cursor=${encodeURIComponent(first)}`, { token })
      )
      assert.deepStrictEqual(resumed.data.securityEvents, all.slice(1))

      // the typed client walks the same pages
      const client = yield* clientFor(baseUrl, other.token)
      const typedBad = yield* Effect.flip(client.session.securityEvents({ query: { cursor: first } }))
      assert.instanceOf(typedBad, ValidationFailed)
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
      const error = wireError(res, 429, "rate_limited")
      assert.deepStrictEqual(sortedKeys(error.details), ["retryAfterSeconds", "scope"])
      assert.strictEqual(error.details.scope, "identity")
      const retryAfter = error.details.retryAfterSeconds
      assert.isTrue(Number.isInteger(retryAfter), String(retryAfter))
      assert.isAtLeast(retryAfter, 1)
      assert.isAtMost(retryAfter, 60)
      assert.strictEqual(res.headers.get("retry-after"), String(retryAfter))

      // login complete shares the bucket; rejected requests do not count but the bucket stays full
      const again = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
      wireError(again, 429, "rate_limited")
      const typed = yield* Effect.flip((yield* clientFor(baseUrl)).identity.loginStart({ payload: { email } }))
      assert.instanceOf(typed, RateLimited)

      // the limit is per email: another address is unaffected, and nothing was mailed for the refused starts
      yield* startLogin(baseUrl, freshEmail("limit-other"))
      const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`))
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
        wireError(yield* completeLogin(baseUrl, challenge.challengeId, WRONG_CODE(code)), 404, "not_found")
      }
      for (let i = 0; i < 5; i++) yield* startLogin(baseUrl, email)
      const res = yield* completeLogin(baseUrl, challenge.challengeId, code)
      const error = wireError(res, 429, "rate_limited")
      assert.strictEqual(error.details.scope, "identity")
      assert.strictEqual(res.headers.get("retry-after"), String(error.details.retryAfterSeconds))
    }))

  // -------------------------------------------------------------------------------------------------------
  // dev outbox
  // -------------------------------------------------------------------------------------------------------

  it.effect("the dev outbox filters by recipient case-insensitively, newest first", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("outbox")
      const other = freshEmail("outbox-other")
      const first = yield* startLogin(baseUrl, email)
      yield* startLogin(baseUrl, other)
      const second = yield* startLogin(baseUrl, email)

      for (const to of [email, email.toUpperCase()]) {
        const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(to)}`))
        assert.deepStrictEqual(sortedKeys(outbox), ["messages"])
        const messages: Array<Json> = outbox.messages
        assert.deepStrictEqual(messages.map((m) => m.data.challengeId), [second.challengeId, first.challengeId])
        for (const message of messages) {
          assert.deepStrictEqual(sortedKeys(message), ["createdAt", "data", "id", "subject", "template", "text", "to"])
          assert.strictEqual(message.to, email)
          assert.strictEqual(message.template, "login_code")
          assert.deepStrictEqual(sortedKeys(message.data), ["challengeId", "code"])
          assert.include(message.text, message.data.code)
          assert.match(message.createdAt, ISO_MS)
        }
        assert.isAtLeast(Date.parse(messages[0].createdAt), Date.parse(messages[1].createdAt))
      }

      // without `to`: everyone's mail, newest first
      const everyone: Array<Json> = okData(yield* call(baseUrl, "GET", "/v1/dev/outbox")).messages
      const mine = everyone.filter((m) => m.to === email || m.to === other).map((m) => m.data.challengeId)
      assert.strictEqual(mine.length, 3)
      assert.strictEqual(mine[0], second.challengeId)
      assert.strictEqual(mine[2], first.challengeId)
      for (let i = 1; i < everyone.length; i++) {
        assert.isAtLeast(Date.parse(everyone[i - 1].createdAt), Date.parse(everyone[i].createdAt))
      }

      const typed = yield* (yield* clientFor(baseUrl)).system.outbox({ query: { to: email.toUpperCase() } })
      assert.deepStrictEqual(typed.messages.map((m) => m.data["challengeId"]), [second.challengeId, first.challengeId])
      assert.instanceOf(typed.messages[0]?.createdAt, Date)

      const nobody = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(freshEmail("none"))}`))
      assert.deepStrictEqual(nobody, { messages: [] })
    }))
})

if (process.env["DATABASE_URL"]) {
  layer(testServer("postgres"), { excludeTestServices: true })("identity over HTTP [postgres]", (it) => {
    coreFlow(it)
    concurrency(it)
  })
}
