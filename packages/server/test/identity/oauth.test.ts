/**
 * OAuth sign-in through the service against a real provider on loopback: the browser's redirects are followed
 * by hand (start → provider consent → callback). IdentityService is a small recording stand-in over the memory
 * users table; the HTTP end-to-end version runs against the full server.
 */
import { type LoginResult, NotFound, PreconditionFailed, type UserId } from "@cp/domain"
import { OAuthRepo, Transactor, UsersRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Context, Effect, Exit, Layer, Logger, Option } from "effect"
import type { HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { createSecretKey } from "node:crypto"
import {
  OAUTH_STATE_TTL_MS,
  type OAuthCallbackQuery,
  type OAuthRefusal,
  OAuthService
} from "../../src/identity/oauth.ts"
import { IdentityService, normalizeEmail } from "../../src/identity/service.ts"
import { AppConfig } from "../../src/platform/config.ts"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { FakeOAuthProvider, type FakeProfile } from "../support/fakeOAuthProvider.ts"

const PUBLIC_BASE_URL = "http://app.test"

/** Every `signInVerifiedEmail` call the service made. */
class SignIns extends Context.Service<SignIns, {
  readonly calls: Array<{ readonly email: string; readonly via: string }>
}>()("test/SignIns") {
  static readonly layer = Layer.sync(SignIns, () => ({ calls: [] }))
}

/** Log lines (JSON, annotations included), kept instead of printed. */
class CapturedLogs extends Context.Service<CapturedLogs, { readonly lines: Array<string> }>()("test/CapturedLogs") {
  static readonly layer = Layer.unwrap(Effect.sync(() => {
    const lines: Array<string> = []
    return Layer.merge(
      Layer.succeed(CapturedLogs)({ lines }),
      Logger.layer([Logger.map(Logger.formatJson, (line) => void lines.push(line))])
    )
  }))
}

/** Signs in by email like the real service (find or create the user), and records the call. */
const RecordingIdentity = Layer.effect(
  IdentityService,
  Effect.gen(function*() {
    const users = yield* UsersRepo
    const signIns = yield* SignIns
    const unused = () => Effect.die(new Error("not used by the OAuth tests"))
    return IdentityService.of({
      loginStart: unused,
      loginComplete: unused,
      session: unused,
      logout: unused,
      profile: unused,
      updateProfile: unused,
      securityEvents: unused,
      signInVerifiedEmail: Effect.fnUntraced(function*(rawEmail: string, via: string) {
        const email = normalizeEmail(rawEmail)
        signIns.calls.push({ email, via })
        const now = yield* Clock.currentTimeMillis
        const existing = yield* users.findByEmail(email)
        const user = Option.isSome(existing) ? existing.value : yield* insertUser(users, email, now)
        return {
          token: `test-session-${signIns.calls.length}`,
          tokenType: "bearer" as const,
          expiresAt: new Date(now + 60_000),
          user: { id: user.id, email: user.email, displayName: user.displayName }
        }
      })
    })
  })
)

const insertUser = (users: UsersRepo["Service"], email: string, now: number) => {
  const row = {
    id: mint.user(now),
    email,
    displayName: null,
    lastOrgSlug: null,
    emailVerified: true,
    createdAt: new Date(now),
    updatedAt: new Date(now)
  }
  return Effect.as(Effect.orDie(users.insert(row)), row)
}

const TestKeys = Layer.succeed(ServerKeys)({
  signingKey: createSecretKey(Buffer.from("oauth-test-signing-key")),
  kek: { id: "test", key: new Uint8Array(32) },
  previousKeks: []
})

/** `acme` and `globex` on the fake provider, `dead` on a closed port, `half` missing its secret and URLs. */
const TestConfig = Layer.unwrap(Effect.map(FakeOAuthProvider, (fake) =>
  AppConfig.layerFromEnv({
    APP_ENV: "test",
    PUBLIC_BASE_URL,
    ...fake.env("ACME"),
    ...fake.env("GLOBEX"),
    OAUTH_DEAD_CLIENT_ID: "dead",
    OAUTH_DEAD_CLIENT_SECRET: "dead-secret",
    OAUTH_DEAD_AUTHORIZE_URL: "http://127.0.0.1:1/authorize",
    OAUTH_DEAD_TOKEN_URL: "http://127.0.0.1:1/token",
    OAUTH_DEAD_USERINFO_URL: "http://127.0.0.1:1/userinfo",
    OAUTH_HALF_CLIENT_ID: "half-client"
  })))

const TestEnv = OAuthService.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(RecordingIdentity, TestKeys, TestConfig)),
  Layer.provideMerge(Layer.mergeAll(UsersRepo.memory, OAuthRepo.memory, Transactor.memory, SignIns.layer)),
  Layer.provideMerge(Layer.merge(FakeOAuthProvider.layer, CapturedLogs.layer))
)

