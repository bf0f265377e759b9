/**
 * The agent providers' API shapes (integrations-agents.md §4) and the one HTTP client that checks a key against them.
 * Base URLs come from `AGENT_<PROVIDER>_BASE_URL`; unset, production uses the provider's public API and development
 * and test this server's own simulator under `/dev/agents/<provider>`. The key travels only in the request header;
 * nothing here logs a header, a URL with a key, or a response body.
 */
import type { AgentProvider } from "@cp/domain"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { AppConfig } from "../platform/config.ts"
import { selfUrls } from "../platform/selfUrl.ts"

/** Accepted (2xx of the provider's shape), rejected (401/403), or unreachable (anything else, a timeout included). */
export type KeyCheck = "accepted" | "rejected" | "unreachable"

/** The public APIs, used in production when no base URL is configured. */
const PUBLIC_BASE_URLS: Record<AgentProvider, string> = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com",
  gemini: "https://generativelanguage.googleapis.com",
  modal: "https://api.modal.com"
}

/** The `anthropic-version` header the verification call sends. */
export const ANTHROPIC_VERSION = "2023-06-01"

/** Each provider's verification call: the path under its base URL, how the key is sent, the 2xx body it answers. */
export const providerApis: Record<
  AgentProvider,
  {
    readonly path: string
    readonly authenticate: (
      key: string
    ) => (request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
    readonly answer: Schema.Decoder<unknown>
  }
> = {
  anthropic: {
    path: "/v1/models",
    authenticate: (key) => HttpClientRequest.setHeaders({ "x-api-key": key, "anthropic-version": ANTHROPIC_VERSION }),
    answer: Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String })) })
  },
  openai: {
    path: "/v1/models",
    authenticate: (key) => HttpClientRequest.bearerToken(key),
    answer: Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String })) })
  },
  gemini: {
    path: "/v1beta/models",
    authenticate: (key) => HttpClientRequest.setHeader("x-goog-api-key", key),
    answer: Schema.Struct({ models: Schema.Array(Schema.Struct({ name: Schema.String })) })
  },
  modal: {
    path: "/v1/account",
    authenticate: (key) => HttpClientRequest.bearerToken(key),
    answer: Schema.Struct({ workspace: Schema.Struct({ name: Schema.String }) })
  }
}

export class AgentProviderClient extends Context.Service<AgentProviderClient, {
  /** Asks the provider whether it accepts `apiKey`. Never fails: every fault is `unreachable`, logged keyless. */
  readonly check: (provider: AgentProvider, apiKey: string) => Effect.Effect<KeyCheck>
}>()("@cp/server/agents/AgentProviderClient") {
  static readonly layer = Layer.effect(
    AgentProviderClient,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const http = (yield* HttpClient.HttpClient).pipe(HttpClient.mapRequest(HttpClientRequest.acceptJson))
      // The simulator is this very server: its real address (a test listens on a port the OS picks).
      const ownBaseUrl = (yield* selfUrls).own
      const baseUrlOf = (provider: AgentProvider) =>
        config.agentBaseUrls[provider] ??
          (AppConfig.isLocal(config) ? `${ownBaseUrl}/dev/agents/${provider}` : PUBLIC_BASE_URLS[provider])
      const timeout = Duration.millis(config.agentProviderTimeoutMs)

      return AgentProviderClient.of({
        check: Effect.fn("AgentProviderClient.check")(function*(provider, apiKey) {
          const api = providerApis[provider]
          const request = HttpClientRequest.get(`${baseUrlOf(provider)}${api.path}`).pipe(api.authenticate(apiKey))
          const outcome = yield* http.execute(request).pipe(
            Effect.flatMap((response): Effect.Effect<KeyCheck | string, unknown> => {
              if (response.status === 401 || response.status === 403) return Effect.succeed("rejected")
              if (response.status < 200 || response.status > 299) return Effect.succeed(`status ${response.status}`)
              return HttpClientResponse.schemaBodyJson(api.answer)(response).pipe(
                Effect.as<KeyCheck>("accepted"),
                Effect.orElseSucceed(() => "unexpected answer")
              )
            }),
            Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.succeed("timed out") }),
            Effect.orElseSucceed(() => "unreachable")
          )
          if (outcome === "accepted" || outcome === "rejected") return outcome
          yield* Effect.logWarning("Agent provider could not verify a key").pipe(
            Effect.annotateLogs({ provider, reason: outcome })
          )
          return "unreachable"
        })
      })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}
