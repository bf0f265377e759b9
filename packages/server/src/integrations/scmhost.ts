/**
 * The source-control provider's client (integrations-agents.md §1): the GitHub REST subset the server speaks to
 * `SCMHOST_API_URL`, as the app (a JWT, RS256 with `jose`: `iss` the app id, `iat` 60 s in the past, `exp` 9 minutes
 * ahead) and as an installation (an installation token). In development and test, with `SCMHOST_API_URL` unset, it
 * speaks to this server's own simulator under `/dev/scmhost` with a dev app key pair kept in the database. Tokens
 * travel only in request headers and answers; nothing here logs a header, a token or a response body.
 */
import { ProviderUnavailable, wireError } from "@cp/domain"
import { ServerSecretsRepo } from "@cp/persistence"
import { Clock, Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { importPKCS8, SignJWT } from "jose"
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import { AppConfig } from "../platform/config.ts"
import { selfUrls } from "../platform/selfUrl.ts"

/** The simulator's app: its id and slug, fixed; its key pair generated once per database. */
export const DEV_APP_ID = "1001"
export const DEV_APP_SLUG = "cp-dev-app"
const DEV_KEY_NAME = "scmhost_dev_app_private_key"

/** The dev app's private key (PKCS#8 PEM), generated once and kept in the database like the dev KEK. */
export const devAppPrivateKey = Effect.gen(function*() {
  const secrets = yield* ServerSecretsRepo
  return yield* secrets.getOrCreate(DEV_KEY_NAME, () =>
    generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs8", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" }
    }).privateKey)
})

/** The public half, with which the simulator verifies app JWTs. */
export const publicKeyOf = (privatePem: string): KeyObject => createPublicKey(createPrivateKey(privatePem))

