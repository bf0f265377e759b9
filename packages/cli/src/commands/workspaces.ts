/** Workspace commands: `workspaces list`, `workspaces create <name> [--slug]`, `workspaces get <ref>`. */
import { Name, type Organization, PageQuery, Slug } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

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
  {
    limit: Flag.String("limit").pipe(
      Flag.withSchema(PageQuery.limit.schema),
      Flag.withDescription("Page size, 1 to 100 (server default 50)"),
      Flag.optional
    ),
    cursor: Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional)
  },
  Effect.fn("cpctl.workspaces.list")(function*({ limit, cursor }) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.workspaces.list({
      query: { ...optionalKey("limit", limit), ...optionalKey("cursor", cursor) }
    })
    const nextPage = (cursor: string) =>
      [
        "More: cpctl workspaces list",
        ...Option.match(limit, { onNone: () => [], onSome: (n) => [`--limit ${n}`] }),
        `--cursor ${cursor}`
      ]
        .join(" ")
    yield* printResult(
      page,
      ({ data, cursor }) =>
        [renderTable(organizationColumns, data.organizations), ...(cursor === null ? [] : [nextPage(cursor)])].join(
          "\n"
        )
    )
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
    const created = yield* api.workspaces.create({
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(
      created,
      ({ organization, membership }) =>
        renderTable({ ...organizationColumns, role: () => membership.role }, [organization])
    )
  })
).pipe(Command.withDescription("Create a workspace; you become its owner"), withClient)

const get = Command.make(
  "get",
  {
    ref: Argument.String("ref").pipe(Argument.withDescription("Workspace id (org_…), reference (ws_…) or slug"))
  },
  Effect.fn("cpctl.workspaces.get")(function*({ ref }) {
    const { api } = yield* ControlPlaneClient
    const found = yield* api.workspaces.get({ params: { orgId: ref } })
    yield* printResult(found, ({ organization }) => renderTable(organizationColumns, [organization]))
  })
).pipe(Command.withDescription("Show one workspace"), withClient)

/** `cpctl workspaces`: list, create and inspect workspaces. */
export const workspaces = Command.make("workspaces").pipe(
  Command.withDescription("List, create and inspect workspaces"),
  Command.withSubcommands([list, create, get])
)
