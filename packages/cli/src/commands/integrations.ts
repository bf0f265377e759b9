/**
 * Integration commands, in the workspace of `-w` (or the default): `integrations list|get|connect|share|revoke|
 * repositories|deliveries|replay`, `integrations token --repo … --permission name=level` (prints the token once, on
 * stdout only, nothing else there) and `repo-links list|create|update|delete <project> …`.
 */
import {
  BranchEnvMap,
  type InboundDelivery,
  InboundDeliveryId,
  type IntegrationConnection,
  IntegrationConnectionId,
  ProviderName,
  type RepoLink,
  RepoLinkId,
  type Repository,
  ShareMode
} from "@cp/domain"
import { Effect, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { confirm, optionalKey, resolveProject, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const connectionColumns: Columns<IntegrationConnection> = {
  id: (c) => c.id,
  provider: (c) => c.provider,
  status: (c) => c.status,
  name: (c) => c.displayName,
  account: (c) => c.externalAccountLogin,
  share: (c) => c.shareMode,
  inherited: (c) => c.inherited === true ? "yes" : ""
}
const showConnection = (connection: IntegrationConnection) => renderTable(connectionColumns, [connection])

const repositoryColumns: Columns<Repository> = {
  id: (r) => r.externalId,
  name: (r) => r.fullName,
  branch: (r) => r.defaultBranch,
  private: (r) => r.private ? "yes" : "no"
}

const deliveryColumns: Columns<InboundDelivery> = {
  id: (d) => d.id,
  event: (d) => d.action === null ? d.event : `${d.event}.${d.action}`,
  status: (d) => d.status,
  reason: (d) => d.failureReason,
  received: (d) => d.receivedAt
}

const linkColumns: Columns<RepoLink> = {
  id: (l) => l.id,
  repository: (l) => l.repoFullName,
  branch: (l) => l.defaultBranch,
  environments: (l) =>
    Object.entries(l.branchEnvMap).map(([branch, environment]) => `${branch}=${environment}`).join(",")
}
const showLink = (link: RepoLink) => renderTable(linkColumns, [link])

const connectionArgument = Argument.String("connection").pipe(
  Argument.withSchema(IntegrationConnectionId),
  Argument.withDescription("The connection's id (int_…)")
)
const projectArgument = Argument.String("project").pipe(Argument.withDescription("The project's id (prj_…) or slug"))

/** `--map main=production --map develop=staging`: the branch-to-environment map. */
const mapFlag = Flag.String("map").pipe(
  Flag.withDescription("A branch and the environment slug it deploys to, as branch=environment (repeatable)"),
  Flag.atLeast(0)
)
const branchMapOf = (pairs: ReadonlyArray<string>) =>
  Schema.decodeUnknownEffect(BranchEnvMap)(
    Object.fromEntries(pairs.map((pair) => {
      const at = pair.lastIndexOf("=")
      return at <= 0 ? [pair, ""] : [pair.slice(0, at), pair.slice(at + 1)]
    }))
  ).pipe(Effect.orDie)

const list = Command.make(
  "list",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.integrations.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { connections } = yield* api.integrations.list({ params: { orgId: flags.workspace } })
    yield* printList(connections, null, { columns: connectionColumns, empty: "No integrations.", command: [] })
  })
).pipe(Command.withDescription("List connections, including those shared by the account"), withClient)

const get = Command.make(
  "get",
  { workspace: workspaceFlag, connection: connectionArgument },
  Effect.fn("cpctl.integrations.get")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { connection } = yield* api.integrations.get({
      params: { orgId: flags.workspace, connectionId: flags.connection }
    })
    yield* printResult(connection, showConnection)
  })
).pipe(Command.withDescription("Show a connection"), withClient)

