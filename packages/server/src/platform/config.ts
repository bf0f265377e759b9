/** Everything the server reads from its environment, parsed once at start-up (contract §1 and §3). */
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"

export const AppEnv = Schema.Literals(["development", "test", "production"])
export type AppEnv = typeof AppEnv.Type

/** One generic OAuth2/OIDC sign-in provider, configured by `OAUTH_<NAME>_*`. */
export interface OAuthProviderConfig {
  readonly id: string
  readonly name: string
  readonly clientId: string
  readonly clientSecret: Redacted.Redacted
  readonly authorizeUrl: string
  readonly tokenUrl: string
  readonly userinfoUrl: string
}

/** One platform row of `AGENT_PLATFORM_PROVIDERS` (integrations-agents.md §4). */
export const AgentPlatformProvider = Schema.Struct({
  provider: Schema.Literals(["anthropic", "openai", "gemini", "modal"]),
  slug: Schema.String.check(Schema.isPattern(/^[a-z0-9][a-z0-9-]{0,62}$/)),
  defaultModel: Schema.optionalKey(Schema.String),
  baseUrl: Schema.optionalKey(Schema.String)
})
export type AgentPlatformProvider = typeof AgentPlatformProvider.Type

/** Development/test: one `default` row each for anthropic and openai. */
const DEV_PLATFORM_PROVIDERS: ReadonlyArray<AgentPlatformProvider> = [
  { provider: "anthropic", slug: "default" },
  { provider: "openai", slug: "default" }
]

export interface AppConfigShape {
  readonly env: AppEnv
  readonly host: string
  readonly port: number
  readonly publicBaseUrl: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  readonly smtpUrl: Option.Option<Redacted.Redacted>
  readonly mailFrom: string
  readonly secretsKek: Option.Option<Redacted.Redacted>
  /**
   * Earlier KEKs (`SECRETS_KEK_PREVIOUS`, comma-separated base64), accepted for reads until a rotation has re-wrapped
   * everything under `SECRETS_KEK`.
   */
  readonly previousKeks: ReadonlyArray<Redacted.Redacted>
  /** Emails of the operators who may call the admin routes (`PLATFORM_ADMIN_EMAILS`, comma-separated). */
  readonly platformAdminEmails: ReadonlyArray<string>
  /** `AGENT_<PROVIDER>_BASE_URL` by provider; unset means the public API (production) or the simulator. */
  readonly agentBaseUrls: Readonly<Record<string, string>>
  /** `AGENT_PLATFORM_PROVIDERS`. */
  readonly agentPlatformProviders: ReadonlyArray<AgentPlatformProvider>
  /** How long a provider call may take before it counts as unreachable (`AGENT_PROVIDER_TIMEOUT_MS`, 10 000). */
  readonly agentProviderTimeoutMs: number
  readonly tokenSigningKey: Option.Option<Redacted.Redacted>
  readonly oauthProviders: ReadonlyArray<OAuthProviderConfig>
  readonly otlpEndpoint: Option.Option<string>
  /** Days an environment may stay unused before the idle sweep archives it (`ENVIRONMENT_RETENTION_DAYS`). */
  readonly environmentRetentionDays: number
  /** Webhook URLs may resolve to loopback, private, link-local, CGNAT or multicast addresses (`=1`; off by default). */
  readonly webhookAllowPrivateNetworks: boolean
  /** PEM file of extra CAs outbound webhook HTTPS trusts (`NODE_EXTRA_CA_CERTS`, read as Node reads it). */
  readonly webhookExtraCaCerts: Option.Option<string>
  /** Run the webhook delivery worker in this process (`WEBHOOK_WORKER=0` turns it off; default on). */
  readonly webhookWorker: boolean
  /** The source host's web host (`SCMHOST_WEB_HOST`): links to it have provider `scmhost`, others `git`. */
  readonly scmhostWebHost: string
  /** CI OIDC issuers trusted by the workflow-credential exchange (`CI_OIDC_ISSUERS`, a JSON array). */
  readonly ciOidcIssuers: ReadonlyArray<OidcIssuer>
  /** `BILLPROV_API_URL`: the billing provider's API; unset, dev/test use the simulator and production has none. */
  readonly billprovApiUrl: Option.Option<string>
  readonly billprovApiKey: Redacted.Redacted
  /** `BILLPROV_WEBHOOK_SECRET` (`whsec_` + base64); unset in production, every inbound billing webhook fails closed. */
  readonly billprovWebhookSecret: Option.Option<Redacted.Redacted>
  /** `BILLPROV_TIMEOUT_MS`: how long one provider call may take (metering-billing.md §6: 10 s). */
  readonly billprovTimeoutMs: number
  /** The source-control app (integrations-agents.md §1); None: the simulator (development/test) or not configured. */
  readonly scmhostApp: Option.Option<ScmhostAppConfig>
  /** `SCMHOST_WEB_URL`: where people install the app; unset: the simulator's pages (development/test). */
  readonly scmhostWebUrl: Option.Option<string>
  /** `SCMHOST_WEBHOOK_SECRET`: the HMAC key of `x-hub-signature-256` (development/test default in contract §3). */
  readonly scmhostWebhookSecret: Option.Option<Redacted.Redacted>
  /** Further integration providers by name; development/test adds the simulated `dbhost`. */
  readonly integrationProviders: ReadonlyArray<IntegrationProviderConfig>
  /** Objects used more recently than this many seconds are never collected (`GC_GRACE_SECONDS`, default 86400). */
  readonly gcGraceSeconds: number
}

