/**
 * How a failed run reads on stderr: the server's own code and message for every wire error, and a
 * local code for what went wrong on this side (input, the credentials file, the connection).
 */
import type {
  BadRequest,
  Conflict,
  ErrorDetails,
  Forbidden,
  NotFound,
  PreconditionFailed,
  RateLimited,
  Unauthenticated,
  ValidationFailed
} from "@cp/domain"
import { Cause, Console, Effect, Schema } from "effect"
import { CliError } from "effect/cli"
import { HttpClientError } from "effect/http"
import { errorLine } from "./output.ts"

/** A failure found before or after the wire (missing input, unreadable credentials), coded like the server's. */
export class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", {
  code: Schema.String,
  message: Schema.String
}) {}

/** The wire errors the commands' endpoints declare; each carries the server's `{ code, message, details }`. */
export type WireError =
  | BadRequest
  | Conflict
  | Forbidden
  | NotFound
  | PreconditionFailed
  | RateLimited
  | Unauthenticated
  | ValidationFailed

/** Every way a cpctl run can fail; `main.ts` checks at compile time that the command tree fails with no other. */
export type CpctlError =
  | WireError
  | CliFailure
  | CliError.CliError
  | HttpClientError.HttpClientError
  | Schema.SchemaError

interface Report {
  readonly code: string
  readonly message: string
  readonly details?: ErrorDetails
}

/** An undeclared status (a 500, a proxy's 502) still usually carries the wire's error body. */
const WireErrorBody = Schema.Struct({
  error: Schema.Struct({ code: Schema.String, message: Schema.String })
})

/** The innermost message of a `cause` chain: "connect ECONNREFUSED 127.0.0.1:8080" rather than "fetch failed". */
const rootMessage = (cause: unknown, outer: string): string =>
  cause instanceof Error ? rootMessage(cause.cause, cause.message) : outer

const reportHttpError = (error: HttpClientError.HttpClientError): Effect.Effect<Report> => {
  const response = error.response
  if (response === undefined) {
    return Effect.succeed({
      code: "connection_failed",
      message: `${error.request.method} ${error.request.url}: ${rootMessage(error.cause, error.message)}`
    })
  }
  return response.json.pipe(
    Effect.flatMap(Schema.decodeUnknownEffect(WireErrorBody)),
    Effect.map(({ error }) => error),
    Effect.orElseSucceed(() => ({ code: `http_${response.status}`, message: error.message }))
  )
}

const reportError = (error: Exclude<CpctlError, CliError.CliError>): Effect.Effect<Report> => {
  if (error instanceof CliFailure) return Effect.succeed({ code: error.code, message: error.message })
  if (error instanceof HttpClientError.HttpClientError) return reportHttpError(error)
  if (Schema.isSchemaError(error)) return Effect.succeed({ code: "invalid_data", message: error.message })
  return Effect.succeed(error.error)
}

const hints: Readonly<Record<string, string>> = {
  unauthenticated: "sign in with `cpctl login`",
  credentials_file: "fix the file's permissions, or remove it and sign in again with `cpctl login`",
  connection_failed: "is the server running? Point cpctl at it with --base-url or CP_BASE_URL"
}

const reportLines = ({ code, message, details }: Report): ReadonlyArray<string> => {
  const hint = hints[code]
  return [
    errorLine(code, message),
    ...(details !== undefined && Object.keys(details).length > 0 ? [`details: ${JSON.stringify(details)}`] : []),
    ...(hint === undefined ? [] : [`hint: ${hint}`])
  ]
}

/**
 * Prints why a run failed, one `error <code>: <message>` line (plus details or a hint) and never a stack
 * trace. Usage errors are skipped: the CLI runner has already printed them with the help text.
 */
export const reportFailure = (cause: Cause.Cause<CpctlError>): Effect.Effect<void> => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.void
  const error = Cause.findErrorOption(cause)
  if (error._tag === "None") {
    return Console.error(errorLine("internal", `cpctl failed unexpectedly: ${String(Cause.squash(cause))}`))
  }
  if (CliError.isCliError(error.value)) return Effect.void
  return Effect.flatMap(
    reportError(error.value),
    (report) => Console.error(reportLines(report).join("\n"))
  )
}
