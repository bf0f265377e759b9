/**
 * The typed client derived from `ControlPlaneApi`, bound to the server and bearer token this run resolves
 * from `--base-url`/`--token`, then `CP_BASE_URL`/`CP_TOKEN`, then the credentials file. Every request names
 * cpctl and its version in `User-Agent`, and carries no `traceparent`: cpctl exports no spans, so a trace id it
 * sent would point at a parent no collector ever sees.
 */
import { ControlPlaneApi, layerBearerClient } from "@cp/domain"
import { Config, Context, Effect, Layer, Option } from "effect"
import { Command, Flag, GlobalFlag } from "effect/cli"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { CredentialsStore, DefaultsStore } from "./credentials.ts"
import { USER_AGENT } from "./version.ts"

/** Where requests go when neither a flag, the environment nor the credentials file says. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080"

/** `--base-url`, accepted anywhere on the command line. */
export const BaseUrlFlag = GlobalFlag.Setting("base-url")({
  flag: Flag.String("base-url").pipe(
    Flag.withDescription(`Server URL (else $CP_BASE_URL, the credentials file, ${DEFAULT_BASE_URL})`),
    Flag.optional
  )
})

/** `--token`, accepted anywhere on the command line. */
export const TokenFlag = GlobalFlag.Setting("token")({
  flag: Flag.String("token").pipe(
    Flag.withDescription("Bearer token (else $CP_TOKEN, else the one `cpctl login` stored)"),
    Flag.optional
  )
})

/** The server a run talks to and the bearer token it sends, if any. */
export interface Connection {
  readonly baseUrl: string
  readonly token: Option.Option<string>
}

const Environment = Config.all({
  baseUrl: Config.option(Config.String("CP_BASE_URL")),
  token: Config.option(Config.String("CP_TOKEN"))
})

const withoutTrailingSlash = (url: string) => url.replace(/\/+$/, "")

/**
 * Each of base URL and token comes from its flag, else the environment, else the credentials file (read
 * only when needed). A stored token is sent only to the server that issued it.
 */
export const resolveConnection = Effect.fnUntraced(function*(flags: {
  readonly baseUrl: Option.Option<string>
  readonly token: Option.Option<string>
}) {
  const env = yield* Effect.orDie(Environment)
  const stored = yield* Effect.cached((yield* CredentialsStore).load)
  const firstOf = <A, E, R>(
    flag: Option.Option<A>,
    fromEnv: Option.Option<A>,
    fromFile: Effect.Effect<Option.Option<A>, E, R>
  ) => Option.isSome(flag) ? Effect.succeed(flag) : Option.isSome(fromEnv) ? Effect.succeed(fromEnv) : fromFile

  const baseUrl = withoutTrailingSlash(Option.getOrElse(
    yield* firstOf(flags.baseUrl, env.baseUrl, Effect.map(stored, Option.map((credentials) => credentials.baseUrl))),
    () => DEFAULT_BASE_URL
  ))
  const token = yield* firstOf(
    flags.token,
    env.token,
    Effect.map(
      stored,
      Option.flatMap((credentials) =>
        withoutTrailingSlash(credentials.baseUrl) === baseUrl ? Option.some(credentials.token) : Option.none()
      )
    )
  )
  return { baseUrl, token } satisfies Connection
})

/** The client of the whole `ControlPlaneApi` and the connection it uses. */
export class ControlPlaneClient extends Context.Service<ControlPlaneClient, {
  readonly connection: Connection
  readonly api: HttpApiClient.ForApi<typeof ControlPlaneApi>
}>()("@cp/cli/ControlPlaneClient") {
  static readonly layer = Layer.effect(
    ControlPlaneClient,
    Effect.gen(function*() {
      const connection = yield* resolveConnection({ baseUrl: yield* BaseUrlFlag, token: yield* TokenFlag })
      const api = yield* HttpApiClient.make(ControlPlaneApi, {
        baseUrl: connection.baseUrl,
        transformClient: HttpClient.mapRequest(HttpClientRequest.setHeader("user-agent", USER_AGENT))
      }).pipe(
        Effect.provide(layerBearerClient((request) =>
          Option.match(connection.token, {
            onNone: () => request,
            onSome: (token) => HttpClientRequest.bearerToken(request, token)
          })
        ))
      )
      return ControlPlaneClient.of({ connection, api })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}

/**
 * Gives a command the client and the config directory's stores, built only when that command runs (never for
 * help). The client's requests carry no `traceparent` (see the module comment).
 */
export const withClient = <const Name extends string, Input, ContextInput, E, R>(
  command: Command.Command<Name, Input, ContextInput, E, R>
) =>
  Command.provide(
    command,
    Layer.mergeAll(
      Layer.provideMerge(ControlPlaneClient.layer, CredentialsStore.layer),
      DefaultsStore.layer,
      Layer.succeed(HttpClient.TracerPropagationEnabled, false)
    )
  )
