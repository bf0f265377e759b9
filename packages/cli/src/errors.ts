/**
 * How a failed run reads on stderr: the server's own code and message for every wire error, and a
 * local code for what went wrong on this side (input, the credentials file, the connection); and the exit
 * code it ends with: 1 a failure, 2 a usage mistake, 4 not signed in (or a rejected token), 130 interrupted.
 */
import type {
  AlreadyClaimed,
  BadRequest,
  Conflict,
  ContractVersionUnsupported,
  DepsNotReady,
  ErrorDetails,
  Forbidden,
  LeaseLost,
  NotFound,
  ObjectMissing,
  PayloadTooLarge,
  PreconditionFailed,
  ProviderConnectionConflict,
  ProviderUnavailable,
  RateLimited,
  RefConflict,
  RunTerminal,
  ValidationFailed
} from "@cp/domain"
import { Unauthenticated } from "@cp/domain"
import { Cause, Console, Effect, Exit, Schema } from "effect"
import { CliError } from "effect/cli"
import { HttpClientError } from "effect/http"
import { errorLine } from "./output.ts"

/** A failure found before or after the wire (missing input, unreadable credentials), coded like the server's. */
export class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", {
  code: Schema.String,
  message: Schema.String
}) {}

/** The codes of a `CliFailure` that is a usage mistake: the command line itself is wrong or incomplete (exit 2). */
export const usageCodes: ReadonlySet<string> = new Set([
  "usage",
  "invalid_flags",
  "input_required",
  "confirmation_required"
])

/** A usage mistake the CLI parser cannot see (two flags that go together, a confirmation without a terminal). */
export const usageError = (message: string, code = "usage") => new CliFailure({ code, message })

/** The wire errors the commands' endpoints declare; each carries the server's `{ code, message, details }`. */
export type WireError =
  | AlreadyClaimed
  | ContractVersionUnsupported
  | DepsNotReady
  | LeaseLost
  | ObjectMissing
  | PayloadTooLarge
  | RunTerminal
  | BadRequest
  | Conflict
  | Forbidden
  | NotFound
  | ObjectMissing
  | RefConflict
  | PreconditionFailed
  | ProviderConnectionConflict
  | ProviderUnavailable
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
  confirmation_required: "pass --yes to confirm without a terminal",
  credentials_file: "fix the file's permissions, or remove it and sign in again with `cpctl login`",
  connection_failed: "is the server running? Point cpctl at it with --base-url or CP_BASE_URL"
}

/**
 * The command-line spelling of a request field a validation error names: the API's `secretKey` is the `<key>`
 * argument, `valueType` the `--type` flag, and any other field its kebab-case flag (`expiresAt` → `--expires-at`).
 */
const fieldSpellings: Readonly<Record<string, string>> = {
  key: "<key>",
  secretKey: "<key>",
  value: "<value>",
  name: "<name>",
  label: "<label>",
  email: "<email>",
  valueType: "--type",
  overridable: "--locked",
  projectId: "--project",
  environmentId: "--environment",
  subjectId: "--subject",
  teamId: "--team",
  scope: "--all-scopes",
  scopeRef: "--project",
  scopeKind: "--scope"
}

/** The flag or argument a request field (`payload.expiresAt`, `query.limit`, `limit`) is given with. */
export const flagOfField = (field: string): string => {
  const name = field.replace(/^(payload|query|path|params|body)\./, "")
  return fieldSpellings[name] ?? `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
}

const FieldErrors = Schema.Struct({ fields: Schema.Record(Schema.String, Schema.Array(Schema.String)) })

/** `details.fields` of a `validation_failed` renamed to the flags and arguments that carry those fields. */
const namingFlags = (code: string, details: ErrorDetails): ErrorDetails => {
  if (code !== "validation_failed") return details
  const decoded = Schema.decodeUnknownOption(FieldErrors)(details)
  if (decoded._tag === "None") return details
  return {
    ...details,
    fields: Object.fromEntries(
      Object.entries(decoded.value.fields).map(([field, messages]) => [flagOfField(field), messages])
    )
  }
}

const reportLines = ({ code, message, details: wireDetails }: Report): ReadonlyArray<string> => {
  const hint = hints[code]
  const details = wireDetails === undefined ? undefined : namingFlags(code, wireDetails)
  return [
    errorLine(code, message),
    ...(details !== undefined && Object.keys(details).length > 0 ? [`details: ${JSON.stringify(details)}`] : []),
    ...(hint === undefined ? [] : [`hint: ${hint}`])
  ]
}

/**
 * Prints why a run failed, one `error <code>: <message>` line (plus details or a hint) and never a stack
 * trace. Parse errors are skipped: the CLI runner has already printed them with the help text.
 */
export const reportFailure = (cause: Cause.Cause<CpctlError>): Effect.Effect<void> => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.void
  const error = Cause.findErrorOption(cause)
  if (error._tag === "None") {
    return Console.error(errorLine("internal", `cpctl failed unexpectedly: ${String(Cause.squash(cause))}`))
  }
  if (CliError.isCliError(error.value)) {
    return error.value._tag === "ShowHelp" ? Effect.void : Console.error(errorLine("usage", error.value.message))
  }
  return Effect.flatMap(
    reportError(error.value),
    (report) => Console.error(reportLines(report).join("\n"))
  )
}

/** Exit codes: 0 done, 1 a failure, 2 a usage mistake, 4 not signed in or a token the server rejects. */
export const ExitCode = { ok: 0, failure: 1, usage: 2, auth: 4, interrupted: 130 } as const

/** The exit code of a failed run's cause. Help asked for (no parse error) exits 0. */
export const exitCodeOf = (cause: Cause.Cause<unknown>): number => {
  if (Cause.hasInterruptsOnly(cause)) return ExitCode.interrupted
  const error = Cause.findErrorOption(cause)
  if (error._tag === "None") return ExitCode.failure
  const value = error.value
  if (CliError.isCliError(value)) {
    return value._tag === "ShowHelp" && value.errors.length === 0 ? ExitCode.ok : ExitCode.usage
  }
  if (value instanceof CliFailure) return usageCodes.has(value.code) ? ExitCode.usage : ExitCode.failure
  if (value instanceof Unauthenticated) return ExitCode.auth
  if (value instanceof HttpClientError.HttpClientError && value.response?.status === 401) return ExitCode.auth
  return ExitCode.failure
}

/** The process exit code of a finished run. */
export const exitCodeOfExit = (exit: Exit.Exit<unknown, unknown>): number =>
  Exit.isSuccess(exit) ? ExitCode.ok : exitCodeOf(exit.cause)
