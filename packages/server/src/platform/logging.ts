/**
 * Log output: `LOG_FORMAT=json` (the production default) writes one JSON object per line, with every annotation as a
 * field, and one access line per request; `pretty` (the default in development and test) writes Effect's readable
 * lines and no access lines. Either way a 5xx is logged once, at error level, with its request id, route and cause.
 */
import { Context, Effect, Layer, Logger, type LogLevel, Schema } from "effect"
import { type AppEnv, ConfigError } from "./config.ts"

export const LogFormat = Schema.Literals(["json", "pretty"])
export type LogFormat = typeof LogFormat.Type

/** `LOG_FORMAT` when set (json or pretty); otherwise json in production and pretty elsewhere. */
export const logFormatOf = (
  env: Readonly<Record<string, string | undefined>>,
  appEnv: AppEnv
): Effect.Effect<LogFormat, ConfigError> => {
  const given = env["LOG_FORMAT"]?.trim()
  if (given === undefined || given === "") return Effect.succeed(appEnv === "production" ? "json" : "pretty")
  return Schema.decodeUnknownEffect(LogFormat)(given).pipe(
    Effect.mapError(() => new ConfigError({ message: "LOG_FORMAT must be json or pretty" }))
  )
}

/** The level of the per-request access line; none (no line below 500) unless the JSON format asks for them. */
export const AccessLogLevel = Context.Reference<LogLevel.Severity | undefined>("@cp/server/AccessLogLevel", {
  defaultValue: () => undefined
})

/** The loggers for a format: JSON lines plus access lines at info level, or the default pretty logger. */
export const LoggingLive = (format: LogFormat): Layer.Layer<never> =>
  format === "json"
    ? Layer.merge(Logger.layer([Logger.consoleJson]), Layer.succeed(AccessLogLevel)("Info"))
    : Layer.empty

/** What the access line of one request says (contract: request id, method, route, status, duration, caller). */
export interface AccessEntry {
  readonly requestId: string
  readonly method: string
  /** The route's template (`/v1/organizations/:orgId/projects`), or the path when no route matches. */
  readonly route: string
  readonly status: number
  readonly durationMs: number
  readonly workspace: string | null
  readonly actorKind: string
}

/**
 * The one line a request logs: at the access level, or at error level with the cause for a 5xx (so a server error is
 * logged once, with its request id and route, whatever the format).
 */
export const logAccess = (status: number, entry: () => AccessEntry, cause: unknown) =>
  Effect.flatMap(Effect.service(AccessLogLevel), (level) => {
    if (status < 500 && level === undefined) return Effect.void
    const line = status >= 500
      ? Effect.logError("request failed", ...(cause === undefined ? [] : [cause]))
      : Effect.logWithLevel(level)("request")
    return Effect.annotateLogs(line, { ...entry() })
  })