const header = (response: HttpServerResponse.HttpServerResponse, name: string) => {
  const value = response.headers[name]
  assert.isDefined(value, `response header ${name}`)
  return value ?? ""
}

/** Follows the start redirect to the provider, which redirects back; returns the callback's query. */
const authorize = (response: HttpServerResponse.HttpServerResponse, provider = "acme") =>
  Effect.gen(function*() {
    const back = yield* Effect.promise(() => fetch(header(response, "location"), { redirect: "manual" }))
    assert.strictEqual(back.status, 302)
    const callback = new URL(back.headers.get("location") ?? "")
    const expected = `${PUBLIC_BASE_URL}/v1/auth/oauth/${provider}/callback`
    assert.strictEqual(`${callback.origin}${callback.pathname}`, expected)
    const param = (name: string) => Option.fromNullishOr(callback.searchParams.get(name))
    const code = param("code")
    const error = param("error")
    const query: OAuthCallbackQuery = {
      state: callback.searchParams.get("state") ?? "",
      ...(Option.isSome(code) ? { code: code.value } : {}),
      ...(Option.isSome(error) ? { error: error.value } : {})
    }
    return query
  })

/** One browser round trip: start, consent as `profile`, and the query the callback receives. */
const consent = (profile: FakeProfile, provider = "acme") =>
  Effect.gen(function*() {
    const fake = yield* FakeOAuthProvider
    const oauth = yield* OAuthService
    fake.setProfile(profile)
    return yield* authorize(yield* oauth.start(provider), provider)
  })

const signIn = (profile: FakeProfile, provider = "acme") =>
  Effect.flatMap(
    consent(profile, provider),
    (query) => Effect.flatMap(OAuthService, (oauth) => oauth.callback(provider, query))
  )

/** Asserts a PreconditionFailed with the given `details.reason`. */
const assertRefused = (error: NotFound | PreconditionFailed, reason: OAuthRefusal) => {
  assert.instanceOf(error, PreconditionFailed)
  assert.deepStrictEqual(error.error.details, { reason })
}

const linkedUser = (provider: string, subject: string) =>
  Effect.map(
    Effect.flatMap(OAuthRepo, (repo) => repo.findIdentity({ provider, subject })),
    Option.map((identity) => identity.userId)
  )

const ada: FakeProfile = { sub: "ada-1", email: "Ada@Example.test", email_verified: true, name: "Ada" }

const assertSignedIn = (result: LoginResult, email: string, userId?: UserId) => {
  assert.strictEqual(result.tokenType, "bearer")
  assert.strictEqual(result.user.email, email)
  if (userId !== undefined) assert.strictEqual(result.user.id, userId)
}

