/**
 * Secret commands, all with the workspace and, for a project or environment scope, `--project` and `--environment`
 * (ids or slugs): `secrets list [--all-scopes] [--all]`, `secrets set <KEY> [--display-name]`, `secrets rotate
 * <secret>` and `secrets delete <secret> [--yes]`; a secret given by id needs no scope flags (its scope is looked
 * up). `set` and `rotate` read the value from stdin (a pipe or a file) or, on a terminal, from a hidden prompt —
 * never from the command line, where it would land in shell history and process listings.
 */
import { type Secret, SecretId, SecretKey } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import { readHidden } from "../input.ts"
import {
  allRows,
  belowWorkspaceFlags,
  confirm,
  fetchRows,
  flagWords,
  pageFlags,
  type Scope,
  type ScopeFlags,
  scopeOf,
  workspaceFlag,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const secretColumns: Columns<Secret> = {
  id: (secret) => secret.id,
  key: (secret) => secret.secretKey,
  name: (secret) => secret.displayName,
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
    "Project (prj_… or slug): the project scope, or the project of --environment",
    "Environment (env_… or slug): the environment scope (needs --project)"
  )
}

/** The secret value: a hidden prompt on a terminal, else stdin. Never an argument or a flag. */
const readValue = readHidden("Secret value (input hidden)", "the secret value")

const secretArgument = Argument.String("secret").pipe(
  Argument.withSchema(SecretId),
  Argument.withDescription("The secret's id (sec_…); its scope is looked up when no --project is given")
)

/** The scope a secret given by id lives at: the flags' scope, or without `--project` the one the listing shows. */
const scopeOfSecret = Effect.fnUntraced(function*(flags: ScopeFlags & { readonly secret: SecretId }) {
  if (Option.isSome(flags.project)) return yield* scopeOf(flags)
  const { api } = yield* ControlPlaneClient
  const orgId = flags.workspace
  const secrets = yield* allRows((query) =>
    Effect.map(
      api.secrets.list({ params: { orgId }, query: { ...query, scope: "all" } }),
      (page) => ({ rows: page.data.secrets, next: page.cursor })
    )
  )
  const secret = secrets.find((secret) => secret.id === flags.secret)
  if (secret === undefined) {
    return yield* new CliFailure({ code: "not_found", message: `No secret ${flags.secret} in the workspace` })
  }
  const scope: Scope = secret.environmentId !== null && secret.projectId !== null
    ? { kind: "environment", orgId, projectId: secret.projectId, environmentId: secret.environmentId }
    : secret.projectId !== null
    ? { kind: "project", orgId, projectId: secret.projectId }
    : { kind: "organization", orgId }
  return scope
})

const list = Command.make(
  "list",
  {
    ...scopeFlags,
    allScopes: Flag.Boolean("all-scopes").pipe(
      Flag.withDescription("At workspace scope: list workspace, project and environment secrets together"),
      Flag.withDefault(false)
    ),
    ...pageFlags
  },
  Effect.fn("cpctl.secrets.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOf(flags)
    const { rows, next } = yield* fetchRows(flags, (page) => {
      const query = { ...page, ...(flags.allScopes ? { scope: "all" } : {}) }
      const listed = scope.kind === "organization"
        ? api.secrets.list({ params: { orgId: scope.orgId }, query })
        : scope.kind === "project"
        ? api.projectSecrets.list({ params: { orgId: scope.orgId, projectId: scope.projectId }, query })
        : api.environmentSecrets.list({ params: scope, query })
      return Effect.map(listed, (page) => ({ rows: page.data.secrets, next: page.cursor }))
    })
    yield* printList(rows, next, {
      columns: secretColumns,
      empty: "No secrets.",
      command: [
        "cpctl",
        "secrets",
        "list",
        "-w",
        flags.workspace,
        ...flagWords("--project", flags.project),
        ...flagWords("--environment", flags.environment),
        ...(flags.allScopes ? ["--all-scopes"] : []),
        ...flagWords("--limit", flags.limit)
      ]
    })
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
    const { secret } = scope.kind === "organization"
      ? yield* api.secrets.create({ params: { orgId: scope.orgId }, payload })
      : scope.kind === "project"
      ? yield* api.projectSecrets.create({ params: { orgId: scope.orgId, projectId: scope.projectId }, payload })
      : yield* api.environmentSecrets.create({ params: scope, payload })
    yield* printResult(secret, (secret) => renderTable(secretColumns, [secret]))
  })
).pipe(Command.withDescription("Create a secret; the value is read from stdin or a hidden prompt"), withClient)

const rotate = Command.make(
  "rotate",
  { ...scopeFlags, secret: secretArgument },
  Effect.fn("cpctl.secrets.rotate")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOfSecret(flags)
    const payload = { value: yield* readValue }
    const { secret } = scope.kind === "organization"
      ? yield* api.secrets.rotate({ params: { orgId: scope.orgId, secretId: flags.secret }, payload })
      : scope.kind === "project"
      ? yield* api.projectSecrets.rotate({
        params: { orgId: scope.orgId, projectId: scope.projectId, secretId: flags.secret },
        payload
      })
      : yield* api.environmentSecrets.rotate({ params: { ...scope, secretId: flags.secret }, payload })
    yield* printResult(secret, (secret) => renderTable(secretColumns, [secret]))
  })
).pipe(Command.withDescription("Store a new value; the value is read from stdin or a hidden prompt"), withClient)

const remove = Command.make(
  "delete",
  { ...scopeFlags, secret: secretArgument, yes: yesFlag },
  Effect.fn("cpctl.secrets.delete")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const scope = yield* scopeOfSecret(flags)
    yield* confirm(flags.yes, `Revoke secret ${flags.secret}? Whatever reads it stops working.`)
    const { secret } = scope.kind === "organization"
      ? yield* api.secrets.revoke({ params: { orgId: scope.orgId, secretId: flags.secret } })
      : scope.kind === "project"
      ? yield* api.projectSecrets.revoke({
        params: { orgId: scope.orgId, projectId: scope.projectId, secretId: flags.secret }
      })
      : yield* api.environmentSecrets.revoke({ params: { ...scope, secretId: flags.secret } })
    yield* printResult(secret, (secret) => `Revoked secret ${secret.id} (${secret.secretKey}).`)
  })
).pipe(Command.withDescription("Revoke a secret (asks first unless --yes)"), withClient)

/** `cpctl secrets`: write-only secrets. */
export const secrets = Command.make("secrets").pipe(
  Command.withDescription("Write-only secrets at workspace, project or environment scope"),
  Command.withSubcommands([list, set, rotate, remove])
)
