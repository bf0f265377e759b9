/**
 * Workspace commands: `workspaces list [--all]`, `workspaces create <name> [--slug]`, `workspaces get [ref]` and
 * `workspaces use <ref>`, which makes a workspace the default of every workspace command (stored in `config.json`
 * beside the credentials; `-w` and `CP_WORKSPACE` still win).
 */
import { Name, type Organization, Slug } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { DefaultsStore } from "../credentials.ts"
import { defaultWorkspace, fetchRows, flagWords, optionalKey, pageFlags } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const organizationColumns: Columns<Organization> = {
  id: (organization) => organization.id,
  slug: (organization) => organization.slug,
  name: (organization) => organization.name,
  ref: (organization) => organization.workspaceRef,
  kind: (organization) => organization.kind,
  created: (organization) => organization.createdAt
}

const list = Command.make(
  "list",
  pageFlags,
  Effect.fn("cpctl.workspaces.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { rows, next } = yield* fetchRows(
      flags,
      (query) =>
        Effect.map(api.workspaces.list({ query }), (page) => ({ rows: page.data.organizations, next: page.cursor }))
    )
    yield* printList(rows, next, {
      columns: organizationColumns,
      empty: "No workspaces: create one with `cpctl workspaces create <name>`.",
      command: [
        "cpctl",
        "workspaces",
        "list",
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List the workspaces you belong to"), withClient)

const create = Command.make(
  "create",
  {
    name: Argument.String("name").pipe(Argument.withSchema(Name), Argument.withDescription("Display name")),
    slug: Flag.String("slug").pipe(
      Flag.withSchema(Slug),
      Flag.withDescription("URL name (derived from the name when absent)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.workspaces.create")(function*({ name, slug }) {
    const { api } = yield* ControlPlaneClient
    const { organization, membership } = yield* api.workspaces.create({
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(
      organization,
      (organization) => renderTable({ ...organizationColumns, role: () => membership.role }, [organization])
    )
  })
).pipe(Command.withDescription("Create a workspace; you become its owner"), withClient)

const refArgument = Argument.String("ref").pipe(
  Argument.withDescription("Workspace id (org_…), reference (ws_…) or slug")
)

const get = Command.make(
  "get",
  {
    ref: refArgument.pipe(Argument.optional),
    workspace: Flag.String("workspace").pipe(
      Flag.withAlias("w"),
      Flag.withDescription("The workspace, as with every workspace command (the same as the ref argument)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.workspaces.get")(function*({ ref, workspace }) {
    const { api } = yield* ControlPlaneClient
    const given = Option.orElse(ref, () => workspace)
    const orgId = Option.isSome(given) ? given.value : yield* defaultWorkspace
    const { organization } = yield* api.workspaces.get({ params: { orgId } })
    yield* printResult(organization, (organization) => renderTable(organizationColumns, [organization]))
  })
).pipe(Command.withDescription("Show one workspace (the default one when no ref is given)"), withClient)

const use = Command.make(
  "use",
  { ref: refArgument },
  Effect.fn("cpctl.workspaces.use")(function*({ ref }) {
    const { api } = yield* ControlPlaneClient
    const { organization } = yield* api.workspaces.get({ params: { orgId: ref } })
    const store = yield* DefaultsStore
    yield* store.save({ workspace: organization.slug })
    yield* printResult(
      organization,
      (organization) =>
        `Default workspace: ${organization.slug} (${organization.name}), stored in ${store.file}; ` +
        "-w and CP_WORKSPACE still win."
    )
  })
).pipe(Command.withDescription("Make a workspace the default of every workspace command"), withClient)

/** `cpctl workspaces`: list, create, inspect and choose the default workspace. */
export const workspaces = Command.make("workspaces").pipe(
  Command.withDescription("List, create and inspect workspaces; choose the default one"),
  Command.withSubcommands([list, create, get, use])
)
