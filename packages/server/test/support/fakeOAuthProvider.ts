/**
 * A real OAuth2/OIDC provider on 127.0.0.1 for sign-in tests: `/authorize` redirects back with a code (or an
 * error), `/token` checks the client, the redirect URI and the PKCE verifier against the S256 challenge, and
 * `/userinfo` answers the profile the test configured for the access token.
 */
import { Context, Effect, Layer } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"

/** The userinfo claims the provider answers; `email_verified` is any JSON so tests can send odd values. */
export interface FakeProfile {
  readonly sub: string
  readonly email?: string | null
  readonly email_verified?: unknown
  readonly name?: string
}

interface PendingCode {
  readonly redirectUri: string
  readonly challenge: string
  readonly profile: FakeProfile
}

export class FakeOAuthProvider extends Context.Service<FakeOAuthProvider, {
  readonly baseUrl: string
  readonly clientId: string
  readonly clientSecret: string
  /** The `OAUTH_<NAME>_*` variables that point a provider named `name` at this server. */
  readonly env: (name: string) => Record<string, string>
  /** The profile carried by authorizations from now on. */
  readonly setProfile: (profile: FakeProfile) => void
  /** Makes the next authorization redirect back with `error=access_denied` instead of a code. */
  readonly denyNext: () => void
  /** Why each refused token request was refused, oldest first. */
  readonly refusals: ReadonlyArray<string>
  /** Every access token handed out, so tests can check none leaks. */
  readonly issuedTokens: ReadonlyArray<string>
}>()("test/FakeOAuthProvider") {
  /** Listens on a free loopback port for the life of the layer. */
  static readonly layer = Layer.effect(
    FakeOAuthProvider,
    Effect.gen(function*() {
      const clientId = "fake-client-id"
      const clientSecret = `fake-client-secret-${randomBytes(8).toString("hex")}`
      const codes = new Map<string, PendingCode>()
      const tokens = new Map<string, FakeProfile>()
      const refusals: Array<string> = []
      const issuedTokens: Array<string> = []
      let profile: FakeProfile = { sub: "fake-subject", email: "someone@example.test", email_verified: true }
      let deny = false

      const json = (res: ServerResponse, status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
        res.end(JSON.stringify(body))
      }
      const redirect = (res: ServerResponse, to: URL) => {
        res.writeHead(302, { location: to.toString() })
        res.end()
      }

      const authorize = (url: URL, res: ServerResponse) => {
        const param = (name: string) => url.searchParams.get(name) ?? ""
        const redirectUri = URL.parse(param("redirect_uri"))
        if (
          redirectUri === null || param("response_type") !== "code" || param("client_id") !== clientId ||
          param("code_challenge_method") !== "S256" || param("code_challenge") === "" || param("state") === ""
        ) {
          return json(res, 400, { error: "invalid_request" })
        }
        redirectUri.searchParams.set("state", param("state"))
        if (deny) {
          deny = false
          redirectUri.searchParams.set("error", "access_denied")
          return redirect(res, redirectUri)
        }
        const code = randomBytes(16).toString("hex")
        codes.set(code, { redirectUri: param("redirect_uri"), challenge: param("code_challenge"), profile })
        redirectUri.searchParams.set("code", code)
        return redirect(res, redirectUri)
      }

      const token = (form: URLSearchParams, res: ServerResponse) => {
        const refuse = (reason: string) => {
          refusals.push(reason)
          return json(res, 400, { error: "invalid_grant", error_description: reason })
        }
        if (form.get("grant_type") !== "authorization_code") return refuse("grant_type is not authorization_code")
        if (form.get("client_id") !== clientId || form.get("client_secret") !== clientSecret) {
          return refuse("wrong client credentials")
        }
        const code = form.get("code") ?? ""
        const pending = codes.get(code)
        codes.delete(code)
        if (pending === undefined) return refuse("unknown or used code")
        if (form.get("redirect_uri") !== pending.redirectUri) return refuse("redirect_uri does not match")
        const verifier = form.get("code_verifier") ?? ""
        if (createHash("sha256").update(verifier).digest("base64url") !== pending.challenge) {
          return refuse("code_verifier does not match the code_challenge")
        }
        const accessToken = `fake-access-${randomBytes(16).toString("hex")}`
        tokens.set(accessToken, pending.profile)
        issuedTokens.push(accessToken)
        return json(res, 200, {
          access_token: accessToken,
          token_type: "Bearer",
          expires_in: 3600,
          scope: "openid email profile"
        })
      }

      const userinfo = (req: IncomingMessage, res: ServerResponse) => {
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
        const found = bearer === undefined ? undefined : tokens.get(bearer)
        return found === undefined ? json(res, 401, { error: "invalid_token" }) : json(res, 200, found)
      }

      const server = createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://127.0.0.1")
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          if (req.method === "GET" && url.pathname === "/authorize") return authorize(url, res)
          if (req.method === "POST" && url.pathname === "/token") {
            if (!(req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) {
              return json(res, 400, { error: "invalid_request" })
            }
            return token(new URLSearchParams(Buffer.concat(chunks).toString("utf8")), res)
          }
          if (req.method === "GET" && url.pathname === "/userinfo") return userinfo(req, res)
          return json(res, 404, { error: "not_found" })
        })
      })

      const port = yield* Effect.acquireRelease(
        Effect.callback<number>((resume) => {
          server.listen(0, "127.0.0.1", () => {
            const address = server.address()
            resume(
              typeof address === "object" && address !== null
                ? Effect.succeed(address.port)
                : Effect.die(new Error("the fake OAuth provider is not listening on TCP"))
            )
          })
        }),
        () =>
          Effect.callback<void>((resume) => {
            server.closeAllConnections()
            server.close(() => resume(Effect.void))
          })
      )
      const baseUrl = `http://127.0.0.1:${port}`

      return FakeOAuthProvider.of({
        baseUrl,
        clientId,
        clientSecret,
        env: (name) => ({
          [`OAUTH_${name}_CLIENT_ID`]: clientId,
          [`OAUTH_${name}_CLIENT_SECRET`]: clientSecret,
          [`OAUTH_${name}_AUTHORIZE_URL`]: `${baseUrl}/authorize`,
          [`OAUTH_${name}_TOKEN_URL`]: `${baseUrl}/token`,
          [`OAUTH_${name}_USERINFO_URL`]: `${baseUrl}/userinfo`
        }),
        setProfile: (next) => {
          profile = next
        },
        denyNext: () => {
          deny = true
        },
        refusals,
        issuedTokens
      })
    })
  )
}
