/**
 * The OIDC exchange (run-state.md §1 "Workflow credentials"): a CI provider's JWT, verified with `jose` against a
 * trusted issuer's JWKS (`CI_OIDC_ISSUERS`, plus the simulator issuer under `/dev/oidc` in development and test),
 * whose `repository` names an OIDC-enabled link of the project, whose `ref` matches the link's pattern and whose
 * `environment` (if any) the link allows, becomes a workflow bearer token of at most 15 minutes. Every refusal is 401
 * `unauthenticated` with `details.reason`; a remote issuer whose key set cannot be fetched (unreachable, timed out,
 * not 200, not a key set) is 502 `provider_unavailable`, since nothing is known about the token then.
 */
import {
  type Actor,
  type DevOidcTokenInput,
  NotFound,
  type OidcExchangeInput,
  type OidcRefusal,
  ProviderUnavailable,
  Unauthenticated,
  wireError,
  type WorkflowCredential
} from "@cp/domain"
import { CliLinksRepo, ProjectsRepo, ServerSecretsRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  jwtVerify,
  SignJWT
} from "jose"
import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey } from "node:crypto"
import { signWorkflowToken } from "../identity/workflowTokens.ts"
import { AppConfig, type OidcIssuer } from "../platform/config.ts"
import { sha256Hex } from "../platform/crypto.ts"
import { ServerKeys } from "../platform/keys.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { canonicalRemote } from "./remoteUrl.ts"
import { globMatches } from "./rules.ts"

/** A workflow credential lives at most this long (and never past the JWT's `exp`). */
export const WORKFLOW_TOKEN_MAX_MS = 15 * 60 * 1000

/**
 * How soon a token naming a key id the cached key set lacks may fetch a remote issuer's key set again (jose's
 * `cooldownDuration`; its default is 30 s): a rotated key is admitted within a second of the issuer publishing it,
 * while tokens with made-up key ids cost the issuer at most one fetch a second per process.
 */
export const JWKS_COOLDOWN_MS = 1000
/** How long a key set fetch may take before the exchange answers 502. */
export const JWKS_TIMEOUT_MS = 5000

const refused = (reason: OidcRefusal, message: string) => wireError(Unauthenticated, message, { reason })

/**
 * Whether jose failed fetching the key set rather than verifying the token: a timeout, a network error (not a
 * `JOSEError`), a non-200 or non-JSON answer (the generic `JOSEError`), or a document that is not a key set.
 */
const keySetUnavailable = (error: unknown): boolean =>
  error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid ||
  !(error instanceof errors.JOSEError) || error.code === errors.JOSEError.code

type Verifier = Parameters<typeof jwtVerify>[1]

const claimString = (payload: JWTPayload, name: string): string | undefined => {
  const value = payload[name]
  return typeof value === "string" ? value : undefined
}

