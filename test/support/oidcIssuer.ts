/**
 * A CI OIDC issuer owned by a test: a real `node:http` server on 127.0.0.1 serving its JSON Web Key Set at `/jwks`
 * (what `CI_OIDC_ISSUERS` points the server at), signing tokens with `jose` under the current key, rotating to a
 * new key on demand, and answering `/broken` with a 500 and `/garbage` with a body that is not a key set. It counts
 * the key set fetches, so a test can see when the server refreshed its copy.
 */
import { Effect, type Scope } from "effect"
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose"
import { createServer } from "node:http"
import type { Server } from "node:net"

interface SigningKey {
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly publicJwk: JWK
}

export interface OidcIssuerServer {
  /** `http://127.0.0.1:<port>`; the key set is at `${origin}/jwks`. */
  readonly origin: string
  /** Key set fetches answered so far. */
  readonly fetches: () => number
  /** The current key's id. */
  readonly kid: () => string
  /** A new key pair becomes the current one; the key set then lists only it (the old key is withdrawn). */
  readonly rotate: () => Promise<void>
  /**
   * A JWT with `claims` signed by the current key (or by `key`, a key the key set never listed, under the current
   * key's id), `iat`/`nbf`/`exp` filled in unless given.
   */
  readonly sign: (
    claims: JWTPayload,
    options?: { readonly expiresInSeconds?: number; readonly forged?: boolean }
  ) => Promise<string>
}

const portOf = (server: Server): number => {
  const address = server.address()
  return typeof address === "object" && address !== null ? address.port : 0
}

const newKey = async (n: number): Promise<SigningKey> => {
  const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
  const kid = `test-key-${n}`
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } }
}

/** The issuer, listening until the scope closes. */
export const startOidcIssuer: Effect.Effect<OidcIssuerServer, never, Scope.Scope> = Effect.gen(function*() {
  let generation = 1
  let current = yield* Effect.promise(() => newKey(generation))
  const stranger = yield* Effect.promise(() => newKey(0))
  let fetches = 0
  const server = createServer((request, response) => {
    if (request.url === "/jwks") {
      fetches++
      response.writeHead(200, { "content-type": "application/jwk-set+json" })
      response.end(JSON.stringify({ keys: [current.publicJwk] }))
    } else if (request.url === "/garbage") {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ notKeys: true }))
    } else {
      response.writeHead(request.url === "/broken" ? 500 : 404)
      response.end()
    }
  })
  const port = yield* Effect.acquireRelease(
    Effect.callback<number>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(portOf(server))))
    }),
    () => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
  )
  return {
    origin: `http://127.0.0.1:${port}`,
    fetches: () => fetches,
    kid: () => current.kid,
    rotate: async () => {
      generation++
      current = await newKey(generation)
    },
    sign: (claims, options = {}) => {
      const now = Math.floor(Date.now() / 1000)
      const key = options.forged === true ? stranger.privateKey : current.privateKey
      return new SignJWT({ iat: now, nbf: now, exp: now + (options.expiresInSeconds ?? 300), ...claims })
        .setProtectedHeader({ alg: "ES256", kid: current.kid, typ: "JWT" })
        .sign(key)
    }
  }
})

/** A loopback port nothing listens on (bound, read, then closed). */
export const closedPort: Effect.Effect<number> = Effect.callback<number>((resume) => {
  const probe = createServer()
  probe.listen(0, "127.0.0.1", () => {
    const port = portOf(probe)
    probe.close(() => resume(Effect.succeed(port)))
  })
})