/** A further integration provider (`INTEGRATION_<NAME>_*`, integrations-agents.md §2). */
export interface IntegrationProviderConfig {
  readonly name: string
  /** `_API_URL`; None: this server's simulator (the development/test `dbhost`). */
  readonly apiUrl: Option.Option<string>
  /** `_CUSTODY=1`: pasted tokens may be held in custody. */
  readonly custody: boolean
}

const INTEGRATION_API_URL = /^INTEGRATION_([A-Z0-9]+)_API_URL$/

const integrationProviders = (env: Env, local: boolean): ReadonlyArray<IntegrationProviderConfig> => {
  const configured = Object.keys(env).flatMap((key) => {
    const name = INTEGRATION_API_URL.exec(key)?.[1]
    const apiUrl = name === undefined ? Option.none() : nonEmpty(env, key)
    if (name === undefined || Option.isNone(apiUrl)) return []
    return [{
      name: name.toLowerCase(),
      apiUrl: Option.some(apiUrl.value.replace(/\/+$/, "")),
      custody: env[`INTEGRATION_${name}_CUSTODY`] === "1"
    }]
  })
  const dbhost = { name: "dbhost", apiUrl: Option.none(), custody: true }
  return local && !configured.some((provider) => provider.name === "dbhost") ? [...configured, dbhost] : configured
}

/** The configured source-control app: `SCMHOST_API_URL`, `SCMHOST_APP_ID`, `SCMHOST_APP_PRIVATE_KEY`, `…_SLUG`. */
export interface ScmhostAppConfig {
  readonly apiUrl: string
  readonly appId: string
  readonly privateKey: Redacted.Redacted
  readonly slug: string
}

/** The development/test webhook secret of contract §3. */
export const DEV_SCMHOST_WEBHOOK_SECRET = "dev-scmhost-webhook-secret"

/** A trusted CI OIDC issuer: tokens must carry this `iss` and `aud` and verify against the JWKS. */
export interface OidcIssuer {
  readonly issuer: string
  readonly jwksUrl: string
  readonly audience: string
}

const OidcIssuers = Schema.fromJsonString(Schema.Array(Schema.Struct({
  issuer: Schema.String.check(Schema.isMinLength(1)),
  jwksUrl: Schema.String.check(Schema.isMinLength(1)),
  audience: Schema.String.check(Schema.isMinLength(1))
})))

export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  message: Schema.String
}) {}

type Env = Readonly<Record<string, string | undefined>>

const nonEmpty = (env: Env, name: string): Option.Option<string> => {
  const value = env[name]?.trim()
  return value === undefined || value === "" ? Option.none() : Option.some(value)
}

const OAUTH_CLIENT_ID = /^OAUTH_([A-Z0-9_]+)_CLIENT_ID$/

const oauthProviders = (env: Env): ReadonlyArray<OAuthProviderConfig> =>
  Object.keys(env).flatMap((key) => {
    const name = OAUTH_CLIENT_ID.exec(key)?.[1]
    if (name === undefined) return []
    const read = (suffix: string) => nonEmpty(env, `OAUTH_${name}_${suffix}`)
    const parts = Option.all({
      clientId: read("CLIENT_ID"),
      clientSecret: read("CLIENT_SECRET"),
      authorizeUrl: read("AUTHORIZE_URL"),
      tokenUrl: read("TOKEN_URL"),
      userinfoUrl: read("USERINFO_URL")
    })
    if (Option.isNone(parts)) return []
    const id = name.toLowerCase()
    return [{
      id,
      name: id.charAt(0).toUpperCase() + id.slice(1),
      ...parts.value,
      clientSecret: Redacted.make(parts.value.clientSecret)
    }]
  }).sort((a, b) => a.id.localeCompare(b.id))