export class WorkflowCredentials extends Context.Service<WorkflowCredentials, {
  readonly exchange: (
    input: OidcExchangeInput
  ) => Effect.Effect<WorkflowCredential, Unauthenticated | ProviderUnavailable>
  /** The simulator issuer's public keys (404 outside development and test). */
  readonly devJwks: Effect.Effect<JSONWebKeySet, NotFound>
  /** A JWT from the simulator issuer with `iss`, `aud`, `iat`, `nbf`, `exp` filled in unless given. */
  readonly devToken: (input: DevOidcTokenInput) => Effect.Effect<{ readonly token: string }, NotFound>
}>()("@cp/server/WorkflowCredentials") {
  static readonly layer = Layer.effect(
    WorkflowCredentials,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const { signingKey } = yield* ServerKeys
      const projects = yield* ProjectsRepo
      const links = yield* CliLinksRepo
      const tx = yield* Transactor
      const local = AppConfig.isLocal(config)

      // The simulator's key pair, kept in the database so every process on one database signs and verifies alike.
      const dev = local
        ? yield* Effect.map(
          (yield* ServerSecretsRepo).getOrCreate("dev_oidc_private_jwk", () =>
            JSON.stringify(
              generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" })
            )),
          (stored) => {
            const jwk: JsonWebKey = JSON.parse(stored)
            const privateKey = createPrivateKey({ key: jwk, format: "jwk" })
            const { x = "", y = "" } = createPublicKey(privateKey).export({ format: "jwk" })
            const kid = sha256Hex(`${x}.${y}`).slice(0, 16)
            const jwks: JSONWebKeySet = { keys: [{ kty: "EC", crv: "P-256", x, y, kid, alg: "ES256", use: "sig" }] }
            const issuer: OidcIssuer = {
              issuer: `${config.publicBaseUrl}/dev/oidc`,
              jwksUrl: `${config.publicBaseUrl}/dev/oidc/jwks`,
              audience: config.publicBaseUrl
            }
            return { privateKey, kid, jwks, issuer, verifier: createLocalJWKSet(jwks) }
          }
        )
        : undefined

      const issuers: ReadonlyArray<{ readonly issuer: OidcIssuer; readonly verifier: Verifier }> = [
        ...config.ciOidcIssuers.map((issuer) => ({
          issuer,
          verifier: createRemoteJWKSet(new URL(issuer.jwksUrl), {
            cooldownDuration: JWKS_COOLDOWN_MS,
            timeoutDuration: JWKS_TIMEOUT_MS
          })
        })),
        ...(dev === undefined ? [] : [{ issuer: dev.issuer, verifier: dev.verifier }])
      ]

      const verify = (token: string, trusted: { readonly issuer: OidcIssuer; readonly verifier: Verifier }) =>
        Effect.tryPromise({
          try: () =>
            jwtVerify(token, trusted.verifier, {
              issuer: trusted.issuer.issuer,
              audience: trusted.issuer.audience
            }),
          catch: (error) =>
            keySetUnavailable(error)
              ? wireError(ProviderUnavailable, "The issuer's key set could not be fetched", {
                issuer: trusted.issuer.issuer
              })
              : error instanceof errors.JWTExpired
              ? refused("expired", "The token has expired")
              : error instanceof errors.JWTClaimValidationFailed && error.claim === "nbf"
              ? refused("expired", "The token is not valid yet")
              : refused("signature", "The token does not verify against the issuer's keys and audience")
        })

      const notFound = () => wireError(NotFound, "No route matches this path")

      return WorkflowCredentials.of({
        exchange: Effect.fn("WorkflowCredentials.exchange")(function*(input) {
          let unverified: JWTPayload
          try {
            unverified = decodeJwt(input.token)
          } catch {
            return yield* refused("signature", "The token is not a JWT")
          }
          const trusted = issuers.find((candidate) => candidate.issuer.issuer === unverified.iss)
          if (trusted === undefined) return yield* refused("issuer_not_trusted", "The token's issuer is not trusted")
          const { payload } = yield* verify(input.token, trusted)
          const now = yield* currentDate
          const repository = claimString(payload, "repository")?.toLowerCase()
          const project = yield* projects.findById({ orgId: input.orgId, projectId: input.projectId })
          const noLink = () => refused("no_link", "No OIDC-enabled link of this project names the token's repository")
          if (Option.isNone(project) || project.value.status !== "active" || repository === undefined) {
            return yield* noLink()
          }
          const candidates = (yield* links.listActive({ orgId: input.orgId, projectId: input.projectId })).filter(
            (link) => {
              const remote = canonicalRemote(link.remoteUrl)
              return link.ciSettings.oidcEnabled && typeof remote !== "string" &&
                remote.path.toLowerCase() === repository
            }
          )
          if (candidates.length === 0) return yield* noLink()
          const ref = claimString(payload, "ref") ?? ""
          const byRef = candidates.filter((link) => globMatches(link.ciSettings.allowedRefPattern, ref))
          if (byRef.length === 0) return yield* refused("ref_not_allowed", "The token's ref is not allowed")
          const environment = claimString(payload, "environment")
          const link = byRef.find((candidate) =>
            environment === undefined || candidate.ciSettings.allowedEnvironments.length === 0 ||
            candidate.ciSettings.allowedEnvironments.includes(environment)
          )
          if (link === undefined) {
            return yield* refused("environment_not_allowed", "The token's environment is not allowed")
          }
          const cap = now.getTime() + WORKFLOW_TOKEN_MAX_MS
          const expiresAt = new Date(payload.exp === undefined ? cap : Math.min(cap, payload.exp * 1000))
          const actor: Actor & { readonly kind: "workflow" } = {
            kind: "workflow",
            subject: payload.sub ?? `repo:${repository}`,
            orgId: input.orgId,
            projectId: input.projectId
          }
          yield* tx.withTransaction(links.save({ ...link, lastSeenAt: now }))
          return { token: signWorkflowToken(signingKey, actor, expiresAt), tokenType: "Bearer", expiresAt, actor }
        }),

        devJwks: dev === undefined ? Effect.fail(notFound()) : Effect.succeed(dev.jwks),

        devToken: (input) =>
          dev === undefined ? Effect.fail(notFound()) : Effect.gen(function*() {
            const now = Math.floor((yield* currentDate).getTime() / 1000)
            const claims = {
              iss: dev.issuer.issuer,
              aud: dev.issuer.audience,
              iat: now,
              nbf: now,
              exp: now + (input.expiresInSeconds ?? 300),
              ...input.claims
            }
            const token = yield* Effect.promise(() =>
              new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: dev.kid, typ: "JWT" }).sign(dev.privateKey)
            )
            return { token }
          })
      })
    })
  )
}
