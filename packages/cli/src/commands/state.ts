/**
 * Run-state commands, part II (run-state.md §5–6): `refs list|get|set|delete`, `catalog publish|head|history|entities`
 * and `tfstate list|pull|unlock`. `tfstate pull` prints the stored state's bytes as Terraform's backend reads them;
 * `tfstate unlock` force-unlocks (an UNLOCK with an empty body, what `terraform force-unlock` sends).
 */
import { type CatalogEntity, type CatalogHead, Digest, type Ref, type TfStateSummary } from "@cp/domain"
import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import { confirm, fetchRows, optionalKey, pageFlags, resolveProject, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const projectArgument = Argument.String("project").pipe(Argument.withDescription("The project's id (prj_…) or slug"))
const nameArgument = Argument.String("name").pipe(Argument.withDescription("The ref's name, e.g. refs/heads/main"))
const digestArgument = Argument.String("digest").pipe(
  Argument.withSchema(Digest),
  Argument.withDescription("The object's digest, sha256:<64 hex>")
)
const expectedVersionFlag = Flag.Int("expected-version").pipe(
  Flag.withDescription("Compare-and-swap: the version the ref must have (0: must not exist)"),
  Flag.optional
)

const refColumns: Columns<Ref> = {
  name: (ref) => ref.name,
  digest: (ref) => ref.digest,
  version: (ref) => String(ref.version),
  updated: (ref) => ref.updatedAt
}

const headColumns: Columns<CatalogHead> = {
  version: (head) => String(head.version),
  digest: (head) => head.digest,
  published: (head) => head.publishedAt,
  by: (head) => `${head.publishedBy.kind}:${head.publishedBy.id}`
}

const entityColumns: Columns<CatalogEntity> = {
  project: (entity) => entity.projectSlug,
  kind: (entity) => entity.kind,
  name: (entity) => entity.name,
  owner: (entity) => entity.owner,
  environment: (entity) => entity.environment
}

const stateColumns: Columns<TfStateSummary> = {
  component: (state) => state.component,
  environment: (state) => state.environment,
  version: (state) => (state.version === null ? null : String(state.version)),
  locked: (state) => (state.locked ? `by ${state.lock?.Who ?? state.lock?.ID ?? "?"}` : "no"),
  updated: (state) => state.updatedAt
}

const refsList = Command.make(
  "list",
  { workspace: workspaceFlag, project: projectArgument, prefix: Flag.String("prefix").pipe(Flag.optional) },
  Effect.fn("cpctl.refs.list")(function*({ prefix, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const found = yield* api.refs.list({
      params: { orgId: workspace, projectId },
      query: optionalKey("prefix", prefix)
    })
    yield* printList(found.refs, null, { columns: refColumns, empty: "No refs.", command: [] })
  })
).pipe(Command.withDescription("A project's refs, in name order"), withClient)

const refsGet = Command.make(
  "get",
  { workspace: workspaceFlag, project: projectArgument, name: nameArgument },
  Effect.fn("cpctl.refs.get")(function*({ name, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const found = yield* api.refs.get({ params: { orgId: workspace, projectId, name } })
    yield* printResult(found.ref, (ref) => renderTable(refColumns, [ref]))
  })
).pipe(Command.withDescription("Show a ref"), withClient)

const refsSet = Command.make(
  "set",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    name: nameArgument,
    digest: digestArgument,
    expectedVersion: expectedVersionFlag
  },
  Effect.fn("cpctl.refs.set")(function*({ digest, expectedVersion, name, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const set = yield* api.refs.set({
      params: { orgId: workspace, projectId, name },
      payload: Option.match(expectedVersion, {
        onNone: () => ({ digest }),
        onSome: (n) => ({ digest, expectedVersion: n })
      })
    })
    yield* printResult(set.ref, (ref) => renderTable(refColumns, [ref]))
  })
).pipe(Command.withDescription("Point a ref at a stored object (--expected-version for compare-and-swap)"), withClient)

const refsDelete = Command.make(
  "delete",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    name: nameArgument,
    expectedVersion: expectedVersionFlag,
    yes: yesFlag
  },
  Effect.fn("cpctl.refs.delete")(function*({ expectedVersion, name, project, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    yield* confirm(yes, `Delete ref ${name}?`)
    const deleted = yield* api.refs.delete({
      params: { orgId: workspace, projectId, name },
      query: optionalKey("expectedVersion", expectedVersion)
    })
    yield* printResult(deleted, () => `Deleted ref ${name}`)
  })
).pipe(Command.withDescription("Delete a ref (asks unless --yes)"), withClient)

/** `cpctl refs`. */
export const refs = Command.make("refs").pipe(
  Command.withDescription("Refs: named pointers to stored objects"),
  Command.withSubcommands([refsList, refsGet, refsSet, refsDelete])
)

const catalogPublish = Command.make(
  "publish",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    digest: digestArgument,
    expected: Flag.String("expected-digest").pipe(
      Flag.withSchema(Digest),
      Flag.withDescription("Compare-and-swap: the digest the head must have now"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.catalog.publish")(function*({ digest, expected, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const published = yield* api.refs.publish({
      params: { orgId: workspace, projectId },
      payload: { digest, ...optionalKey("expectedDigest", expected) }
    })
    yield* printResult(published.head, (head) => renderTable(headColumns, [head]))
  })
).pipe(Command.withDescription("Publish a stored object as the project's catalog head"), withClient)

const catalogHead = Command.make(
  "head",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.catalog.head")(function*({ project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const found = yield* api.refs.head({ params: { orgId: workspace, projectId } })
    yield* printResult(found.head, (head) => renderTable(headColumns, [head]))
  })
).pipe(Command.withDescription("Show the project's catalog head"), withClient)