export const Account = Schema.Struct({ id: Schema.Number, login: Schema.String, type: Schema.String })
export const Installation = Schema.Struct({
  id: Schema.Number,
  account: Account,
  permissions: Schema.Record(Schema.String, Schema.String),
  repository_selection: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Installation = typeof Installation.Type

export const ProviderRepository = Schema.Struct({
  id: Schema.Number,
  full_name: Schema.String,
  default_branch: Schema.String,
  private: Schema.Boolean,
  owner: Account
})
export type ProviderRepository = typeof ProviderRepository.Type

const AccessToken = Schema.Struct({
  token: Schema.String,
  expires_at: Schema.String,
  permissions: Schema.Record(Schema.String, Schema.String),
  repositories: Schema.optionalKey(Schema.Array(ProviderRepository))
})
export type AccessToken = typeof AccessToken.Type

const RepositoryPage = Schema.Struct({ total_count: Schema.Number, repositories: Schema.Array(ProviderRepository) })

/** The answer to an access-token request the provider refused (GitHub: 422 for a permission it does not hold). */
export interface TokenRefused {
  readonly _tag: "TokenRefused"
  readonly status: number
}

const unavailable = (reason: string) =>
  wireError(ProviderUnavailable, "The source-control provider could not be reached or failed", {
    provider: "scmhost",
    reason
  })

const PER_PAGE = 100
const MAX_PAGES = 50

export class ScmhostClient extends Context.Service<ScmhostClient, {
  /** Whether the app is configured (always, in development and test: the simulator). */
  readonly configured: boolean
  /** The install page for a signed state. */
  readonly installUrl: (state: string) => Effect.Effect<string>
  /** The installation, or None when the provider does not know it (404). */
  readonly installation: (installationId: string) => Effect.Effect<Option.Option<Installation>, ProviderUnavailable>
  /** An installation token, narrowed to `repositoryIds` and `permissions` when given; refused answers as such. */
  readonly accessToken: (
    installationId: string,
    scope: { readonly repositoryIds?: ReadonlyArray<number>; readonly permissions?: Record<string, string> }
  ) => Effect.Effect<AccessToken | TokenRefused, ProviderUnavailable>
  /** Every repository the installation can reach. */
  readonly repositories: (
    installationId: string
  ) => Effect.Effect<ReadonlyArray<ProviderRepository>, ProviderUnavailable>
}>()("@cp/server/integrations/ScmhostClient") {
  static readonly layer = Layer.effect(
    ScmhostClient,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const urls = yield* selfUrls
      const local = AppConfig.isLocal(config)
      const app = Option.isSome(config.scmhostApp)
        ? {
          apiUrl: config.scmhostApp.value.apiUrl,
          appId: config.scmhostApp.value.appId,
          slug: config.scmhostApp.value.slug,
          privateKey: Redacted.value(config.scmhostApp.value.privateKey)
        }
        : local
        ? {
          apiUrl: `${urls.own}/dev/scmhost/api`,
          appId: DEV_APP_ID,
          slug: DEV_APP_SLUG,
          privateKey: yield* devAppPrivateKey
        }
        : undefined
      const webUrl = Option.getOrElse(config.scmhostWebUrl, () => `${urls.links}/dev/scmhost`)
      const signingKey = app === undefined
        ? undefined
        : yield* Effect.promise(() => importPKCS8(app.privateKey, "RS256"))
      const http = (yield* HttpClient.HttpClient).pipe(
        HttpClient.mapRequest(HttpClientRequest.setHeaders({
          accept: "application/vnd.github+json",
          "x-github-api-version": "2022-11-28"
        }))
      )
      const timeout = Duration.millis(config.agentProviderTimeoutMs)

      const appJwt = Effect.gen(function*() {
        if (app === undefined || signingKey === undefined) return yield* unavailable("not_configured")
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        return yield* Effect.promise(() =>
          new SignJWT({}).setProtectedHeader({ alg: "RS256" }).setIssuer(app.appId).setIssuedAt(now - 60)
            .setExpirationTime(now + 9 * 60).sign(signingKey)
        )
      })

      /** Runs a request with the timeout; a transport failure or timeout is 502, the status is the caller's. */
      const send = (request: HttpClientRequest.HttpClientRequest) =>
        http.execute(request).pipe(
          Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.fail("timed_out" as const) }),
          Effect.catch((error) => Effect.fail(unavailable(error === "timed_out" ? "timed_out" : "unreachable")))
        )

      const decode =
        <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
        (response: HttpClientResponse.HttpClientResponse) =>
          HttpClientResponse.schemaBodyJson(schema)(response).pipe(
            Effect.mapError(() => unavailable("unexpected_answer"))
          )

      const accessToken = Effect.fn("ScmhostClient.accessToken")(function*(
        installationId: string,
        scope: { readonly repositoryIds?: ReadonlyArray<number>; readonly permissions?: Record<string, string> }
      ) {
        const jwt = yield* appJwt
        const request = yield* HttpClientRequest.post(
          `${app?.apiUrl}/app/installations/${encodeURIComponent(installationId)}/access_tokens`
        ).pipe(
          HttpClientRequest.bearerToken(jwt),
          HttpClientRequest.bodyJson({
            ...(scope.repositoryIds === undefined ? {} : { repository_ids: scope.repositoryIds }),
            ...(scope.permissions === undefined ? {} : { permissions: scope.permissions })
          }),
          Effect.mapError(() => unavailable("bad_request"))
        )
        const response = yield* send(request)
        if (response.status === 404 || response.status === 422 || response.status === 403) {
          return { _tag: "TokenRefused", status: response.status } satisfies TokenRefused
        }
        if (response.status !== 201 && response.status !== 200) return yield* unavailable(`status_${response.status}`)
        return yield* decode(AccessToken)(response)
      })

      return ScmhostClient.of({
        configured: app !== undefined,
        installUrl: (state) =>
          Effect.succeed(
            `${webUrl}/apps/${encodeURIComponent(app?.slug ?? "")}/installations/new?state=${encodeURIComponent(state)}`
          ),
        installation: Effect.fn("ScmhostClient.installation")(function*(installationId) {
          const jwt = yield* appJwt
          const response = yield* send(
            HttpClientRequest.get(`${app?.apiUrl}/app/installations/${encodeURIComponent(installationId)}`).pipe(
              HttpClientRequest.bearerToken(jwt)
            )
          )
          if (response.status === 404) return Option.none()
          if (response.status !== 200) return yield* unavailable(`status_${response.status}`)
          return Option.some(yield* decode(Installation)(response))
        }),
        accessToken,
        repositories: Effect.fn("ScmhostClient.repositories")(function*(installationId) {
          const token = yield* accessToken(installationId, { permissions: { metadata: "read" } })
          if ("_tag" in token) return yield* unavailable(`status_${token.status}`)
          const all: Array<ProviderRepository> = []
          for (let page = 1; page <= MAX_PAGES; page++) {
            const response = yield* send(
              HttpClientRequest.get(`${app?.apiUrl}/installation/repositories`).pipe(
                HttpClientRequest.setUrlParams({ per_page: String(PER_PAGE), page: String(page) }),
                HttpClientRequest.bearerToken(token.token)
              )
            )
            if (response.status !== 200) return yield* unavailable(`status_${response.status}`)
            const body = yield* decode(RepositoryPage)(response)
            all.push(...body.repositories)
            if (body.repositories.length < PER_PAGE || all.length >= body.total_count) break
          }
          return all
        })
      })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}
