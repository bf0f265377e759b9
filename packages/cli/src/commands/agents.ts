/**
 * Agent provider commands (`cpctl agents providers …`), all with the workspace (`-w`): `list [--provider]`,
 * `connect <provider> [--name] [--config]`, `update <connection> [--name] [--config] [--key]`, `verify <connection>`
 * and `disconnect <connection> [--yes]`. A key is read from stdin or a hidden prompt, never from the command line;
 * nothing prints it back (only its hint). Also `cpctl admin rotate-kek`, the operator's KEK rotation.
 */
import {
  AgentConnectionConfig,
  AgentConnectionId,
  AgentConnectionName,
  AgentProvider,
  type AgentProviderConnection
} from "@cp/domain"
import { Effect, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { readHidden } from "../input.ts"
import { confirm, optionalKey, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const columns: Columns<AgentProviderConnection> = {
  id: (connection) => connection.id,
  provider: (connection) => connection.provider,
  name: (connection) => connection.name,
  status: (connection) => connection.status,
  key: (connection) => connection.keyHint,
  source: (connection) => connection.source ?? "workspace",
  verified: (connection) => connection.lastVerifiedAt
}

const show = (connection: AgentProviderConnection) => renderTable(columns, [connection])

const readKey = readHidden("Provider API key (input hidden)", "the API key")

const connectionArgument = Argument.String("connection").pipe(
  Argument.withSchema(AgentConnectionId),
  Argument.withDescription("The connection's id (apc_…)")
)

const nameFlag = Flag.String("name").pipe(
  Flag.withSchema(AgentConnectionName),
  Flag.withDescription("Connection name (default: default; names starting platform- are reserved)"),
  Flag.optional
)

const configFlag = Flag.String("config").pipe(
  Flag.withSchema(Schema.fromJsonString(AgentConnectionConfig)),
  Flag.withDescription("Settings as a JSON object, e.g. '{\"defaultModel\":\"…\"}'"),
  Flag.optional
)

const list = Command.make(
  "list",
  {
    workspace: workspaceFlag,
    provider: Flag.Literals("provider", AgentProvider.literals).pipe(
      Flag.withDescription("Only this provider's connections"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.agents.providers.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const rows = yield* api.agentProviders.list({
      params: { orgId: flags.workspace },
      query: optionalKey("provider", flags.provider)
    })
    yield* printList(rows, null, { columns, empty: "No agent provider connections.", command: [] })
  })
).pipe(Command.withDescription("List connections: the workspace's, then the platform's"), withClient)

const connect = Command.make(
  "connect",
  {
    workspace: workspaceFlag,
    provider: Argument.Literals("provider", AgentProvider.literals).pipe(
      Argument.withDescription("anthropic, openai, gemini or modal")
    ),
    name: nameFlag,
    config: configFlag
  },
  Effect.fn("cpctl.agents.providers.connect")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { connection } = yield* api.agentProviders.create({
      params: { orgId: flags.workspace },
      payload: {
        provider: flags.provider,
        apiKey: yield* readKey,
        ...optionalKey("name", flags.name),
        ...optionalKey("config", flags.config)
      }
    })
    yield* printResult(connection, show)
  })
).pipe(
  Command.withDescription("Connect a provider; the key is read from stdin or a hidden prompt and verified first"),
  withClient
)

const update = Command.make(
  "update",
  {
    workspace: workspaceFlag,
    connection: connectionArgument,
    name: nameFlag,
    config: configFlag,
    key: Flag.Boolean("key").pipe(
      Flag.withDescription("Replace the key: read from stdin or a hidden prompt, verified first"),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cpctl.agents.providers.update")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const apiKey = flags.key ? Option.some(yield* readKey) : Option.none<string>()
    const { connection } = yield* api.agentProviders.update({
      params: { orgId: flags.workspace, connectionId: flags.connection },
      payload: {
        ...optionalKey("name", flags.name),
        ...optionalKey("config", flags.config),
        ...optionalKey("apiKey", apiKey)
      }
    })
    yield* printResult(connection, show)
  })
).pipe(Command.withDescription("Rename, re-configure or re-key a connection"), withClient)

const verify = Command.make(
  "verify",
  { workspace: workspaceFlag, connection: connectionArgument },
  Effect.fn("cpctl.agents.providers.verify")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { connection } = yield* api.agentProviders.verify({
      params: { orgId: flags.workspace, connectionId: flags.connection }
    })
    yield* printResult(connection, show)
  })
).pipe(Command.withDescription("Check the stored key with the provider again"), withClient)

const disconnect = Command.make(
  "disconnect",
  { workspace: workspaceFlag, connection: connectionArgument, yes: yesFlag },
  Effect.fn("cpctl.agents.providers.disconnect")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(flags.yes, `Disconnect ${flags.connection}? Its key is destroyed and cannot be recovered.`)
    const { connection } = yield* api.agentProviders.disconnect({
      params: { orgId: flags.workspace, connectionId: flags.connection }
    })
    yield* printResult(connection, (connection) => `Disconnected ${connection.id} (${connection.provider}).`)
  })
).pipe(
  Command.withDescription("Disconnect a provider: its key is crypto-shredded (asks first unless --yes)"),
  withClient
)

/** `cpctl agents providers`: model keys and compute accounts held in custody. */
export const agents = Command.make("agents").pipe(
  Command.withDescription("Agent provider connections"),
  Command.withSubcommands([
    Command.make("providers").pipe(
      Command.withDescription("Model-key and compute-account connections held in custody"),
      Command.withSubcommands([list, connect, update, verify, disconnect])
    )
  ])
)

const rotateKek = Command.make(
  "rotate-kek",
  {},
  Effect.fn("cpctl.admin.rotateKek")(function*() {
    const { api } = yield* ControlPlaneClient
    const { rotation } = yield* api.admin.rotateKek()
    yield* printResult(
      rotation,
      (rotation) =>
        `Re-wrapped ${rotation.rewrapped} data keys under KEK ${rotation.kekId}; ${rotation.remaining} remaining.`
    )
  })
).pipe(
  Command.withDescription(
    "Re-wrap every data key under the server's current SECRETS_KEK (operators only; see docs/decisions.md)"
  ),
  withClient
)

/** `cpctl admin`: operator commands. */
export const admin = Command.make("admin").pipe(
  Command.withDescription("Operator commands"),
  Command.withSubcommands([rotateKek])
)