const catalogHistory = Command.make(
  "history",
  { workspace: workspaceFlag, project: projectArgument, ...pageFlags },
  Effect.fn("cpctl.catalog.history")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.refs.history({ params: { orgId: flags.workspace, projectId }, query }),
        (page) => ({ rows: page.data.heads, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: headColumns,
      empty: "Never published.",
      command: ["cpctl", "catalog", "history", flags.project, "-w", flags.workspace]
    })
  })
).pipe(Command.withDescription("Every publish of the catalog head, newest first"), withClient)

const filterFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

const catalogEntities = Command.make(
  "entities",
  {
    workspace: workspaceFlag,
    project: filterFlag("project", "A project's id or slug"),
    environment: filterFlag("environment", "Only entities of this environment"),
    kind: filterFlag("kind", "Only entities of this kind"),
    owner: filterFlag("owner", "Only entities of this owner"),
    q: filterFlag("q", "A substring of the name or description")
  },
  Effect.fn("cpctl.catalog.entities")(function*({ environment, kind, owner, project, q, workspace }) {
    const { api } = yield* ControlPlaneClient
    const found = yield* api.catalog.entities({
      params: { orgId: workspace },
      query: {
        ...optionalKey("project", project),
        ...optionalKey("environment", environment),
        ...optionalKey("kind", kind),
        ...optionalKey("owner", owner),
        ...optionalKey("q", q)
      }
    })
    yield* printList(found.entities, null, { columns: entityColumns, empty: "No entities.", command: [] })
  })
).pipe(Command.withDescription("The workspace's catalog entities"), withClient)

/** `cpctl catalog`. */
export const catalog = Command.make("catalog").pipe(
  Command.withDescription("Catalog heads and the workspace's catalog entities"),
  Command.withSubcommands([catalogPublish, catalogHead, catalogHistory, catalogEntities])
)

const componentArgument = Argument.String("component").pipe(Argument.withDescription("The state's component"))
const environmentArgument = Argument.String("environment").pipe(
  Argument.withDescription("The environment's slug")
)

/**
 * A Terraform-wire request to a state's URL (plus `suffix`): its status and body. The typed client cannot read these
 * answers (raw bytes, or an empty 404), so it is plain `fetch` with the same credentials.
 */
const rawState = (
  connection: ControlPlaneClient["Service"]["connection"],
  at: {
    readonly workspace: string
    readonly projectId: string
    readonly component: string
    readonly environment: string
  },
  suffix: string,
  init: { readonly method: string; readonly body?: string }
) =>
  Effect.tryPromise({
    try: async () => {
      const url = `${connection.baseUrl}/v1/organizations/${encodeURIComponent(at.workspace)}/projects/` +
        `${at.projectId}/state/tfstate/${encodeURIComponent(at.component)}/${encodeURIComponent(at.environment)}` +
        suffix
      const headers: Record<string, string> = Option.match(connection.token, {
        onNone: () => ({}),
        onSome: (token) => ({ authorization: `Bearer ${token}` })
      })
      const response = await fetch(url, { ...init, headers })
      return { status: response.status, text: await response.text() }
    },
    catch: (error) => new CliFailure({ code: "request_failed", message: String(error) })
  })

/** The failure of a non-200 raw answer: the envelope's code when it has one. */
const failureOf = (answer: { readonly status: number; readonly text: string }) =>
  new CliFailure({
    code: /"code"\s*:\s*"([a-z_]+)"/.exec(answer.text)?.[1] ?? `http_${answer.status}`,
    message: answer.text
  })

const tfstateList = Command.make(
  "list",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.tfstate.list")(function*({ project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const found = yield* api.tfstate.list({ params: { orgId: workspace, projectId } })
    yield* printList(found.states, null, { columns: stateColumns, empty: "No states.", command: [] })
  })
).pipe(Command.withDescription("A project's infrastructure states and their locks"), withClient)

const tfstatePull = Command.make(
  "pull",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    component: componentArgument,
    environment: environmentArgument,
    version: Flag.Int("version").pipe(Flag.withDescription("An earlier version"), Flag.optional)
  },
  Effect.fn("cpctl.tfstate.pull")(function*({ component, environment, project, version, workspace }) {
    const { connection } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const query = Option.match(version, { onNone: () => "", onSome: (n) => `?version=${n}` })
    const answer = yield* rawState(connection, { workspace, projectId, component, environment }, query, {
      method: "GET"
    })
    if (answer.status === 404 && answer.text === "") {
      return yield* new CliFailure({ code: "not_found", message: `No state stored for ${component}/${environment}` })
    }
    if (answer.status !== 200) return yield* failureOf(answer)
    yield* Console.log(answer.text)
  })
).pipe(Command.withDescription("Print a stored infrastructure state (as `terraform state pull` reads it)"), withClient)

const tfstateUnlock = Command.make(
  "unlock",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    component: componentArgument,
    environment: environmentArgument,
    yes: yesFlag
  },
  Effect.fn("cpctl.tfstate.unlock")(function*({ component, environment, project, workspace, yes }) {
    const { connection } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    yield* confirm(yes, `Force-unlock the state ${component}/${environment}?`)
    const answer = yield* rawState(connection, { workspace, projectId, component, environment }, ":unlock", {
      method: "POST",
      body: ""
    })
    if (answer.status !== 200) return yield* failureOf(answer)
    yield* printResult({ unlocked: true }, () => `Unlocked ${component}/${environment}`)
  })
).pipe(Command.withDescription("Force-unlock an infrastructure state (asks unless --yes)"), withClient)

/** `cpctl tfstate`. */
export const tfstate = Command.make("tfstate").pipe(
  Command.withDescription("Infrastructure states (Terraform http backend)"),
  Command.withSubcommands([tfstateList, tfstatePull, tfstateUnlock])
)
