/**
 * OAuth2/OIDC sign-in (spec: Authentication rule 3; contract §3 `OAUTH_<NAME>_*`, §4 OAuth): one generic adapter
 * per configured provider. Start stores a single-use state with its PKCE verifier and redirects to the consent
 * page; the callback consumes the state, exchanges the code, reads the userinfo and signs in the owner of the
 * verified email, linking `(provider, sub)` to that user.
 */
import { Email, type LoginResult, NotFound, PreconditionFailed, wireError } from "@cp/domain"
import { OAuthRepo, Transactor, UsersRepo } from "@cp/persistence"
import { Cause, Clock, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import {
  FetchHttpClient,
  HttpClient,
  type HttpClientError,
  HttpClientRequest,
  HttpClientResponse,
  HttpServerResponse
} from "effect/http"
import { createHash } from "node:crypto"
import { AppConfig, type OAuthProviderConfig } from "../platform/config.ts"
import { randomBase64Url, signToken, verifyToken } from "../platform/crypto.ts"
import { ServerKeys } from "../platform/keys.ts"
import { IdentityService } from "./service.ts"

/** How long a started sign-in may take to come back through the callback. */
export const OAUTH_STATE_TTL_MS = 10 * 60 * 1000

const PROVIDER_TIMEOUT = "10 seconds"
const STATE_PURPOSE = "oauth_state"
const SCOPE = "openid email profile"

/** What the provider redirects back with (the `oauthCallback` query). */
export interface OAuthCallbackQuery {
  readonly code?: string
  readonly state: string
  readonly error?: string
}

/** The `details.reason` of a refused callback (412 `precondition_failed`). */
export type OAuthRefusal = "invalid_state" | "provider_error" | "email_not_verified"

const refuse = (reason: OAuthRefusal, message: string) => wireError(PreconditionFailed, message, { reason })

const invalidState = () => refuse("invalid_state", "The sign-in state is invalid, expired or already used; start again")
const providerError = () => refuse("provider_error", "The sign-in provider did not complete the sign-in")

/** The signed `state` value: the state row's id, bound to one provider. */
const StatePayload = Schema.Struct({ id: Schema.String, provider: Schema.String })
const decodeStatePayload = Schema.decodeUnknownOption(StatePayload)

const TokenResponse = Schema.Struct({ access_token: Schema.String.check(Schema.isMinLength(1)) })

/** The OIDC userinfo claims the adapter reads; `email_verified` counts only when it is literally `true`. */
const UserInfo = Schema.Struct({
  sub: Schema.String.check(Schema.isMinLength(1)),
  email: Schema.optionalKey(Schema.NullOr(Schema.String)),
  email_verified: Schema.optionalKey(Schema.Unknown)
})
type UserInfo = typeof UserInfo.Type

const isEmail = Schema.is(Email)

/** base64url(SHA-256(verifier)): the S256 code challenge of RFC 7636 §4.2. */
const pkceChallenge = (verifier: string): string => createHash("sha256").update(verifier).digest("base64url")

/** A provider fault, described for the log without any token, secret or response body. */
const describeFailure = (error: HttpClientError.HttpClientError | Schema.SchemaError | Cause.TimeoutError) =>
  Cause.isTimeoutError(error)
    ? { failure: "timeout" }
    : Schema.isSchemaError(error)
    ? { failure: "unexpected_response_body" }
    : { failure: error.reason._tag, status: error.response?.status ?? null }

/** A provider URL must be absolute http(s); anything else is an operator mistake caught at start-up. */
const checkUrls = (provider: OAuthProviderConfig) =>
  Effect.forEach(
    [
      ["AUTHORIZE_URL", provider.authorizeUrl],
      ["TOKEN_URL", provider.tokenUrl],
      ["USERINFO_URL", provider.userinfoUrl]
    ] as const,
    ([name, value]) => {
      const url = URL.parse(value)
      return url !== null && (url.protocol === "https:" || url.protocol === "http:")
        ? Effect.void
        : Effect.die(new Error(`OAUTH_${provider.id.toUpperCase()}_${name} must be an absolute http(s) URL`))
    },
    { discard: true }
  )

export class OAuthService extends Context.Service<OAuthService, {
  /** The fully configured providers, for the sign-in page. */
  readonly providers: ReadonlyArray<{ readonly id: string; readonly name: string }>
  /** Opens a redirect flow: stores its state and PKCE verifier, then 302 to the provider's consent page. */
  readonly start: (provider: string) => Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
  /** Completes a flow: consumes the state, exchanges the code and signs in the owner of the verified email. */
  readonly callback: (
    provider: string,
    query: OAuthCallbackQuery
  ) => Effect.Effect<LoginResult, NotFound | PreconditionFailed>
}>()("@cp/server/OAuthService") {
  /** The adapter over `fetch`; needs the config, keys, OAuth and user repositories, and the identity service. */
  static readonly layer = Layer.effect(
    OAuthService,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const keys = yield* ServerKeys
      const states = yield* OAuthRepo
      const users = yield* UsersRepo
      const tx = yield* Transactor
      const identity = yield* IdentityService
      const http = (yield* HttpClient.HttpClient).pipe(
        HttpClient.mapRequest(HttpClientRequest.acceptJson),
        HttpClient.filterStatusOk
      )
      yield* Effect.forEach(config.oauthProviders, checkUrls, { discard: true })
      const byId = new Map(config.oauthProviders.map((provider) => [provider.id, provider]))

      const configured = (id: string) =>
        Option.match(Option.fromUndefinedOr(byId.get(id)), {
          onNone: () => Effect.fail(wireError(NotFound, "Unknown sign-in provider")),
          onSome: Effect.succeed
        })

      const redirectUri = (provider: OAuthProviderConfig) =>
        `${config.publicBaseUrl}/v1/auth/oauth/${provider.id}/callback`

      /** Checks the signature before any lookup, then spends the state: it works once, within its lifetime. */
      const consumeState = Effect.fnUntraced(function*(provider: OAuthProviderConfig, token: string) {
        const payload = decodeStatePayload(verifyToken(keys.signingKey, STATE_PURPOSE, token))
        if (Option.isNone(payload) || payload.value.provider !== provider.id) return yield* invalidState()
        const now = yield* Clock.currentTimeMillis
        const row = yield* states.consumeState({ id: payload.value.id, now: new Date(now) })
        if (Option.isNone(row) || row.value.provider !== provider.id) return yield* invalidState()
        return row.value
      })

      /** One provider round trip; every fault becomes `provider_error`, logged without secrets. */
      const providerCall =
        <A>(provider: OAuthProviderConfig, stage: "token" | "userinfo", schema: Schema.Decoder<A>) =>
        (request: HttpClientRequest.HttpClientRequest): Effect.Effect<A, PreconditionFailed> =>
          http.execute(request).pipe(
            Effect.flatMap(HttpClientResponse.schemaBodyJson(schema)),
            Effect.timeout(PROVIDER_TIMEOUT),
            Effect.catch((error) =>
              Effect.logWarning("OAuth provider request failed").pipe(
                Effect.annotateLogs({ provider: provider.id, stage, ...describeFailure(error) }),
                Effect.andThen(Effect.fail(providerError()))
              )
            )
          )

      /** Exchanges the code (client_secret_post, with the PKCE verifier) and reads the userinfo. */
      const fetchUserInfo = Effect.fnUntraced(function*(
        provider: OAuthProviderConfig,
        code: string,
        codeVerifier: string
      ) {
        const token = yield* HttpClientRequest.post(provider.tokenUrl).pipe(
          HttpClientRequest.bodyUrlParams({
            grant_type: "authorization_code",
            code,
            redirect_uri: redirectUri(provider),
            code_verifier: codeVerifier,
            client_id: provider.clientId,
            client_secret: Redacted.value(provider.clientSecret)
          }),
          providerCall(provider, "token", TokenResponse)
        )
        return yield* HttpClientRequest.get(provider.userinfoUrl).pipe(
          HttpClientRequest.bearerToken(token.access_token),
          providerCall(provider, "userinfo", UserInfo)
        )
      })

      /** The verified address of a userinfo answer, or None when it cannot attach to or create an account. */
      const verifiedEmail = (info: UserInfo): Option.Option<string> => {
        const email = info.email?.trim()
        return info.email_verified === true && email !== undefined && isEmail(email)
          ? Option.some(email)
          : Option.none()
      }

      /** A linked identity signs in its user; otherwise the email's owner (new or existing) is signed in and linked. */
      const signIn = Effect.fnUntraced(function*(provider: OAuthProviderConfig, subject: string, email: string) {
        const via = `oauth:${provider.id}`
        const linked = yield* states.findIdentity({ provider: provider.id, subject })
        if (Option.isSome(linked)) {
          const user = yield* users.findById(linked.value.userId)
          if (Option.isNone(user)) {
            return yield* Effect.die(new Error(`OAuth identity links missing user ${linked.value.userId}`))
          }
          return yield* identity.signInVerifiedEmail(user.value.email, via)
        }
        return yield* tx.withTransaction(Effect.gen(function*() {
          const result = yield* identity.signInVerifiedEmail(email, via)
          const now = yield* Clock.currentTimeMillis
          // A concurrent callback for the same account linked it first (to the same email's owner): keep that link.
          yield* tx.withTransaction(states.linkIdentity({
            provider: provider.id,
            subject,
            userId: result.user.id,
            email: result.user.email,
            createdAt: new Date(now)
          })).pipe(Effect.catchTag("UniqueViolation", () => Effect.void))
          return result
        }))
      })

      return OAuthService.of({
        providers: config.oauthProviders.map(({ id, name }) => ({ id, name })),

        start: Effect.fn("OAuth.start")(function*(providerId) {
          const provider = yield* configured(providerId)
          const now = yield* Clock.currentTimeMillis
          const id = randomBase64Url(32)
          const codeVerifier = randomBase64Url(32)
          yield* states.insertState({
            id,
            provider: provider.id,
            codeVerifier,
            redirectAfter: null,
            expiresAt: new Date(now + OAUTH_STATE_TTL_MS),
            consumedAt: null,
            createdAt: new Date(now)
          }).pipe(Effect.orDie)
          const location = new URL(provider.authorizeUrl)
          const params = {
            response_type: "code",
            client_id: provider.clientId,
            redirect_uri: redirectUri(provider),
            scope: SCOPE,
            state: signToken(keys.signingKey, STATE_PURPOSE, { id, provider: provider.id }),
            code_challenge: pkceChallenge(codeVerifier),
            code_challenge_method: "S256"
          }
          for (const [name, value] of Object.entries(params)) location.searchParams.set(name, value)
          return HttpServerResponse.redirect(location, { headers: { "cache-control": "no-store" } })
        }),

        callback: Effect.fn("OAuth.callback")(function*(providerId, query) {
          const provider = yield* configured(providerId)
          const state = yield* consumeState(provider, query.state)
          if (query.error !== undefined) {
            yield* Effect.logWarning("OAuth provider refused the sign-in").pipe(
              Effect.annotateLogs({
                provider: provider.id,
                stage: "authorize",
                providerError: query.error.slice(0, 64)
              })
            )
            return yield* providerError()
          }
          if (query.code === undefined) return yield* providerError()
          const info = yield* fetchUserInfo(provider, query.code, state.codeVerifier)
          const email = verifiedEmail(info)
          if (Option.isNone(email)) {
            return yield* refuse("email_not_verified", "The provider account has no verified email address")
          }
          return yield* signIn(provider, info.sub, email.value)
        })
      })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}
