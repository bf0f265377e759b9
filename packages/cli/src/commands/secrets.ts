/**
 * Secret commands, all with `--workspace <ref>` and, for a project or environment scope, `--project` and
 * `--environment`: `secrets list [--all]`, `secrets set <KEY> [--display-name]`, `secrets rotate <secret>` and
 * `secrets delete <secret>`. `set` and `rotate` read the value from stdin (a pipe or a file) or, on a terminal, from
 * a hidden prompt — never from the command line, where it would land in shell history and process listings.
 */
import { EnvironmentId, PageQuery, ProjectId, type Secret, SecretId, SecretKey } from "@cp/domain"
import { Effect, Option, Redacted } from "effect"
import { Argument, Command, Flag, Prompt, TerminalCapabilities } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import { belowWorkspaceFlags, optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"
import { workspaceFlag } from "./teams.ts"

const secretColumns: Columns<Secret> = {
  id: (secret) => secret.id,
  key: (secret) => secret.secretKey,
  scope: (secret) => secret.scopeKind,
  project: (secret) => secret.projectId,
  environment: (secret) => secret.environmentId,
  version: (secret) => secret.version,
  status: (secret) => secret.status,
  updated: (secret) => secret.updatedAt
}

const scopeFlags = {
  workspace: workspaceFlag,
  ...belowWorkspaceFlags(
    "Project id (prj_…): the project scope, or the project of --environment",
    "Environment id (env_…): the environment scope (needs --project)"
  )
}

type ScopeFlags = {
  readonly workspace: string
  readonly project: Option.Option<ProjectId>
  readonly environment: Option.Option<EnvironmentId>
}

type Scope =
  | { readonly kind: "organization"; readonly orgId: string }
  | { readonly kind: "project"; readonly orgId: string; readonly projectId: ProjectId }
  | {
    readonly kind: "environment"
    readonly orgId: string
    readonly projectId: ProjectId
    readonly environmentId: EnvironmentId
  }

const scopeOf = (flags: ScopeFlags): Effect.Effect<Scope, CliFailure> => {
  if (Option.isSome(flags.environment)) {
    if (Option.isNone(flags.project)) {
      return Effect.fail(new CliFailure({ code: "input_required", message: "--environment needs --project" }))
    }
    return Effect.succeed({
      kind: "environment",
      orgId: flags.workspace,
      projectId: flags.project.value,
      environmentId: flags.environment.value
    })
  }
  if (Option.isSome(flags.project)) {
    return Effect.succeed({ kind: "project", orgId: flags.workspace, projectId: flags.project.value })
  }
  return Effect.succeed({ kind: "organization", orgId: flags.workspace })
}

/** Everything on stdin, less one trailing newline (what `echo` and most editors add). */
const readStdin = Effect.promise(async () => {
  const chunks: Array<Buffer> = []
  for await (const chunk of process.stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "")
})

/** The secret value: a hidden prompt on a terminal, else stdin. Never an argument or a flag. */
const readValue = Effect.gen(function*() {
  const { canPrompt } = yield* TerminalCapabilities.TerminalCapabilities
  const value = canPrompt && process.stdin.isTTY === true
    ? Redacted.value(yield* Prompt.Hidden({ message: "Secret value (input hidden)" }))
    : yield* readStdin
  if (value === "") {
    return yield* new CliFailure({
      code: "input_required",
      message: "the secret value is empty: pipe it on stdin or type it at the prompt"
    })
  }
  return value
})

const secretArgument = Argument.String("secret").pipe(
  Argument.withSchema(SecretId),
  Argument.withDescription("The secret's id (sec_…)")
)

const list = Command.make(
  "list",
  {
    ...scopeFlags,
    all: Flag.Boolean("all").pipe(
      Flag.withDescription("At workspace scope: list workspace, project and environment secrets together")
    ),
    limit: Flag.String("limit").pipe(
      Flag.withSchema(PageQuery.limit.schema),
      Flag.withDescription("Page size, 1 to 100"),
      Flag.optional
    ),
    cursor: Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional)
  },
  Effect.fn("cpctl.secrets.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOf(flags)
    const query = {
      ...optionalKey("limit", flags.limit),
      ...optionalKey("cursor", flags.cursor),
      ...(flags.all ? { scope: "all" } : {})
    }
    const page = scope.kind === "organization"
      ? yield* api.secrets.list({ params: { orgId: scope.orgId }, query })
      : scope.kind === "project"
      ? yield* api.projectSecrets.list({ params: { orgId: scope.orgId, projectId: scope.projectId }, query })
      : yield* api.environmentSecrets.list({ params: scope, query })
    yield* printResult(page, ({ data, cursor }) =>
      cursor === null
        ? renderTable(secretColumns, data.secrets)
        : `${renderTable(secretColumns, data.secrets)}\nMore: --cursor ${cursor}`)
  })
).pipe(Command.withDescription("List secrets (metadata only; values are never shown)"), withClient)

