/**
 * API key commands: `api-keys create <label> --workspace <ref> --role <role> [--project] [--expires-at]`,
 * `api-keys list --workspace <ref> [--project] [--limit] [--cursor]`, `api-keys revoke <id> --workspace <ref>`.
 */
import {
  type ApiKey,
  ApiKeyId,
  ApiKeyLabel,
  IsoTimestamp,
  PageQuery,
  ProjectId,
  type RevokedApiKey,
  Role
} from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

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

const workspace = Flag.String("workspace").pipe(
  Flag.withAlias("w"),
  Flag.withDescription("Workspace id (org_…), reference (ws_…) or slug")
)

const project = Flag.String("project").pipe(Flag.withSchema(ProjectId), Flag.optional)

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
    project: project.pipe(Flag.withDescription("The project of a project role (prj_…)")),
    expiresAt: Flag.String("expires-at").pipe(
      Flag.withSchema(IsoTimestamp),
      Flag.withDescription("When the key stops working (ISO 8601, in the future); never when absent"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.apiKeys.create")(function*({ label, workspace, role, project, expiresAt }) {
    const { api } = yield* ControlPlaneClient
    const created = yield* api.apiKeys.create({
      params: { orgId: workspace },
      payload: { label, role, ...optionalKey("projectId", project), ...optionalKey("expiresAt", expiresAt) }
    })
    yield* printResult(created, ({ apiKey }) =>
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
    project: project.pipe(Flag.withDescription("Only the keys of this project (prj_…)")),
    limit: Flag.String("limit").pipe(
      Flag.withSchema(PageQuery.limit.schema),
      Flag.withDescription("Page size, 1 to 100 (server default 50)"),
      Flag.optional
    ),
    cursor: Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional)
  },
  Effect.fn("cpctl.apiKeys.list")(function*({ workspace, project, limit, cursor }) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.apiKeys.list({
      params: { orgId: workspace },
      query: { ...optionalKey("projectId", project), ...optionalKey("limit", limit), ...optionalKey("cursor", cursor) }
    })
    const nextPage = (next: string) =>
      [
        `More: cpctl api-keys list --workspace ${workspace}`,
        ...Option.match(project, { onNone: () => [], onSome: (id) => [`--project ${id}`] }),
        ...Option.match(limit, { onNone: () => [], onSome: (n) => [`--limit ${n}`] }),
        `--cursor ${next}`
      ].join(" ")
    yield* printResult(
      page,
      ({ data, cursor }) =>
        [renderTable(apiKeyColumns, data.apiKeys), ...(cursor === null ? [] : [nextPage(cursor)])].join("\n")
    )
  })
).pipe(Command.withDescription("List a workspace's API keys (never their secrets)"), withClient)

const revoke = Command.make(
  "revoke",
  {
    id: Argument.String("id").pipe(Argument.withSchema(ApiKeyId), Argument.withDescription("The key's id (a UUID)")),
    workspace
  },
  Effect.fn("cpctl.apiKeys.revoke")(function*({ id, workspace }) {
    const { api } = yield* ControlPlaneClient
    const revoked = yield* api.apiKeys.revoke({ params: { orgId: workspace, apiKeyId: id } })
    yield* printResult(revoked, ({ apiKey }) => renderTable(revokedColumns, [apiKey]))
  })
).pipe(Command.withDescription("Revoke an API key; it stops working at once, for good"), withClient)

/** `cpctl api-keys`: create, list and revoke a workspace's API keys. */
export const apiKeys = Command.make("api-keys").pipe(
  Command.withDescription("Create, list and revoke a workspace's API keys"),
  Command.withSubcommands([create, list, revoke])
)
