/**
 * The agent providers' simulator (integrations-agents.md §4; contract §3), served under `/dev/agents/<provider>` in
 * development and test only (production has no such route: 404 like any unknown path). Each provider's verification
 * call answers in that provider's own shape; a key is accepted when it has at least 8 characters and does not
 * contain `invalid`, otherwise it is refused as the provider would refuse it (401, or 403 for gemini).
 */
import { type AgentProvider, agentProviders } from "@cp/domain"
import { Effect, Layer } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { AppConfig } from "../platform/config.ts"
import { providerApis } from "./providers.ts"

/** The simulator's rule for a good key. */
export const simulatorAccepts = (key: string | undefined): key is string =>
  key !== undefined && key.length >= 8 && !key.includes("invalid")

const bearerOf = (request: HttpServerRequest.HttpServerRequest) =>
  /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "")?.[1]

/** How each provider reads the key, what it answers to a good one, and how it refuses a bad one. */
const simulated: Record<AgentProvider, {
  readonly keyOf: (request: HttpServerRequest.HttpServerRequest) => string | undefined
  readonly accepted: unknown
  readonly refused: { readonly status: number; readonly body: unknown }
}> = {
  anthropic: {
    // The real API also insists on the version header.
    keyOf: (request) => request.headers["anthropic-version"] === undefined ? undefined : request.headers["x-api-key"],
    accepted: {
      data: [{
        type: "model",
        id: "claude-sim-1",
        display_name: "Claude (simulated)",
        created_at: "2026-01-01T00:00:00Z"
      }],
      has_more: false,
      first_id: "claude-sim-1",
      last_id: "claude-sim-1"
    },
    refused: {
      status: 401,
      body: { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }
    }
  },
  openai: {
    keyOf: bearerOf,
    accepted: {
      object: "list",
      data: [{ id: "gpt-sim-1", object: "model", created: 1_767_225_600, owned_by: "system" }]
    },
    refused: {
      status: 401,
      body: {
        error: { message: "Incorrect API key provided.", type: "invalid_request_error", code: "invalid_api_key" }
      }
    }
  },
  gemini: {
    keyOf: (request) => request.headers["x-goog-api-key"],
    accepted: { models: [{ name: "models/gemini-sim-1", displayName: "Gemini (simulated)" }] },
    refused: { status: 403, body: { error: { code: 403, message: "API key not valid.", status: "PERMISSION_DENIED" } } }
  },
  modal: {
    keyOf: bearerOf,
    accepted: { workspace: { name: "simulated-workspace" } },
    refused: { status: 401, body: { detail: "Invalid token" } }
  }
}

/** The simulator's routes, added to the router only outside production. */
export const AgentSimulatorRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  if (!AppConfig.isLocal(config)) return Layer.empty
  return HttpRouter.use((router) =>
    Effect.forEach(agentProviders, (provider) => {
      const { accepted, keyOf, refused } = simulated[provider]
      return router.add("GET", `/dev/agents/${provider}${providerApis[provider].path}`, (request) =>
        simulatorAccepts(keyOf(request))
          ? HttpServerResponse.json(accepted)
          : HttpServerResponse.json(refused.body, { status: refused.status }))
    }, { discard: true })
  )
}))
