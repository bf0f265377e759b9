/**
 * The source-control provider's simulator (integrations-agents.md §1), served under `/dev/scmhost` in development
 * and test only: GitHub's REST subset the client speaks (app JWTs verified with the dev app's public key,
 * installation tokens signed by this server and verified statelessly, so none is ever stored), an install page a
 * person can click through, and a dev call that sends a signed provider webhook to the server's own ingress.
 */
import { SimInstallationsRepo } from "@cp/persistence"
import { Clock, Effect, Layer, Option, Redacted, Schema } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse, UrlParams } from "effect/http"
import { jwtVerify } from "jose"
import { randomUUID } from "node:crypto"
import { AppConfig, DEV_SCMHOST_WEBHOOK_SECRET } from "../platform/config.ts"
import { hmacSha256Hex, randomDigits, signToken, verifyToken } from "../platform/crypto.ts"
import { ServerKeys } from "../platform/keys.ts"
import { selfUrls } from "../platform/selfUrl.ts"
import { DEV_APP_ID, DEV_APP_SLUG, devAppPrivateKey, publicKeyOf } from "./scmhost.ts"

/** What the dev app is granted on every installation. */
export const SIM_PERMISSIONS: Readonly<Record<string, "read" | "write">> = {
  contents: "write",
  metadata: "read",
  checks: "write",
  statuses: "write",
  pull_requests: "read"
}
const SIM_REPOS = [
  { name: "api", private: true },
  { name: "web", private: false },
  { name: "infra", private: true }
] as const
export const DEFAULT_SIM_ACCOUNT = "sim-octo"
const TOKEN_PURPOSE = "scmhost-sim-installation-token"
const TOKEN_LIFETIME_MS = 60 * 60 * 1000

/** A stable numeric account id for a login (the simulator has no account table). */
export const simAccountId = (login: string): number => {
  let hash = 0
  for (const char of login) hash = (hash * 31 + char.charCodeAt(0)) % 900_000
  return 100_000 + hash
}

/** The account's three repositories, as the provider lists them. */
export const simRepositories = (login: string) => {
  const accountId = simAccountId(login)
  return SIM_REPOS.map((repo, index) => ({
    id: accountId * 10 + index + 1,
    name: repo.name,
    full_name: `${login}/${repo.name}`,
    default_branch: "main",
    private: repo.private,
    owner: { id: accountId, login, type: "Organization" }
  }))
}

const LOGIN = /^[A-Za-z0-9][A-Za-z0-9-]{0,38}$/
const TokenClaims = Schema.Struct({
  installationId: Schema.String,
  repositoryIds: Schema.NullOr(Schema.Array(Schema.Number)),
  expiresAt: Schema.Number
})
const TokenRequestBody = Schema.Struct({
  repository_ids: Schema.optionalKey(Schema.Array(Schema.Number)),
  permissions: Schema.optionalKey(Schema.Record(Schema.String, Schema.String))
})
const EventRequest = Schema.Struct({
  event: Schema.String.check(Schema.isPattern(/^[a-z_]{1,64}$/)),
  payload: Schema.Record(Schema.String, Schema.Json),
  deliveryId: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)))
})

