/**
 * OAuth sign-in end to end against the full server on PGlite (spec: Authentication 3; contract §3 `OAUTH_<NAME>_*`,
 * §4 OAuth): the providers list, the 302 to the provider's consent page with PKCE and a signed state, the provider's
 * redirect back to the callback, and the session the callback issues. The provider is a real OAuth2 server on
 * loopback (`packages/server/test/support/fakeOAuthProvider.ts`); the browser's redirects are followed by hand.
 *
 * `PUBLIC_BASE_URL` is `http://app.test` (a reverse proxy's public name): the server must put it in the redirect URI,
 * and the test plays the proxy by sending the callback's path and query to the server's loopback address.
 */
import {
  LoginChallenge,
  LoginResult,
  NotFound,
  OAuthProvider,
  Organization,
  OutboxMessage,
  PreconditionFailed,
  SecurityEvent,
  Session,
  User
} from "@cp/domain"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { FakeOAuthProvider, type FakeProfile } from "../packages/server/test/support/fakeOAuthProvider.ts"
import { failed, invalidFields, ISO_MS, okData, ULID } from "./support/envelope.ts"
import { call, clientFor, TestServer, testServer } from "./support/server.ts"

const PUBLIC_BASE_URL = "http://app.test"
const CALLBACK = `${PUBLIC_BASE_URL}/v1/auth/oauth/acme/callback`
const REQUEST_ID = new RegExp(`^req_${ULID}$`)
const TOKEN = new RegExp(`^sps_ses_${ULID}\\.[0-9a-f]{64}$`)
const DAY = 24 * 60 * 60 * 1000

/**
 * The server with `acme` fully configured on the fake provider, and `half` with only a client id (must not be
 * listed), plus `globex` missing its userinfo URL.
 */
const OAuthServer = Layer.unwrap(Effect.map(FakeOAuthProvider, (fake) => {
  const { OAUTH_GLOBEX_USERINFO_URL: _, ...globex } = fake.env("GLOBEX")
  return testServer("pglite", {
    PUBLIC_BASE_URL,
    ...fake.env("ACME"),
    ...globex,
    OAUTH_HALF_CLIENT_ID: "half-client"
  })
})).pipe(Layer.provideMerge(FakeOAuthProvider.layer))

const freshEmail = (tag: string) => `${tag}-${randomBytes(5).toString("hex")}@example.test`

const sortedKeys = (value: object): Array<string> => Object.keys(value).sort()

const SecurityEvents = { securityEvents: Schema.Array(SecurityEvent) }
const Organizations = { organizations: Schema.Array(Organization) }

/** GET start: asserts the 302 to the provider's consent page and returns its URL. */
const start = (baseUrl: string, provider = "acme") =>
  Effect.gen(function*() {
    const res = yield* call(baseUrl, "GET", `/v1/auth/oauth/${provider}/start`)
    assert.strictEqual(res.status, 302, res.text)
    assert.match(res.headers.get("x-request-id") ?? "", REQUEST_ID)
    const location = res.headers.get("location")
    assert.isString(location)
    return new URL(location ?? "")
  })

/** The browser at the consent page: the provider redirects back to the callback with a code (or an error). */
const consent = (authorizeUrl: URL) =>
  Effect.gen(function*() {
    const back = yield* Effect.promise(() => fetch(authorizeUrl, { redirect: "manual" }))
    assert.strictEqual(back.status, 302)
    const callback = new URL(back.headers.get("location") ?? "")
    assert.strictEqual(`${callback.origin}${callback.pathname}`, CALLBACK)
    return `${callback.pathname}${callback.search}`
  })

/** Start, consent as `profile`, and the callback's path and query (what the proxy forwards to the server). */
const authorize = (baseUrl: string, profile: FakeProfile) =>
  Effect.gen(function*() {
    const fake = yield* FakeOAuthProvider
    fake.setProfile(profile)
    return yield* consent(yield* start(baseUrl))
  })

