/**
 * Further integration providers (integrations-agents.md §2), configured by `INTEGRATION_<NAME>_API_URL` (and
 * `_CUSTODY`): a pasted parent token is checked with `GET {API_URL}/v1/organizations` (bearer). In development and
 * test the simulated database platform `dbhost` answers under `/dev/dbhost`: any token starting `dbh_` sees one
 * organization, `dbh_empty` sees none, anything else is refused. The token travels only in the request header.
 */
import { ProviderUnavailable, wireError } from "@cp/domain"
import { Context, Duration, Effect, Layer, Option, Schema } from "effect"
import {
  FetchHttpClient,
  HttpClient,
  HttpClientRequest,
  HttpClientResponse,
  HttpRouter,
  HttpServerResponse
} from "effect/http"
import { AppConfig, type IntegrationProviderConfig } from "../platform/config.ts"
import { selfUrls } from "../platform/selfUrl.ts"

const Organization = Schema.Struct({ id: Schema.Union([Schema.String, Schema.Number]), name: Schema.String })
const Organizations = Schema.Union([
  Schema.Array(Organization),
  Schema.Struct({ organizations: Schema.Array(Organization) })
])

export interface ProviderOrganization {
  readonly id: string
  readonly name: string
}

/** What the provider said about a token: the organizations it sees, or that it refused it. */
export type TokenCheck = { readonly _tag: "Rejected" } | {
  readonly _tag: "Accepted"
  readonly organizations: ReadonlyArray<ProviderOrganization>
}

export class IntegrationProviders extends Context.Service<IntegrationProviders, {
  readonly find: (name: string) => Option.Option<IntegrationProviderConfig>
  /** Checks a parent token; a provider that is down, times out or answers 5xx is 502. */
  readonly checkToken: (
    provider: IntegrationProviderConfig,
    token: string
  ) => Effect.Effect<TokenCheck, ProviderUnavailable>
}>()("@cp/server/integrations/IntegrationProviders") {
  static readonly layer = Layer.effect(
    IntegrationProviders,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const urls = yield* selfUrls
      const http = (yield* HttpClient.HttpClient).pipe(HttpClient.mapRequest(HttpClientRequest.acceptJson))
      const timeout = Duration.millis(config.agentProviderTimeoutMs)
      const unavailable = (provider: string, reason: string) =>
        wireError(ProviderUnavailable, `The ${provider} API could not be reached or failed`, { provider, reason })
      return IntegrationProviders.of({
        find: (name) => Option.fromUndefinedOr(config.integrationProviders.find((p) => p.name === name)),
        checkToken: Effect.fn("IntegrationProviders.checkToken")(function*(provider, token) {
          const base = Option.getOrElse(provider.apiUrl, () => `${urls.own}/dev/${provider.name}`)
          const response = yield* http.execute(
            HttpClientRequest.get(`${base}/v1/organizations`).pipe(HttpClientRequest.bearerToken(token))
          ).pipe(
            Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.fail("timed_out" as const) }),
            Effect.catch((error) =>
              Effect.fail(unavailable(provider.name, error === "timed_out" ? "timed_out" : "unreachable"))
            )
          )
          if (response.status === 401 || response.status === 403) return { _tag: "Rejected" } as const
          if (response.status < 200 || response.status > 299) {
            return yield* unavailable(provider.name, `status_${response.status}`)
          }
          const body = yield* HttpClientResponse.schemaBodyJson(Organizations)(response).pipe(
            Effect.mapError(() => unavailable(provider.name, "unexpected_answer"))
          )
          const list = "organizations" in body ? body.organizations : body
          return {
            _tag: "Accepted",
            organizations: list.map((org) => ({ id: String(org.id), name: org.name }))
          } as const
        })
      })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}

/** The `dbhost` simulator's routes (development/test only, when `dbhost` is not configured with an API URL). */
export const DbhostSimulatorRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const dbhost = config.integrationProviders.find((p) => p.name === "dbhost")
  if (!AppConfig.isLocal(config) || dbhost === undefined || Option.isSome(dbhost.apiUrl)) return Layer.empty
  return HttpRouter.use((router) =>
    router.add("GET", "/dev/dbhost/v1/organizations", (request) => {
      const token = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "")?.[1]
      if (token === undefined || !token.startsWith("dbh_")) {
        return Effect.succeed(HttpServerResponse.jsonUnsafe({ error: "invalid_token" }, { status: 401 }))
      }
      return Effect.succeed(HttpServerResponse.jsonUnsafe({
        organizations: token === "dbh_empty" ? [] : [{ id: "dbo_sim_1", name: "sim-db-org" }]
      }))
    })
  )
}))