const connect = Command.make(
  "connect",
  {
    workspace: workspaceFlag,
    provider: Argument.String("provider").pipe(
      Argument.withSchema(ProviderName),
      Argument.withDescription("scmhost, or a configured provider")
    ),
    name: Flag.String("name").pipe(Flag.withDescription("Display name"), Flag.optional)
  },
  Effect.fn("cpctl.integrations.connect")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const result = yield* api.integrations.connect({
      params: { orgId: flags.workspace, provider: flags.provider },
      payload: { ...optionalKey("displayName", flags.name) }
    })
    yield* printResult(result, (r) =>
      [
        showConnection(r.connection),
        ...(r.installUrl === undefined ? [] : [`Install the app: ${r.installUrl}`]),
        ...(r.authorizeUrl === undefined ? [] : [`Authorize: ${r.authorizeUrl}`])
      ].join("\n"))
  })
).pipe(Command.withDescription("Start connecting a provider (scmhost: prints the app's install page)"), withClient)

const share = Command.make(
  "share",
  {
    workspace: workspaceFlag,
    connection: connectionArgument,
    mode: Argument.Literals("mode", ShareMode.literals).pipe(
      Argument.withDescription("auto: every child workspace; granted: only children with a grant")
    )
  },
  Effect.fn("cpctl.integrations.share")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { connection } = yield* api.integrations.update({
      params: { orgId: flags.workspace, connectionId: flags.connection },
      payload: { shareMode: flags.mode }
    })
    yield* printResult(connection, showConnection)
  })
).pipe(Command.withDescription("Set how an account connection is shared with child workspaces"), withClient)

const revoke = Command.make(
  "revoke",
  { workspace: workspaceFlag, connection: connectionArgument, yes: yesFlag },
  Effect.fn("cpctl.integrations.revoke")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(flags.yes, `Revoke ${flags.connection}? Tokens and webhooks stop at once.`)
    const { connection } = yield* api.integrations.revoke({
      params: { orgId: flags.workspace, connectionId: flags.connection }
    })
    yield* printResult(connection, (c) => `Revoked ${c.id} (${c.provider}).`)
  })
).pipe(Command.withDescription("Revoke a connection (asks first unless --yes)"), withClient)

const repositories = Command.make(
  "repositories",
  {
    workspace: workspaceFlag,
    connection: connectionArgument,
    filter: Flag.String("filter").pipe(Flag.withDescription("Substring of the full name"), Flag.optional)
  },
  Effect.fn("cpctl.integrations.repositories")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const result = yield* api.integrations.repositories({
      params: { orgId: flags.workspace, connectionId: flags.connection },
      query: optionalKey("q", flags.filter)
    })
    yield* printList(result.repositories, null, {
      columns: repositoryColumns,
      empty: "No repositories.",
      command: []
    })
  })
).pipe(Command.withDescription("List the repositories the connection reaches"), withClient)

const deliveries = Command.make(
  "deliveries",
  { workspace: workspaceFlag, connection: connectionArgument },
  Effect.fn("cpctl.integrations.deliveries")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const result = yield* api.integrations.deliveries({
      params: { orgId: flags.workspace, connectionId: flags.connection }
    })
    yield* printList(result.deliveries, null, { columns: deliveryColumns, empty: "No deliveries.", command: [] })
  })
).pipe(Command.withDescription("List the provider webhooks received for a connection, newest first"), withClient)

const replay = Command.make(
  "replay",
  {
    workspace: workspaceFlag,
    connection: connectionArgument,
    delivery: Argument.String("delivery").pipe(
      Argument.withSchema(InboundDeliveryId),
      Argument.withDescription("The delivery's id (igd_…)")
    )
  },
  Effect.fn("cpctl.integrations.replay")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { delivery } = yield* api.integrations.replay({
      params: { orgId: flags.workspace, connectionId: flags.connection, deliveryId: flags.delivery }
    })
    yield* printResult(delivery, (d) => renderTable(deliveryColumns, [d]))
  })
).pipe(Command.withDescription("Process a stored delivery again"), withClient)

/** `--permission contents=read`. */
const permissionsOf = (pairs: ReadonlyArray<string>) =>
  Object.fromEntries(pairs.map((pair) => {
    const [name = "", level = "read"] = pair.split("=")
    return [name, level === "write" ? "write" as const : "read" as const]
  }))

