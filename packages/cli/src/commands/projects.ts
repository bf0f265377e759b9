/**
 * Project and environment commands, in the workspace of `-w` (or the default), projects and environments given by id
 * or slug: `projects list`, `projects create <name> [--slug]`,
 * `projects archive <project>`, `projects restore <project>`; `envs list <project>`,
 * `envs create <project> <name> [--slug]`, `envs archive <project> <environment>`.
 */
import { type Environment, Name, type Project, Slug } from "@cp/domain"
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import {
  confirm,
  fetchRows,
  flagWords,
  optionalKey,
  pageFlags,
  resolveEnvironment,
  resolveProject,
  workspaceFlag,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

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

const projectArgument = Argument.String("project").pipe(Argument.withDescription("The project's id (prj_…) or slug"))
const environmentArgument = Argument.String("environment").pipe(
  Argument.withDescription("The environment's id (env_…) or slug")
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
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.projects.list({ params: { orgId: flags.workspace }, query }),
        (page) => ({ rows: page.data.projects, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: projectColumns,
      empty: "No projects: create one with `cpctl projects create <name>`.",
      command: ["cpctl", "projects", "list", "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List a workspace's projects (active and archived)"), withClient)

const create = Command.make(
  "create",
  { workspace: workspaceFlag, name: nameArgument, slug: slugFlag },
  Effect.fn("cpctl.projects.create")(function*({ name, slug, workspace }) {
    const { api } = yield* ControlPlaneClient
    const { project } = yield* api.projects.create({
      params: { orgId: workspace },
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(project, (project) => renderTable(projectColumns, [project]))
  })
).pipe(Command.withDescription("Create a project"), withClient)

const archive = Command.make(
  "archive",
  { workspace: workspaceFlag, project: projectArgument, yes: yesFlag },
  Effect.fn("cpctl.projects.archive")(function*({ project, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    yield* confirm(yes, `Archive project ${project}?`)
    const archived = yield* api.projects.archive({ params: { orgId: workspace, projectId } })
    yield* printResult(archived.project, (project) => renderTable(projectColumns, [project]))
  })
).pipe(Command.withDescription("Archive a project (it stays readable; asks unless --yes)"), withClient)

const restore = Command.make(
  "restore",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.projects.restore")(function*({ project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const restored = yield* api.projects.restore({ params: { orgId: workspace, projectId } })
    yield* printResult(restored.project, (project) => renderTable(projectColumns, [project]))
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
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.projects.listEnvironments({ params: { orgId: flags.workspace, projectId }, query }),
        (page) => ({ rows: page.data.environments, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: environmentColumns,
      empty: "No environments in this project.",
      command: ["cpctl", "envs", "list", flags.project, "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List a project's environments"), withClient)

const envCreate = Command.make(
  "create",
  { workspace: workspaceFlag, project: projectArgument, name: nameArgument, slug: slugFlag },
  Effect.fn("cpctl.envs.create")(function*({ name, project, slug, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const { environment } = yield* api.projects.createEnvironment({
      params: { orgId: workspace, projectId },
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(environment, (environment) => renderTable(environmentColumns, [environment]))
  })
).pipe(Command.withDescription("Create an environment in a project"), withClient)

const envArchive = Command.make(
  "archive",
  { workspace: workspaceFlag, project: projectArgument, environment: environmentArgument, yes: yesFlag },
  Effect.fn("cpctl.envs.archive")(function*({ environment, project, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const environmentId = yield* resolveEnvironment(workspace, projectId, environment)
    yield* confirm(yes, `Archive environment ${environment} of project ${project}?`)
    const archived = yield* api.projects.archiveEnvironment({ params: { orgId: workspace, projectId, environmentId } })
    yield* printResult(archived.environment, (environment) => renderTable(environmentColumns, [environment]))
  })
).pipe(Command.withDescription("Archive an environment (asks unless --yes)"), withClient)

/** `cpctl envs`. */
export const envs = Command.make("envs").pipe(
  Command.withDescription("Manage a project's environments"),
  Command.withSubcommands([envList, envCreate, envArchive])
)