const set = Command.make(
  "set",
  {
    ...scopeFlags,
    key: Argument.String("key").pipe(
      Argument.withSchema(SecretKey),
      Argument.withDescription("Secret key, e.g. DATABASE_URL")
    ),
    displayName: Flag.String("display-name").pipe(
      Flag.withDescription("Display name (defaults to the key)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.secrets.set")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOf(flags)
    const payload = {
      secretKey: flags.key,
      value: yield* readValue,
      displayName: Option.getOrElse(flags.displayName, () => flags.key)
    }
    const created = scope.kind === "organization"
      ? yield* api.secrets.create({ params: { orgId: scope.orgId }, payload })
      : scope.kind === "project"
      ? yield* api.projectSecrets.create({ params: { orgId: scope.orgId, projectId: scope.projectId }, payload })
      : yield* api.environmentSecrets.create({ params: scope, payload })
    yield* printResult(created, ({ secret }) => renderTable(secretColumns, [secret]))
  })
).pipe(Command.withDescription("Create a secret; the value is read from stdin or a hidden prompt"), withClient)

const rotate = Command.make(
  "rotate",
  { ...scopeFlags, secret: secretArgument },
  Effect.fn("cpctl.secrets.rotate")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOf(flags)
    const payload = { value: yield* readValue }
    const rotated = scope.kind === "organization"
      ? yield* api.secrets.rotate({ params: { orgId: scope.orgId, secretId: flags.secret }, payload })
      : scope.kind === "project"
      ? yield* api.projectSecrets.rotate({
        params: { orgId: scope.orgId, projectId: scope.projectId, secretId: flags.secret },
        payload
      })
      : yield* api.environmentSecrets.rotate({ params: { ...scope, secretId: flags.secret }, payload })
    yield* printResult(rotated, ({ secret }) => renderTable(secretColumns, [secret]))
  })
).pipe(Command.withDescription("Store a new value; the value is read from stdin or a hidden prompt"), withClient)

const remove = Command.make(
  "delete",
  { ...scopeFlags, secret: secretArgument },
  Effect.fn("cpctl.secrets.delete")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOf(flags)
    const revoked = scope.kind === "organization"
      ? yield* api.secrets.revoke({ params: { orgId: scope.orgId, secretId: flags.secret } })
      : scope.kind === "project"
      ? yield* api.projectSecrets.revoke({
        params: { orgId: scope.orgId, projectId: scope.projectId, secretId: flags.secret }
      })
      : yield* api.environmentSecrets.revoke({ params: { ...scope, secretId: flags.secret } })
    yield* printResult(revoked, ({ secret }) => `Revoked secret ${secret.id} (${secret.secretKey}).`)
  })
).pipe(Command.withDescription("Revoke a secret"), withClient)

export const secrets = Command.make("secrets").pipe(
  Command.withDescription("Write-only secrets at workspace, project or environment scope"),
  Command.withSubcommands([list, set, rotate, remove])
)