const html = (title: string, body: string) =>
  HttpServerResponse.text(
    `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>` +
      `<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}` +
      `button{font-size:1rem;padding:.5rem 1.25rem}li{margin:.25rem 0}</style></head><body>${body}</body></html>`,
    { contentType: "text/html; charset=utf-8" }
  )

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`)

const notFound = HttpServerResponse.jsonUnsafe({ message: "Not Found" }, { status: 404 })
const unauthorized = HttpServerResponse.jsonUnsafe({ message: "Bad credentials" }, { status: 401 })
const bearerOf = (request: HttpServerRequest.HttpServerRequest) =>
  /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "")?.[1]

export const ScmhostSimulatorRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  if (!AppConfig.isLocal(config) || Option.isSome(config.scmhostApp)) return Layer.empty
  return HttpRouter.use((router) =>
    Effect.gen(function*() {
      const installations = yield* SimInstallationsRepo
      const keys = yield* ServerKeys
      const urls = yield* selfUrls
      const publicKey = publicKeyOf(yield* devAppPrivateKey)
      const webhookSecret = Option.match(config.scmhostWebhookSecret, {
        onNone: () => DEV_SCMHOST_WEBHOOK_SECRET,
        onSome: Redacted.value
      })

      const asApp = (request: HttpServerRequest.HttpServerRequest) =>
        Effect.promise(() =>
          jwtVerify(bearerOf(request) ?? "", publicKey, { issuer: DEV_APP_ID, algorithms: ["RS256"] }).then(
            () => true,
            () => false
          )
        )

      const installationJson = (
        row: {
          id: string
          accountId: string
          accountLogin: string
          accountType: string
          createdAt: Date
          updatedAt: Date
        }
      ) => ({
        id: Number(row.id),
        account: { id: Number(row.accountId), login: row.accountLogin, type: row.accountType },
        app_id: Number(DEV_APP_ID),
        app_slug: DEV_APP_SLUG,
        target_type: row.accountType,
        permissions: SIM_PERMISSIONS,
        repository_selection: "all",
        events: ["push", "pull_request", "check_run", "release"],
        created_at: row.createdAt.toISOString(),
        updated_at: row.updatedAt.toISOString(),
        suspended_at: null
      })

      const installationParam = Effect.map(HttpRouter.params, (params) => params["installationId"] ?? "")

      // The app's view of one installation.
      yield* router.add("GET", "/dev/scmhost/api/app/installations/:installationId", (request) =>
        Effect.gen(function*() {
          if (!(yield* asApp(request))) return unauthorized
          const found = yield* installations.find(yield* installationParam)
          return Option.match(found, {
            onNone: () => notFound,
            onSome: (row) => HttpServerResponse.jsonUnsafe(installationJson(row))
          })
        }))

      // An installation token, narrowed to repositories and permissions the installation has (else 422, as GitHub).
      yield* router.add("POST", "/dev/scmhost/api/app/installations/:installationId/access_tokens", (request) =>
        Effect.gen(function*() {
          if (!(yield* asApp(request))) {
            return unauthorized
          }
          const found = yield* installations.find(yield* installationParam)
          if (Option.isNone(found)) {
            return notFound
          }
          const body = yield* request.json.pipe(
            Effect.flatMap(Schema.decodeUnknownEffect(TokenRequestBody)),
            Effect.option
          )
          if (Option.isNone(body)) {
            return HttpServerResponse.jsonUnsafe({ message: "Invalid request" }, { status: 422 })
          }
          const repos = simRepositories(found.value.accountLogin)
          const wanted = body.value.repository_ids
          if (
            wanted !== undefined && wanted.some((id) =>
              !repos.some((repo) =>
                repo.id === id
              )
            )
          ) {
            return HttpServerResponse.jsonUnsafe({
              message:
                "There is at least one repository that does not exist or is not accessible to the parent installation."
            }, { status: 422 })
          }
          const permissions = body.value.permissions ?? SIM_PERMISSIONS
          for (const [name, level] of Object.entries(permissions)) {
            const held = SIM_PERMISSIONS[name]
            if (
              held === undefined || (level === "write" && held !== "write") || (level !== "read" && level !== "write")
            ) {
              return HttpServerResponse.jsonUnsafe({
                message: `The permissions requested are not granted to this installation.`
              }, { status: 422 })
            }
          }
          const now = yield* Clock.currentTimeMillis
          const expiresAt = now + TOKEN_LIFETIME_MS
          const token = `ghs_${
            signToken(keys.signingKey, TOKEN_PURPOSE, {
              installationId: found.value.id,
              repositoryIds: wanted ?? null,
              expiresAt
            })
          }`
          return HttpServerResponse.jsonUnsafe({
            token,
            expires_at: new Date(expiresAt).toISOString(),
            permissions,
            repository_selection: wanted === undefined ? "all" : "selected",
            ...(wanted === undefined ? {} : { repositories: repos.filter((repo) => wanted.includes(repo.id)) })
          }, { status: 201 })
        }))

      // The repositories an installation token reaches.
      yield* router.add("GET", "/dev/scmhost/api/installation/repositories", (request) =>
        Effect.gen(function*() {
          const bearer = bearerOf(request)
          const claims = bearer?.startsWith("ghs_") === true
            ? Schema.decodeUnknownOption(TokenClaims)(verifyToken(keys.signingKey, TOKEN_PURPOSE, bearer.slice(4)))
            : Option.none()
          const now = yield* Clock.currentTimeMillis
          if (Option.isNone(claims) || claims.value.expiresAt <= now) {
            return unauthorized
          }
          const found = yield* installations.find(claims.value.installationId)
          if (Option.isNone(found)) {
            return unauthorized
          }
          const url = new URL(request.url, "http://simulator")
          const perPage = Math.min(100, Math.max(1, Number(url.searchParams.get("per_page") ?? "30") || 30))
          const page = Math.max(1, Number(url.searchParams.get("page") ?? "1") || 1)
          const scope = claims.value.repositoryIds
          const repos = simRepositories(found.value.accountLogin).filter((repo) =>
            scope === null || scope.includes(repo.id)
          )
          return HttpServerResponse.jsonUnsafe({
            total_count: repos.length,
            repositories: repos.slice((page - 1) * perPage, page * perPage)
          })
        }))

      // The install page: a fake account with three repositories, and "Install".
      yield* router.add("GET", "/dev/scmhost/apps/:slug/installations/new", (request) =>
        Effect.gen(function*() {
          const state = new URL(request.url, "http://simulator").searchParams.get("state") ?? ""
          const login = DEFAULT_SIM_ACCOUNT
          const list = simRepositories(login).map((repo) => `<li>${escapeHtml(repo.full_name)}</li>`).join("")
          return html(
            "Install app",
            `<h1>Install ${escapeHtml(DEV_APP_SLUG)} (simulated)</h1>` +
              `<form method="post" action="/dev/scmhost/apps/${encodeURIComponent(DEV_APP_SLUG)}/installations">` +
              `<p><label>Account <input name="account" value="${escapeHtml(login)}"></label></p>` +
              `<p>Repositories (all):</p><ul>${list}</ul>` +
              `<p>Permissions: ${
                Object.entries(SIM_PERMISSIONS).map(([name, level]) => `${name}: ${level}`).join(", ")
              }</p>` +
              `<input type="hidden" name="state" value="${escapeHtml(state)}">` +
              `<button type="submit">Install</button></form>`
          )
        }))

      // "Install": creates the account's installation (or touches it) and sends the browser to the setup callback.
      yield* router.add("POST", "/dev/scmhost/apps/:slug/installations", (request) =>
        Effect.gen(function*() {
          const form = yield* Effect.option(request.urlParamsBody)
          const field = (name: string) =>
            Option.getOrUndefined(Option.flatMap(form, (params) => UrlParams.getFirst(params, name)))
          const login = field("account") ?? DEFAULT_SIM_ACCOUNT
          if (!LOGIN.test(login)) {
            return html("Install app", "<p>Invalid account name.</p>").pipe(HttpServerResponse.setStatus(422))
          }
          const at = new Date(yield* Clock.currentTimeMillis)
          const row = yield* installations.install({
            id: `${randomDigits(1).replace("0", "1")}${randomDigits(7)}`,
            accountId: String(simAccountId(login)),
            accountLogin: login,
            at
          })
          const action = row.createdAt.getTime() === at.getTime() ? "install" : "update"
          const query = new URLSearchParams({
            installation_id: row.id,
            setup_action: action,
            state: field("state") ?? ""
          })
          return HttpServerResponse.redirect(`${urls.links}/ingress/scmhost/setup?${query.toString()}`, { status: 302 })
        }))

      // Dev call: the simulator sends this provider webhook, signed, to the server's own ingress.
      yield* router.add("POST", "/dev/scmhost/installations/:installationId/events", (request) =>
        Effect.gen(function*() {
          const installationId = yield* installationParam
          const found = yield* installations.find(installationId)
          if (Option.isNone(found)) return notFound
          const input = yield* request.json.pipe(
            Effect.flatMap(Schema.decodeUnknownEffect(EventRequest)),
            Effect.option
          )
          if (Option.isNone(input)) {
            return HttpServerResponse.jsonUnsafe({ message: "body must be { event, payload, deliveryId? }" }, {
              status: 422
            })
          }
          const repos = simRepositories(found.value.accountLogin)
          const payload = {
            ...(input.value.payload["repository"] === undefined ? { repository: repos[0] } : {}),
            sender: { login: found.value.accountLogin },
            ...input.value.payload,
            installation: { id: Number(installationId) }
          }
          const body = JSON.stringify(payload)
          const deliveryId = input.value.deliveryId ?? randomUUID()
          const response = yield* Effect.tryPromise(() =>
            fetch(`${urls.own}/ingress/scmhost/webhook`, {
              method: "POST",
              headers: {
                "content-type": "application/json",
                "user-agent": "scmhost-simulator",
                "x-scmhost-event": input.value.event,
                "x-scmhost-delivery": deliveryId,
                "x-hub-signature-256": `sha256=${hmacSha256Hex(webhookSecret, body)}`
              },
              body
            }).then(async (answer) => ({ status: answer.status, body: await answer.text() }))
          ).pipe(Effect.option)
          return HttpServerResponse.jsonUnsafe({
            deliveryId,
            status: Option.match(response, { onNone: () => null, onSome: (answer) => answer.status })
          })
        }))
    })
  )
}))

/**
 * Where the setup callback sends the browser (`{PUBLIC_BASE_URL}/integrations/connected?connectionId=…`): a small
 * page saying the connection is made, so a person clicking through the install ends somewhere readable. It reads
 * nothing and needs no credential: the id in the query is echoed, escaped, and nothing else is shown.
 */
export const ConnectedPageRoutes = HttpRouter.use((router) =>
  router.add("GET", "/integrations/connected", (request) => {
    const connectionId = new URL(request.url, "http://server").searchParams.get("connectionId") ?? ""
    const shown = /^int_[0-9A-HJKMNP-TV-Z]{26}$/.test(connectionId) ? connectionId : "the connection"
    return Effect.succeed(html(
      "Connected",
      `<h1>Connected</h1><p>${escapeHtml(shown)} is active. You can close this page and return to the CLI or API:` +
        ` list its repositories with <code>cpctl integrations repositories ${escapeHtml(shown)}</code>.</p>`
    ))
  })
)
