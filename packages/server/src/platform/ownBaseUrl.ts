/**
 * This server's own base URL, for the development simulators it calls over real HTTP: the address it actually listens
 * on (a test listens on a port the OS picks), else `PUBLIC_BASE_URL`.
 */
import { Effect, Option, Result } from "effect"
import { HttpServer } from "effect/http"
import { NetAddress } from "effect/net"
import { AppConfig } from "./config.ts"

export const ownBaseUrl: Effect.Effect<string, never, AppConfig> = Effect.gen(function*() {
  const config = yield* AppConfig
  const server = yield* Effect.serviceOption(HttpServer.HttpServer)
  return Option.match(server, {
    onNone: () => config.publicBaseUrl,
    onSome: ({ address }) =>
      Result.match(NetAddress.formatUrl(address), {
        onFailure: () => config.publicBaseUrl,
        onSuccess: (url) => url.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//127.0.0.1:")
      })
  })
})
