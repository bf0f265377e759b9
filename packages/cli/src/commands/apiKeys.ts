/**
 * API key commands, in the workspace of `-w` (or the default): `api-keys create <label> --role <role> [--project]
 * [--expires-at]`, `api-keys list [--project] [--limit] [--cursor] [--all]`, `api-keys revoke <id> [--yes]`.
 * `--project` takes an id or a slug.
 */
import { type ApiKey, ApiKeyId, ApiKeyLabel, IsoTimestamp, type RevokedApiKey, Role } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import {
  confirm,
  fetchRows,
  flagWords,
  optionalKey,
  pageFlags,
  resolveProject,
  workspaceFlag as workspace,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const apiKeyColumns: Columns<ApiKey> = {
  id: (key) => key.id,
  label: (key) => key.label,
  prefix: (key) => key.prefix,
  role: (key) => key.servicePrincipal.role,
  project: (key) => key.servicePrincipal.projectId,
  created: (key) => key.createdAt,
  expires: (key) => key.expiresAt,
  used: (key) => key.lastUsedAt,
  revoked: (key) => key.revokedAt
}

const revokedColumns: Columns<RevokedApiKey> = {
  id: (key) => key.id,
  label: (key) => key.label,
  prefix: (key) => key.prefix,
  revoked: (key) => key.revokedAt
}

const project = Flag.String("project").pipe(Flag.optional)

/** The project id of an optional `--project` (id or slug). */
const projectOf = (orgId: string, ref: Option.Option<string>) =>
  Option.match(ref, {
    onNone: () => Effect.succeedNone,
    onSome: (ref) => Effect.asSome(resolveProject(orgId, ref))
  })

const create = Command.make(
  "create",
  {
    label: Argument.String("label").pipe(
      Argument.withSchema(ApiKeyLabel),
      Argument.withDescription("What the key is for")
    ),
    workspace,
    role: Flag.Literals("role", Role.literals).pipe(
      Flag.withDescription("A workspace role (owner, admin, builder, viewer, billing_admin) or a project role")
    ),
    project: project.pipe(Flag.withDescription("The project of a project role (prj_… or slug)")),
    expiresAt: Flag.String("expires-at").pipe(
      Flag.withSchema(IsoTimestamp),
      Flag.withDescription("When the key stops working (ISO 8601, in the future); never when absent"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.apiKeys.create")(function*({ label, workspace, role, project, expiresAt }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* projectOf(workspace, project)
    const { apiKey } = yield* api.apiKeys.create({
      params: { orgId: workspace },
      payload: { label, role, ...optionalKey("projectId", projectId), ...optionalKey("expiresAt", expiresAt) }
    })
    yield* printResult(apiKey, (apiKey) =>
      [
        renderTable(apiKeyColumns, [apiKey]),
        "",
        "Secret (shown only this once; store it now):",
        apiKey.secret
      ].join("\n"))
  })
).pipe(Command.withDescription("Create an API key; its secret is printed once"), withClient)

const list = Command.make(
  "list",
  {
    workspace,
    project: project.pipe(Flag.withDescription("Only the keys of this project (prj_… or slug)")),
    ...pageFlags
  },
  Effect.fn("cpctl.apiKeys.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* projectOf(flags.workspace, flags.project)
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.apiKeys.list({
          params: { orgId: flags.workspace },
          query: { ...optionalKey("projectId", projectId), ...query }
        }),
        (page) => ({ rows: page.data.apiKeys, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: apiKeyColumns,
      empty: "No API keys.",
      command: [
        "cpctl",
        "api-keys",
        "list",
        "-w",
        flags.workspace,
        ...flagWords("--project", flags.project),
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List a workspace's API keys (never their secrets)"), withClient)

const revoke = Command.make(
  "revoke",
  {
    id: Argument.String("id").pipe(Argument.withSchema(ApiKeyId), Argument.withDescription("The key's id (a UUID)")),
    workspace,
    yes: yesFlag
  },
  Effect.fn("cpctl.apiKeys.revoke")(function*({ id, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(yes, `Revoke API key ${id}? It stops working at once, for good.`)
    const { apiKey } = yield* api.apiKeys.revoke({ params: { orgId: workspace, apiKeyId: id } })
    yield* printResult(apiKey, (apiKey) => renderTable(revokedColumns, [apiKey]))
  })
).pipe(Command.withDescription("Revoke an API key; it stops working at once, for good (asks unless --yes)"), withClient)

/** `cpctl api-keys`: create, list and revoke a workspace's API keys. */
export const apiKeys = Command.make("api-keys").pipe(
  Command.withDescription("Create, list and revoke a workspace's API keys"),
  Command.withSubcommands([create, list, revoke])
)