const token = Command.make(
  "token",
  {
    workspace: workspaceFlag,
    repo: Flag.String("repo").pipe(Flag.withDescription("A linked repository's id (repeatable)"), Flag.atLeast(1)),
    permission: Flag.String("permission").pipe(
      Flag.withDescription("A permission and its level, as name=read or name=write (repeatable)"),
      Flag.atLeast(0)
    ),
    template: Flag.String("template").pipe(
      Flag.withDescription("A scope template instead of --permission"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.integrations.token")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const issued = yield* api.integrations.issueToken({
      params: { orgId: flags.workspace },
      payload: {
        repositories: flags.repo,
        ...(flags.permission.length === 0 ? {} : { permissions: permissionsOf(flags.permission) }),
        ...optionalKey("template", flags.template)
      }
    })
    // The token alone on stdout, once; --json prints the whole answer (still only on stdout).
    yield* printResult(issued, (answer) => answer.token)
  })
).pipe(
  Command.withDescription("Mint a short-lived repository-scoped token; it is printed once, on stdout only"),
  withClient
)

/** `cpctl integrations`: provider connections, repositories, deliveries and the token broker. */
export const integrations = Command.make("integrations").pipe(
  Command.withDescription("Provider connections, repositories, inbound deliveries and the token broker"),
  Command.withSubcommands([list, get, connect, share, revoke, repositories, deliveries, replay, token])
)

const linkArgument = Argument.String("link").pipe(
  Argument.withSchema(RepoLinkId),
  Argument.withDescription("The repo link's id (repl_…)")
)

const listLinks = Command.make(
  "list",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.repoLinks.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { repoLinks } = yield* api.integrations.listRepoLinks({ params: { orgId: flags.workspace, projectId } })
    yield* printList(repoLinks, null, { columns: linkColumns, empty: "No repo links.", command: [] })
  })
).pipe(Command.withDescription("List a project's repo links"), withClient)

const createLink = Command.make(
  "create",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    connection: connectionArgument,
    repo: Argument.String("repo").pipe(Argument.withDescription("The repository's id (see integrations repositories)")),
    branch: Flag.String("default-branch").pipe(Flag.withDescription("Override the default branch"), Flag.optional),
    map: mapFlag
  },
  Effect.fn("cpctl.repoLinks.create")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { repoLink } = yield* api.integrations.createRepoLink({
      params: { orgId: flags.workspace, projectId },
      payload: {
        connectionId: flags.connection,
        repoExternalId: flags.repo,
        branchEnvMap: yield* branchMapOf(flags.map),
        ...optionalKey("defaultBranch", flags.branch)
      }
    })
    yield* printResult(repoLink, showLink)
  })
).pipe(Command.withDescription("Link a repository to a project, mapping branches to environments"), withClient)

const updateLink = Command.make(
  "update",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    link: linkArgument,
    branch: Flag.String("default-branch").pipe(Flag.withDescription("The default branch"), Flag.optional),
    map: mapFlag
  },
  Effect.fn("cpctl.repoLinks.update")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { repoLink } = yield* api.integrations.updateRepoLink({
      params: { orgId: flags.workspace, projectId, repoLinkId: flags.link },
      payload: {
        ...optionalKey("defaultBranch", flags.branch),
        ...(flags.map.length === 0 ? {} : { branchEnvMap: yield* branchMapOf(flags.map) })
      }
    })
    yield* printResult(repoLink, showLink)
  })
).pipe(Command.withDescription("Change a link's default branch or branch map (--map replaces it)"), withClient)

const deleteLink = Command.make(
  "delete",
  { workspace: workspaceFlag, project: projectArgument, link: linkArgument, yes: yesFlag },
  Effect.fn("cpctl.repoLinks.delete")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    yield* confirm(flags.yes, `Unlink ${flags.link}?`)
    const { repoLink } = yield* api.integrations.deleteRepoLink({
      params: { orgId: flags.workspace, projectId, repoLinkId: flags.link }
    })
    yield* printResult(repoLink, (l) => `Unlinked ${l.repoFullName} (${l.id}).`)
  })
).pipe(Command.withDescription("Unlink a repository (asks first unless --yes)"), withClient)

/** `cpctl repo-links`: a project's linked repositories. */
export const repoLinks = Command.make("repo-links").pipe(
  Command.withDescription("Repositories linked to a project, with their branch-to-environment maps"),
  Command.withSubcommands([listLinks, createLink, updateLink, deleteLink])
)
