/**
 * This server's own base URLs. `own` is where it really listens (a test listens on a port the OS picks), for calls
 * the server makes to its own simulators; `links` is what it hands out in links (contract §1: `PUBLIC_BASE_URL`),
 * except that with `PORT=0` the configured default names no real port, so the real address serves instead.
 */
import { Effect, Option, Result } from "effect"
import { HttpServer } from "effect/http"
import { NetAddress } from "effect/net"
import { AppConfig } from "./config.ts"

export const selfUrls = Effect.gen(function*() {
  const config = yield* AppConfig
  const server = yield* Effect.serviceOption(HttpServer.HttpServer)
  const own = Option.match(server, {
    onNone: () => config.publicBaseUrl,
    onSome: ({ address }) =>
      Result.match(NetAddress.formatUrl(address), {
        onFailure: () => config.publicBaseUrl,
        onSuccess: (url) => url.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//127.0.0.1:")
      })
  })
  return { own, links: config.port === 0 ? own : config.publicBaseUrl }
})