const assertLoginResult = (result: Schema.Struct.Encoded<typeof LoginResult>, email: string) => {
  assert.deepStrictEqual(sortedKeys(result), ["expiresAt", "token", "tokenType", "user"])
  assert.match(result.token, TOKEN)
  assert.strictEqual(result.tokenType, "bearer")
  assert.match(result.expiresAt, ISO_MS)
  const lifetime = Date.parse(result.expiresAt) - Date.now()
  assert.isAbove(lifetime, 30 * DAY - 60_000)
  assert.isAtMost(lifetime, 30 * DAY)
  assert.deepStrictEqual(sortedKeys(result.user), ["displayName", "email", "id"])
  assert.match(result.user.id, new RegExp(`^usr_${ULID}$`))
  assert.strictEqual(result.user.email, email)
}

layer(OAuthServer, { excludeTestServices: true })("OAuth sign-in over HTTP [pglite]", (it) => {
  it.effect("the providers list shows only the fully configured provider", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const data = okData(yield* call(baseUrl, "GET", "/v1/auth/oauth/providers"), {
        providers: Schema.Array(OAuthProvider)
      })
      assert.deepStrictEqual(data, { providers: [{ id: "acme", name: "Acme" }] })
      const typed = yield* (yield* clientFor(baseUrl)).identity.oauthProviders()
      assert.deepStrictEqual(typed, { providers: [{ id: "acme", name: "Acme" }] })
    }))

  it.effect("start answers 302 to the provider's authorize URL with PKCE S256 and a signed state", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const fake = yield* FakeOAuthProvider
      const res = yield* call(baseUrl, "GET", "/v1/auth/oauth/acme/start")
      assert.strictEqual(res.status, 302)
      assert.strictEqual(res.headers.get("cache-control"), "no-store")
      const url = new URL(res.headers.get("location") ?? "")
      assert.strictEqual(`${url.origin}${url.pathname}`, `${fake.baseUrl}/authorize`)
      const params = Object.fromEntries(url.searchParams)
      assert.deepStrictEqual(sortedKeys(params), [
        "client_id",
        "code_challenge",
        "code_challenge_method",
        "redirect_uri",
        "response_type",
        "scope",
        "state"
      ])
      assert.strictEqual(params["response_type"], "code")
      assert.strictEqual(params["client_id"], fake.clientId)
      assert.strictEqual(params["redirect_uri"], CALLBACK)
      assert.strictEqual(params["code_challenge_method"], "S256")
      assert.match(params["code_challenge"] ?? "", /^[A-Za-z0-9_-]{43}$/)
      assert.include(params["scope"] ?? "", "email")
      assert.isAbove((params["state"] ?? "").length, 20)
      assert.notInclude(url.toString(), fake.clientSecret)
      // every start is a new flow: new state, new verifier
      const again = (yield* start(baseUrl)).searchParams
      assert.notStrictEqual(again.get("state"), params["state"])
      assert.notStrictEqual(again.get("code_challenge"), params["code_challenge"])
    }))

  /** A first OAuth sign-in (the provider's address in another case and spacing): the callback's answer. */
  const oauthSignedIn = Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const local = `oauth-${randomBytes(4).toString("hex")}`
    const email = `${local}@example.test`
    const callback = yield* authorize(baseUrl, {
      sub: `sub-${local}`,
      email: ` ${local.toUpperCase()}@Example.TEST`,
      email_verified: true
    })
    const res = yield* call(baseUrl, "GET", callback)
    const result = okData(res, LoginResult)
    return { baseUrl, local, email, res, result }
  })

  it.effect("the callback signs in with the same login result as email login, no provider secret on the wire", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOAuthProvider
      const { email, res, result } = yield* oauthSignedIn
      assertLoginResult(result, email)
      assert.isNull(result.user.displayName)
      for (const secret of [fake.clientSecret, ...fake.issuedTokens]) assert.notInclude(res.text, secret)
    }))

  it.effect("the OAuth session's token works: its session, the Personal workspace, the security events", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOAuthProvider
      const { baseUrl, local, result } = yield* oauthSignedIn
      const session = okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token: result.token }), {
        session: Session,
        user: User
      })
      assert.deepStrictEqual(session.user, { ...result.user, lastOrgSlug: local })
      assert.strictEqual(session.session.expiresAt, result.expiresAt)
      const orgs = okData(yield* call(baseUrl, "GET", "/v1/organizations", { token: result.token }), Organizations)
        .organizations
      assert.deepStrictEqual(orgs.map((org) => [org.name, org.slug]), [["Personal", local]])

      const events = okData(
        yield* call(baseUrl, "GET", "/v1/auth/security-events", { token: result.token }),
        SecurityEvents
      ).securityEvents
      const signedIn = events.find((event) => event.eventType === "login.succeeded")
      assert.deepStrictEqual(signedIn?.metadata, { via: "oauth:acme" })
      assert.isTrue(events.some((event) => event.eventType === "session.created"))
      for (const secret of [fake.clientSecret, ...fake.issuedTokens]) assert.notInclude(JSON.stringify(events), secret)
    }))

  /** The same provider account signed in a second time: both login results. */
  const twiceSignedIn = Effect.gen(function*() {
    const first = yield* oauthSignedIn
    const { baseUrl, email, local } = first
    const second = okData(
      yield* call(baseUrl, "GET", yield* authorize(baseUrl, { sub: `sub-${local}`, email, email_verified: true })),
      LoginResult
    )
    return { ...first, second }
  })

  it.effect("signing in again with the same provider account is the same user, without a second workspace", () =>
    Effect.gen(function*() {
      const { baseUrl, result, second } = yield* twiceSignedIn
      assert.deepStrictEqual(second.user, result.user)
      assert.notStrictEqual(second.token, result.token)
      const after = okData(yield* call(baseUrl, "GET", "/v1/organizations", { token: second.token }), Organizations)
        .organizations
      assert.strictEqual(after.length, 1)
    }))

  it.effect("logout ends an OAuth session like any other, and only that one", () =>
    Effect.gen(function*() {
      const { baseUrl, result, second } = yield* twiceSignedIn
      okData(yield* call(baseUrl, "POST", "/v1/auth/logout", { token: result.token }), {
        success: Schema.Literal(true)
      })
      failed(yield* call(baseUrl, "GET", "/v1/auth/session", { token: result.token }), 401, "unauthenticated")
      okData(yield* call(baseUrl, "GET", "/v1/auth/session", { token: second.token }), { session: Session, user: User })
    }))

  it.effect("a verified email of an existing email-login user links to that user", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("linked")
      const started = okData(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), LoginChallenge)
      const outbox = okData(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`), {
        messages: Schema.Array(OutboxMessage)
      })
      const code = outbox.messages[0]?.data["code"]
      const byEmail = okData(
        yield* call(baseUrl, "POST", "/v1/auth/login/complete", { body: { challengeId: started.challengeId, code } }),
        LoginResult
      )
      const callback = yield* authorize(baseUrl, { sub: `sub-${email}`, email, email_verified: true })
      const byOAuth = okData(yield* call(baseUrl, "GET", callback), LoginResult)
      assertLoginResult(byOAuth, email)
      assert.deepStrictEqual(byOAuth.user, byEmail.user)
    }))

  it.effect("the typed client completes a callback and decodes the login result", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("typed")
      const callback = new URL(yield* authorize(baseUrl, { sub: `sub-${email}`, email, email_verified: true }), baseUrl)
      const client = yield* clientFor(baseUrl)
      const query = {
        state: callback.searchParams.get("state") ?? "",
        code: callback.searchParams.get("code") ?? ""
      }
      const result = yield* client.identity.oauthCallback({ params: { provider: "acme" }, query })
      assert.strictEqual(result.tokenType, "bearer")
      assert.match(result.token, TOKEN)
      assert.instanceOf(result.expiresAt, Date)
      assert.strictEqual(result.user.email, email)
      const reused = yield* Effect.flip(client.identity.oauthCallback({ params: { provider: "acme" }, query }))
      assert.instanceOf(reused, PreconditionFailed)
      const unknown = yield* Effect.flip(client.identity.oauthCallback({ params: { provider: "nope" }, query }))
      assert.instanceOf(unknown, NotFound)
    }))

  it.effect("an unverified or missing provider email is 412 and signs nobody in", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("unverified")
      const profiles: ReadonlyArray<FakeProfile> = [
        { sub: `sub-${email}`, email, email_verified: false },
        { sub: `sub-${email}`, email, email_verified: "true" },
        { sub: `sub-${email}`, email },
        { sub: `sub-${email}`, email_verified: true }
      ]
      for (const profile of profiles) {
        const error = failed(
          yield* call(baseUrl, "GET", yield* authorize(baseUrl, profile)),
          412,
          "precondition_failed"
        )
        assert.deepStrictEqual(error.details, { reason: "email_not_verified" })
      }
      // no account was created or linked: a later verified sign-in for that provider account is a first sign-in
      const result = okData(
        yield* call(baseUrl, "GET", yield* authorize(baseUrl, { sub: `sub-${email}`, email, email_verified: true })),
        LoginResult
      )
      const events = okData(
        yield* call(baseUrl, "GET", "/v1/auth/security-events", { token: result.token }),
        SecurityEvents
      ).securityEvents
      assert.deepStrictEqual(
        events.map((event) => event.eventType).sort(),
        ["login.succeeded", "session.created"]
      )
    }))

  it.effect("a state works once: replaying the callback is 412", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const email = freshEmail("replay")
      const callback = yield* authorize(baseUrl, { sub: `sub-${email}`, email, email_verified: true })
      okData(yield* call(baseUrl, "GET", callback), LoginResult)
      const error = failed(yield* call(baseUrl, "GET", callback), 412, "precondition_failed")
      assert.deepStrictEqual(error.details, { reason: "invalid_state" })

      // a forged state is refused the same way
      const url = new URL(callback, baseUrl)
      url.searchParams.set("state", `${url.searchParams.get("state")}x`)
      failed(yield* call(baseUrl, "GET", `${url.pathname}${url.search}`), 412, "precondition_failed")
      url.searchParams.set("state", "garbage")
      failed(yield* call(baseUrl, "GET", `${url.pathname}${url.search}`), 412, "precondition_failed")
    }))

  it.effect("a consent the user refused at the provider is 412 and spends the state", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const fake = yield* FakeOAuthProvider
      fake.denyNext()
      const callback = yield* consent(yield* start(baseUrl))
      assert.include(callback, "error=access_denied")
      const error = failed(yield* call(baseUrl, "GET", callback), 412, "precondition_failed")
      assert.deepStrictEqual(error.details, { reason: "provider_error" })
      const again = failed(yield* call(baseUrl, "GET", callback), 412, "precondition_failed")
      assert.deepStrictEqual(again.details, { reason: "invalid_state" })
    }))

  it.effect("an unknown or incompletely configured provider is 404 on start and callback", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      for (const provider of ["nope", "half", "globex", "NOT-VALID!", "x".repeat(40)]) {
        const path = encodeURIComponent(provider)
        failed(yield* call(baseUrl, "GET", `/v1/auth/oauth/${path}/start`), 404, "not_found")
        failed(yield* call(baseUrl, "GET", `/v1/auth/oauth/${path}/callback?state=s&code=c`), 404, "not_found")
      }
      // a callback without its state is a validation failure of the query
      const missing = invalidFields(yield* call(baseUrl, "GET", "/v1/auth/oauth/acme/callback?code=c"))
      assert.isArray(missing["state"])
    }))
})