/** The development and test webhook secret of the billing simulator (contract §3). */
export const DEV_BILLPROV_WEBHOOK_SECRET = "whsec_ZGV2LWJpbGxwcm92LXdlYmhvb2stc2VjcmV0LTAwMDA="
/** The key the client sends when `BILLPROV_API_KEY` is unset (the simulator takes any bearer key). */
const DEV_BILLPROV_API_KEY = "billprov_dev_key"

/** Parses an environment; `production` requires its keys (contract §3). */
export const parseConfig = (env: Env): Effect.Effect<AppConfigShape, ConfigError> =>
  Effect.gen(function*() {
    const appEnv = yield* Schema.decodeUnknownEffect(AppEnv)(env.APP_ENV ?? "production").pipe(
      Effect.mapError(() => new ConfigError({ message: `APP_ENV must be development, test or production` }))
    )
    const host = nonEmpty(env, "HOST").pipe(Option.getOrElse(() => "127.0.0.1"))
    const port = Number(nonEmpty(env, "PORT").pipe(Option.getOrElse(() => "8080")))
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      return yield* new ConfigError({ message: "PORT must be an integer from 0 to 65535" })
    }
    const environmentRetentionDays = Number(
      nonEmpty(env, "ENVIRONMENT_RETENTION_DAYS").pipe(Option.getOrElse(() => "30"))
    )
    if (!Number.isInteger(environmentRetentionDays) || environmentRetentionDays < 1) {
      return yield* new ConfigError({ message: "ENVIRONMENT_RETENTION_DAYS must be a positive integer" })
    }
    const gcGraceSeconds = Number(nonEmpty(env, "GC_GRACE_SECONDS").pipe(Option.getOrElse(() => "86400")))
    if (!Number.isInteger(gcGraceSeconds) || gcGraceSeconds < 0) {
      return yield* new ConfigError({ message: "GC_GRACE_SECONDS must be a non-negative integer" })
    }
    const ciOidcIssuers = yield* Schema.decodeUnknownEffect(OidcIssuers)(
      nonEmpty(env, "CI_OIDC_ISSUERS").pipe(Option.getOrElse(() => "[]"))
    ).pipe(
      Effect.mapError(() =>
        new ConfigError({ message: "CI_OIDC_ISSUERS must be a JSON array of { issuer, jwksUrl, audience }" })
      )
    )
    const secretsKek = Option.map(nonEmpty(env, "SECRETS_KEK"), Redacted.make)
    const agentProviderTimeoutMs = Number(
      nonEmpty(env, "AGENT_PROVIDER_TIMEOUT_MS").pipe(Option.getOrElse(() => "10000"))
    )
    if (!Number.isInteger(agentProviderTimeoutMs) || agentProviderTimeoutMs < 1) {
      return yield* new ConfigError({ message: "AGENT_PROVIDER_TIMEOUT_MS must be a positive integer" })
    }
    const agentPlatformProviders = yield* Option.match(nonEmpty(env, "AGENT_PLATFORM_PROVIDERS"), {
      onNone: () => Effect.succeed(appEnv === "production" ? [] : DEV_PLATFORM_PROVIDERS),
      onSome: (json) =>
        Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Array(AgentPlatformProvider)))(json).pipe(
          Effect.mapError(() =>
            new ConfigError({
              message: "AGENT_PLATFORM_PROVIDERS must be a JSON array of { provider, slug, defaultModel?, baseUrl? }"
            })
          )
        )
    })
    const agentBaseUrls = Object.fromEntries(
      ["anthropic", "openai", "gemini", "modal"].flatMap((provider) =>
        Option.match(nonEmpty(env, `AGENT_${provider.toUpperCase()}_BASE_URL`), {
          onNone: () => [],
          onSome: (url) => [[provider, url.replace(/\/+$/, "")]]
        })
      )
    )
    const list = (name: string) =>
      nonEmpty(env, name).pipe(
        Option.map((value) => value.split(",").map((part) => part.trim()).filter((part) => part !== "")),
        Option.getOrElse((): ReadonlyArray<string> => [])
      )
    const tokenSigningKey = Option.map(nonEmpty(env, "TOKEN_SIGNING_KEY"), Redacted.make)
    const billprovTimeoutMs = Number(nonEmpty(env, "BILLPROV_TIMEOUT_MS").pipe(Option.getOrElse(() => "10000")))
    if (!Number.isInteger(billprovTimeoutMs) || billprovTimeoutMs < 1) {
      return yield* new ConfigError({ message: "BILLPROV_TIMEOUT_MS must be a positive integer" })
    }
    if (appEnv === "production") {
      const missing = [
        Option.isNone(secretsKek) ? "SECRETS_KEK" : undefined,
        Option.isNone(tokenSigningKey) ? "TOKEN_SIGNING_KEY" : undefined
      ].filter((name) => name !== undefined)
      if (missing.length > 0) {
        return yield* new ConfigError({ message: `production mode requires ${missing.join(" and ")} to be set` })
      }
    }
    return {
      env: appEnv,
      host,
      port,
      publicBaseUrl: nonEmpty(env, "PUBLIC_BASE_URL").pipe(
        Option.map((url) => url.replace(/\/+$/, "")),
        Option.getOrElse(() => `http://${host.includes(":") ? `[${host}]` : host}:${port}`)
      ),
      databaseUrl: Option.map(nonEmpty(env, "DATABASE_URL"), Redacted.make),
      dataDir: nonEmpty(env, "DATA_DIR").pipe(Option.getOrElse(() => "./.data")),
      smtpUrl: Option.map(nonEmpty(env, "SMTP_URL"), Redacted.make),
      mailFrom: nonEmpty(env, "MAIL_FROM").pipe(Option.getOrElse(() => "Control Plane <no-reply@localhost>")),
      secretsKek,
      previousKeks: list("SECRETS_KEK_PREVIOUS").map((value) => Redacted.make(value)),
      platformAdminEmails: list("PLATFORM_ADMIN_EMAILS").map((email) => email.toLowerCase()),
      agentBaseUrls,
      agentPlatformProviders,
      agentProviderTimeoutMs,
      tokenSigningKey,
      oauthProviders: oauthProviders(env),
      otlpEndpoint: nonEmpty(env, "OTEL_EXPORTER_OTLP_ENDPOINT"),
      environmentRetentionDays,
      gcGraceSeconds,
      webhookAllowPrivateNetworks: env.WEBHOOK_ALLOW_PRIVATE_NETWORKS === "1",
      webhookExtraCaCerts: nonEmpty(env, "NODE_EXTRA_CA_CERTS"),
      webhookWorker: env.WEBHOOK_WORKER !== "0",
      scmhostWebHost: nonEmpty(env, "SCMHOST_WEB_HOST").pipe(Option.getOrElse(() => "github.com")).toLowerCase(),
      ciOidcIssuers,
      billprovApiUrl: Option.map(nonEmpty(env, "BILLPROV_API_URL"), (url) => url.replace(/\/+$/, "")),
      billprovApiKey: Redacted.make(
        nonEmpty(env, "BILLPROV_API_KEY").pipe(Option.getOrElse(() => DEV_BILLPROV_API_KEY))
      ),
      billprovWebhookSecret: Option.map(
        nonEmpty(env, "BILLPROV_WEBHOOK_SECRET").pipe(
          Option.orElse(() => appEnv === "production" ? Option.none() : Option.some(DEV_BILLPROV_WEBHOOK_SECRET))
        ),
        Redacted.make
      ),
      billprovTimeoutMs,
      scmhostApp: Option.map(
        Option.all({
          apiUrl: nonEmpty(env, "SCMHOST_API_URL"),
          appId: nonEmpty(env, "SCMHOST_APP_ID"),
          privateKey: nonEmpty(env, "SCMHOST_APP_PRIVATE_KEY"),
          slug: nonEmpty(env, "SCMHOST_APP_SLUG")
        }),
        (app) => ({
          ...app,
          apiUrl: app.apiUrl.replace(/\/+$/, ""),
          // PEM keys pasted into one-line variables keep their line breaks as `\n`.
          privateKey: Redacted.make(app.privateKey.replace(/\\n/g, "\n"))
        })
      ),
      integrationProviders: integrationProviders(env, appEnv !== "production"),
      scmhostWebUrl: Option.map(nonEmpty(env, "SCMHOST_WEB_URL"), (url) => url.replace(/\/+$/, "")),
      scmhostWebhookSecret: Option.map(
        Option.orElse(
          nonEmpty(env, "SCMHOST_WEBHOOK_SECRET"),
          () => appEnv === "production" ? Option.none() : Option.some(DEV_SCMHOST_WEBHOOK_SECRET)
        ),
        Redacted.make
      )
    }
  })

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("@cp/server/AppConfig") {
  static readonly layerFromEnv = (env: Env) => Layer.effect(AppConfig, parseConfig(env))
  /** Development and test keep mail in the outbox and reveal local-debug tokens; production never does. */
  static readonly isLocal = (config: AppConfigShape) => config.env !== "production"
}
