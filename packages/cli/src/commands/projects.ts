/**
 * Project and environment commands, all with `--workspace <ref>`: `projects list`, `projects create <name> [--slug]`,
 * `projects archive <project>`, `projects restore <project>`; `envs list <project>`,
 * `envs create <project> <name> [--slug]`, `envs archive <project> <environment>`.
 */
import { type Environment, EnvironmentId, Name, type Project, ProjectId, Slug } from "@cp/domain"
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { optionalKey, pageFlags, pageQuery } from "../options.ts"
import { type Columns, printResult, renderTable, withNextPage } from "../output.ts"
import { workspaceFlag } from "./teams.ts"

const projectColumns: Columns<Project> = {
  id: (project) => project.id,
  slug: (project) => project.slug,
  name: (project) => project.name,
  status: (project) => project.status,
  created: (project) => project.createdAt,
  archived: (project) => project.archivedAt
}

const environmentColumns: Columns<Environment> = {
  id: (environment) => environment.id,
  slug: (environment) => environment.slug,
  name: (environment) => environment.name,
  status: (environment) => environment.status,
  lastActive: (environment) => environment.lastActiveAt,
  archived: (environment) => environment.archivedAt
}

const projectArgument = Argument.String("project").pipe(
  Argument.withSchema(ProjectId),
  Argument.withDescription("The project's id (prj_…)")
)
const environmentArgument = Argument.String("environment").pipe(
  Argument.withSchema(EnvironmentId),
  Argument.withDescription("The environment's id (env_…)")
)
const nameArgument = Argument.String("name").pipe(Argument.withSchema(Name), Argument.withDescription("Display name"))
const slugFlag = Flag.String("slug").pipe(
  Flag.withSchema(Slug),
  Flag.withDescription("URL name (derived from the name when absent)"),
  Flag.optional
)

const list = Command.make(
  "list",
  { workspace: workspaceFlag, ...pageFlags },
  Effect.fn("cpctl.projects.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.projects.list({ params: { orgId: flags.workspace }, query: pageQuery(flags) })
    yield* printResult(page, ({ cursor, data }) =>
      withNextPage(
        renderTable(projectColumns, data.projects),
        cursor,
        `cpctl projects list --workspace ${flags.workspace}`
      ))
  })
).pipe(Command.withDescription("List a workspace's projects (active and archived)"), withClient)

const create = Command.make(
  "create",
  { workspace: workspaceFlag, name: nameArgument, slug: slugFlag },
  Effect.fn("cpctl.projects.create")(function*({ name, slug, workspace }) {
    const { api } = yield* ControlPlaneClient
    const created = yield* api.projects.create({
      params: { orgId: workspace },
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(created, ({ project }) => renderTable(projectColumns, [project]))
  })
).pipe(Command.withDescription("Create a project"), withClient)

const archive = Command.make(
  "archive",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.projects.archive")(function*({ project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const archived = yield* api.projects.archive({ params: { orgId: workspace, projectId: project } })
    yield* printResult(archived, ({ project }) => renderTable(projectColumns, [project]))
  })
).pipe(Command.withDescription("Archive a project (it stays readable)"), withClient)

const restore = Command.make(
  "restore",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.projects.restore")(function*({ project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const restored = yield* api.projects.restore({ params: { orgId: workspace, projectId: project } })
    yield* printResult(restored, ({ project }) => renderTable(projectColumns, [project]))
  })
).pipe(Command.withDescription("Restore an archived project"), withClient)

/** `cpctl projects`. */
export const projects = Command.make("projects").pipe(
  Command.withDescription("Manage projects"),
  Command.withSubcommands([list, create, archive, restore])
)

const envList = Command.make(
  "list",
  { workspace: workspaceFlag, project: projectArgument, ...pageFlags },
  Effect.fn("cpctl.envs.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.projects.listEnvironments({
      params: { orgId: flags.workspace, projectId: flags.project },
      query: pageQuery(flags)
    })
    yield* printResult(page, ({ cursor, data }) =>
      withNextPage(
        renderTable(environmentColumns, data.environments),
        cursor,
        `cpctl envs list ${flags.project} --workspace ${flags.workspace}`
      ))
  })
).pipe(Command.withDescription("List a project's environments"), withClient)

const envCreate = Command.make(
  "create",
  { workspace: workspaceFlag, project: projectArgument, name: nameArgument, slug: slugFlag },
  Effect.fn("cpctl.envs.create")(function*({ name, project, slug, workspace }) {
    const { api } = yield* ControlPlaneClient
    const created = yield* api.projects.createEnvironment({
      params: { orgId: workspace, projectId: project },
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(created, ({ environment }) => renderTable(environmentColumns, [environment]))
  })
).pipe(Command.withDescription("Create an environment in a project"), withClient)

const envArchive = Command.make(
  "archive",
  { workspace: workspaceFlag, project: projectArgument, environment: environmentArgument },
  Effect.fn("cpctl.envs.archive")(function*({ environment, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const archived = yield* api.projects.archiveEnvironment({
      params: { orgId: workspace, projectId: project, environmentId: environment }
    })
    yield* printResult(archived, ({ environment }) => renderTable(environmentColumns, [environment]))
  })
).pipe(Command.withDescription("Archive an environment"), withClient)

/** `cpctl envs`. */
export const envs = Command.make("envs").pipe(
  Command.withDescription("Manage a project's environments"),
  Command.withSubcommands([envList, envCreate, envArchive])
)