describe("OAuthService", () => {
  it.effect("lists only the fully configured providers", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      assert.deepStrictEqual(oauth.providers, [
        { id: "acme", name: "Acme" },
        { id: "dead", name: "Dead" },
        { id: "globex", name: "Globex" }
      ])
    }).pipe(Effect.provide(TestEnv)))

  it.effect("start redirects to the consent page with a PKCE S256 challenge and a signed state", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      const fake = yield* FakeOAuthProvider
      const first = yield* oauth.start("acme")
      const second = yield* oauth.start("acme")
      assert.strictEqual(first.status, 302)
      assert.strictEqual(header(first, "cache-control"), "no-store")
      const url = new URL(header(first, "location"))
      assert.strictEqual(`${url.origin}${url.pathname}`, `${fake.baseUrl}/authorize`)
      const params = Object.fromEntries(url.searchParams)
      assert.deepStrictEqual(Object.keys(params).sort(), [
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
      assert.strictEqual(params["redirect_uri"], `${PUBLIC_BASE_URL}/v1/auth/oauth/acme/callback`)
      assert.strictEqual(params["scope"], "openid email profile")
      assert.strictEqual(params["code_challenge_method"], "S256")
      assert.match(params["code_challenge"] ?? "", /^[A-Za-z0-9_-]{43}$/)
      const other = new URL(header(second, "location")).searchParams
      assert.notStrictEqual(other.get("state"), params["state"])
      assert.notStrictEqual(other.get("code_challenge"), params["code_challenge"])
      assert.notInclude(url.toString(), fake.clientSecret)
    }).pipe(Effect.provide(TestEnv)))

  it.effect("signs in the owner of a verified email, creating the user and linking the provider account", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOAuthProvider
      const result = yield* signIn(ada)
      assertSignedIn(result, "ada@example.test")
      assert.deepStrictEqual((yield* SignIns).calls, [{ email: "ada@example.test", via: "oauth:acme" }])
      assert.deepStrictEqual(yield* linkedUser("acme", "ada-1"), Option.some(result.user.id))
      assert.deepStrictEqual(fake.refusals, [])
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a verified email of an existing user links to that user", () =>
    Effect.gen(function*() {
      const users = yield* UsersRepo
      const existing = yield* insertUser(users, "ada@example.test", 0)
      assertSignedIn(yield* signIn(ada), "ada@example.test", existing.id)
      assert.deepStrictEqual(yield* linkedUser("acme", "ada-1"), Option.some(existing.id))
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a linked provider account signs in its user even after its email changed at the provider", () =>
    Effect.gen(function*() {
      const first = yield* signIn(ada)
      const again = yield* signIn({ ...ada, email: "ada@elsewhere.test" })
      assertSignedIn(again, "ada@example.test", first.user.id)
      assert.deepStrictEqual((yield* SignIns).calls.map((call) => call.email), ["ada@example.test", "ada@example.test"])
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a state works once: replaying the callback is refused", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      const query = yield* consent(ada)
      yield* oauth.callback("acme", query)
      assertRefused(yield* Effect.flip(oauth.callback("acme", query)), "invalid_state")
      assert.strictEqual((yield* SignIns).calls.length, 1)
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a forged or foreign state is refused before it is looked up", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      const query = yield* consent(ada)
      const [body, signature] = query.state.split(".")
      const flipped = `${signature?.startsWith("A") ? "B" : "A"}${signature?.slice(1)}`
      for (const state of [`${body}.${flipped}`, "not-a-state", `${Buffer.from("{}").toString("base64url")}.x`]) {
        assertRefused(yield* Effect.flip(oauth.callback("acme", { ...query, state })), "invalid_state")
      }
      // The same provider server behind another configured provider: the state is bound to `acme`.
      assertRefused(yield* Effect.flip(oauth.callback("globex", query)), "invalid_state")
      // None of that spent the genuine state.
      assertSignedIn(yield* oauth.callback("acme", query), "ada@example.test")
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a state expires after ten minutes", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      const query = yield* consent(ada)
      yield* TestClock.adjust(OAUTH_STATE_TTL_MS)
      assertRefused(yield* Effect.flip(oauth.callback("acme", query)), "invalid_state")
      assert.deepStrictEqual((yield* SignIns).calls, [])
    }).pipe(Effect.provide(TestEnv)))

  it.effect("an unverified or missing email can neither create nor attach to an account", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOAuthProvider
      const logs = yield* CapturedLogs
      const users = yield* UsersRepo
      yield* insertUser(users, "ada@example.test", 0)
      const profiles: ReadonlyArray<FakeProfile> = [
        { ...ada, email_verified: false },
        { ...ada, email_verified: "true" },
        { sub: "ada-1", email: "ada@example.test" },
        { sub: "ada-1", email_verified: true },
        { sub: "ada-1", email: null, email_verified: true },
        { sub: "ada-1", email: "not an address", email_verified: true }
      ]
      const errors: Array<NotFound | PreconditionFailed> = []
      for (const profile of profiles) {
        const error = yield* Effect.flip(signIn(profile))
        assertRefused(error, "email_not_verified")
        errors.push(error)
      }
      assert.deepStrictEqual((yield* SignIns).calls, [])
      assert.deepStrictEqual(yield* linkedUser("acme", "ada-1"), Option.none())
      // The code was exchanged each time; no access token or secret surfaces in an error or a log line.
      assert.strictEqual(fake.issuedTokens.length, profiles.length)
      const exposed = [JSON.stringify(errors), ...logs.lines].join("\n")
      for (const secret of [fake.clientSecret, ...fake.issuedTokens]) assert.notInclude(exposed, secret)
    }).pipe(Effect.provide(TestEnv)))

  it.effect("an error from the provider is a provider_error, and it spends the state", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOAuthProvider
      const oauth = yield* OAuthService
      fake.denyNext()
      const query = yield* consent(ada)
      assert.strictEqual(query.error, "access_denied")
      assert.isUndefined(query.code)
      assertRefused(yield* Effect.flip(oauth.callback("acme", query)), "provider_error")
      assertRefused(yield* Effect.flip(oauth.callback("acme", query)), "invalid_state")
      assert.deepStrictEqual((yield* SignIns).calls, [])
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a code redeemed with another flow's verifier fails PKCE: provider_error, nothing leaked", () =>
    Effect.gen(function*() {
      const fake = yield* FakeOAuthProvider
      const oauth = yield* OAuthService
      const logs = yield* CapturedLogs
      const mine = yield* consent(ada)
      const theirs = yield* consent({ ...ada, sub: "eve-1", email: "eve@example.test" })
      assert.isDefined(theirs.code)
      const stolen = theirs.code ?? ""
      const error = yield* Effect.flip(oauth.callback("acme", { ...mine, code: stolen }))
      assertRefused(error, "provider_error")
      assert.deepStrictEqual(fake.refusals, ["code_verifier does not match the code_challenge"])
      assert.deepStrictEqual((yield* SignIns).calls, [])
      const exposed = [JSON.stringify(error), error.error.message, ...logs.lines].join("\n")
      assert.notInclude(exposed, fake.clientSecret)
      assert.notInclude(exposed, stolen)
      const logged = logs.lines.filter((line) => line.includes("provider request failed"))
      assert.strictEqual(logged.length, 1)
      assert.include(logged[0], "StatusCodeError")
    }).pipe(Effect.provide(TestEnv)))

  it.effect("an unreachable provider is a provider_error, not a defect", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      const location = new URL(header(yield* oauth.start("dead"), "location"))
      const state = location.searchParams.get("state") ?? ""
      assertRefused(yield* Effect.flip(oauth.callback("dead", { state, code: "some-code" })), "provider_error")
    }).pipe(Effect.provide(TestEnv)))

  it.effect("an unknown or half-configured provider is NotFound on start and callback", () =>
    Effect.gen(function*() {
      const oauth = yield* OAuthService
      for (const provider of ["nope", "half"]) {
        assert.instanceOf(yield* Effect.flip(oauth.start(provider)), NotFound)
        assert.instanceOf(yield* Effect.flip(oauth.callback(provider, { state: "x", code: "y" })), NotFound)
      }
    }).pipe(Effect.provide(TestEnv)))

  it.effect("a provider URL that is not absolute http(s) stops start-up with a clear message", () =>
    Effect.gen(function*() {
      const misconfigured = OAuthService.layer.pipe(
        Layer.provide(AppConfig.layerFromEnv({
          APP_ENV: "test",
          OAUTH_ODD_CLIENT_ID: "odd",
          OAUTH_ODD_CLIENT_SECRET: "odd-secret",
          OAUTH_ODD_AUTHORIZE_URL: "https://odd.example/authorize",
          OAUTH_ODD_TOKEN_URL: "/token",
          OAUTH_ODD_USERINFO_URL: "https://odd.example/userinfo"
        })),
        Layer.provide(Layer.mergeAll(RecordingIdentity, TestKeys)),
        Layer.provide(Layer.mergeAll(UsersRepo.memory, OAuthRepo.memory, Transactor.memory, SignIns.layer))
      )
      const exit = yield* Effect.exit(Layer.build(misconfigured))
      const message = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "built"
      assert.include(message, "OAUTH_ODD_TOKEN_URL must be an absolute http(s) URL")
    }))
})
