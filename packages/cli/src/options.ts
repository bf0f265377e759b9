/**
 * The flags every command shares and how they become request fields: the workspace (`-w`, else `CP_WORKSPACE`,
 * else the default `cpctl workspaces use` stored), paging (`--limit`, `--cursor`, `--all`), `--yes`, and the
 * references a user types (an id, or a slug or key) resolved to the ids the API takes.
 */
import { EnvironmentId, PageQuery, ProjectId, TeamId } from "@cp/domain"
import { Config, Effect, FileSystem, Option, Path, Record, Schema } from "effect"
import { CliError, Flag, Prompt, TerminalCapabilities } from "effect/cli"
import { ControlPlaneClient } from "./client.ts"
import { configDirectory, StoredDefaults } from "./credentials.ts"
import { CliFailure, usageError } from "./errors.ts"

/** `{ key: value }` when the option holds one, else `{}`: how an absent flag becomes an absent optional key. */
export const optionalKey = <const K extends string, A>(key: K, value: Option.Option<A>): { readonly [P in K]?: A } =>
  Option.match(value, { onNone: () => ({}), onSome: (present) => Record.singleton(key, present) })

const noWorkspace = new CliError.ValidationError({
  message:
    "No workspace: pass --workspace (-w), set CP_WORKSPACE, or choose a default with `cpctl workspaces use <slug>`"
})

/** The default workspace in `config.json`, if `cpctl workspaces use` stored one (read while parsing, never written). */
const storedWorkspace = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const file = path.join(yield* configDirectory, "config.json")
  if (!(yield* fs.exists(file))) return Option.none<string>()
  const stored = yield* Schema.decodeEffect(Schema.fromJsonString(StoredDefaults))(yield* fs.readFileString(file))
  return Option.some(stored.workspace)
}).pipe(
  Effect.mapError((error) => new CliError.ValidationError({ message: `Cannot read the default workspace: ${error}` }))
)

/** The workspace a command without `-w` works in: `CP_WORKSPACE`, else the stored default; a usage error if neither. */
export const defaultWorkspace = Effect.gen(function*() {
  const env = yield* Effect.orDie(Config.option(Config.String("CP_WORKSPACE")))
  if (Option.isSome(env)) return env.value
  return yield* Effect.flatMap(
    storedWorkspace,
    Option.match({ onNone: () => Effect.fail(noWorkspace), onSome: Effect.succeed })
  )
})

/**
 * `--workspace` / `-w`: the workspace a command works in, as an id (org_…), reference (ws_…) or slug. Absent, it is
 * `CP_WORKSPACE`, else the default of `cpctl workspaces use`; with none of the three the run is a usage error.
 */
export const workspaceFlag: Flag.Flag<string> = Flag.String("workspace").pipe(
  Flag.withAlias("w"),
  Flag.withDescription(
    "Workspace id (org_…), reference (ws_…) or slug; else $CP_WORKSPACE, else the default of `cpctl workspaces use`"
  ),
  Flag.optional,
  Flag.mapEffect(Option.match({ onNone: () => defaultWorkspace, onSome: Effect.succeed }))
)

/** A flag as words of a command line to print (`["--limit", "10"]`), or none when the option is empty. */
export const flagWords = (flag: string, value: Option.Option<string | number>): ReadonlyArray<string> =>
  Option.match(value, { onNone: () => [], onSome: (present) => [flag, String(present)] })

/** `--limit`, `--cursor` and `--all`: the paging flags of a list command. */
export const pageFlags = {
  limit: Flag.String("limit").pipe(
    Flag.withSchema(PageQuery.limit.schema),
    Flag.withDescription("Page size, 1 to 100 (server default 50)"),
    Flag.optional
  ),
  cursor: Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional),
  all: Flag.Boolean("all").pipe(
    Flag.withDescription("Fetch every page, following the cursors"),
    Flag.withDefault(false)
  )
}

/** The paging flags as parsed. */
export interface PageFlags {
  readonly limit: Option.Option<number>
  readonly cursor: Option.Option<string>
  readonly all: boolean
}

/** The list query from the paging flags: only the keys whose flags were given. */
export const pageQuery = (
  flags: { readonly limit: Option.Option<number>; readonly cursor: Option.Option<string> }
) => ({
  ...optionalKey("limit", flags.limit),
  ...optionalKey("cursor", flags.cursor)
})

/** One page of a list as a command sees it: its rows and the cursor of the next page, if any. */
export interface Rows<Row> {
  readonly rows: ReadonlyArray<Row>
  readonly next: string | null
}

/**
 * The rows the paging flags ask for: one page (from `--cursor`), or with `--all` that page and every one after it.
 * `fetch` gets the query of each page.
 */
export const fetchRows = <Row, E, R>(
  flags: PageFlags,
  fetch: (query: { readonly limit?: number; readonly cursor?: string }) => Effect.Effect<Rows<Row>, E, R>
): Effect.Effect<Rows<Row>, E, R> =>
  Effect.gen(function*() {
    const first = yield* fetch(pageQuery(flags))
    if (!flags.all) return first
    const rows = [...first.rows]
    let next = first.next
    while (next !== null) {
      const page = yield* fetch({ ...optionalKey("limit", flags.limit), cursor: next })
      rows.push(...page.rows)
      next = page.next
    }
    return { rows, next: null }
  })

/** Every row of a list, page after page (how a slug or key is looked up). */
export const allRows = <Row, E, R>(
  fetch: (query: { readonly limit?: number; readonly cursor?: string }) => Effect.Effect<Rows<Row>, E, R>
) => Effect.map(fetchRows({ limit: Option.some(100), cursor: Option.none(), all: true }, fetch), ({ rows }) => rows)

/** `--yes` / `-y`: skip the confirmation a destructive command asks for. */
export const yesFlag = Flag.Boolean("yes").pipe(
  Flag.withAlias("y"),
  Flag.withDescription("Do not ask for confirmation (required without a terminal)"),
  Flag.withDefault(false)
)

/**
 * Asks before a destructive change: `--yes` skips the question; without a terminal to ask on, the run is a usage
 * error rather than a silent yes. Answering no fails with `cancelled`.
 */
export const confirm = Effect.fnUntraced(function*(yes: boolean, question: string) {
  if (yes) return
  const { canPrompt } = yield* TerminalCapabilities.TerminalCapabilities
  if (!canPrompt || process.stdin.isTTY !== true) {
    return yield* usageError(`${question} Pass --yes to confirm without a terminal.`, "confirmation_required")
  }
  const answer = yield* Prompt.Confirm({ message: question, initial: false })
  if (!answer) return yield* new CliFailure({ code: "cancelled", message: "Nothing was changed." })
})

const isId = <S extends Schema.Top & { readonly Type: string }>(schema: S, ref: string): ref is S["Type"] =>
  Schema.is(schema)(ref)

/** The one row whose slug (or key) is `ref`, else `not_found` naming what was looked for and where. */
const bySlug = <Row extends { readonly id: string }>(
  rows: ReadonlyArray<Row>,
  slugOf: (row: Row) => string,
  ref: string,
  what: string
) => {
  const found = rows.find((row) => slugOf(row) === ref)
  return found === undefined
    ? Effect.fail(new CliFailure({ code: "not_found", message: `No ${what} ${ref}` }))
    : Effect.succeed(found)
}

/** A project by id (prj_…) or slug. */
export const resolveProject = Effect.fnUntraced(function*(orgId: string, ref: string) {
  if (isId(ProjectId, ref)) return ref
  const { api } = yield* ControlPlaneClient
  const projects = yield* allRows((query) =>
    Effect.map(
      api.projects.list({ params: { orgId }, query }),
      (page) => ({ rows: page.data.projects, next: page.cursor })
    )
  )
  return (yield* bySlug(projects, (project) => project.slug, ref, `project with slug ${ref} in workspace`)).id
})

/** An environment of a project by id (env_…) or slug. */
export const resolveEnvironment = Effect.fnUntraced(function*(orgId: string, projectId: ProjectId, ref: string) {
  if (isId(EnvironmentId, ref)) return ref
  const { api } = yield* ControlPlaneClient
  const environments = yield* allRows((query) =>
    Effect.map(
      api.projects.listEnvironments({ params: { orgId, projectId }, query }),
      (page) => ({ rows: page.data.environments, next: page.cursor })
    )
  )
  return (yield* bySlug(environments, (environment) => environment.slug, ref, `environment with slug`)).id
})

/** A team by id (team_…) or slug. */
export const resolveTeam = Effect.fnUntraced(function*(orgId: string, ref: string) {
  if (isId(TeamId, ref)) return ref
  const { api } = yield* ControlPlaneClient
  const teams = yield* allRows((query) =>
    Effect.map(api.teams.list({ params: { orgId }, query }), (page) => ({ rows: page.data.teams, next: page.cursor }))
  )
  return (yield* bySlug(teams, (team) => team.slug, ref, `team with slug`)).id
})

/** `--project` and `--environment` (the scope below the workspace, each an id or a slug), with their help texts. */
export const belowWorkspaceFlags = (projectDescription: string, environmentDescription: string) => ({
  project: Flag.String("project").pipe(Flag.withDescription(projectDescription), Flag.optional),
  environment: Flag.String("environment").pipe(Flag.withDescription(environmentDescription), Flag.optional)
})

/** The scope the workspace, `--project` and `--environment` flags name. */
export type Scope =
  | { readonly kind: "organization"; readonly orgId: string }
  | { readonly kind: "project"; readonly orgId: string; readonly projectId: ProjectId }
  | {
    readonly kind: "environment"
    readonly orgId: string
    readonly projectId: ProjectId
    readonly environmentId: EnvironmentId
  }

/** The scope flags as parsed. */
export interface ScopeFlags {
  readonly workspace: string
  readonly project: Option.Option<string>
  readonly environment: Option.Option<string>
}

/** The scope the flags name, slugs resolved to ids; `--environment` without `--project` is a usage error. */
export const scopeOf = Effect.fnUntraced(function*(flags: ScopeFlags) {
  const orgId = flags.workspace
  if (Option.isNone(flags.project)) {
    if (Option.isSome(flags.environment)) return yield* usageError("--environment needs --project")
    return { kind: "organization", orgId } satisfies Scope as Scope
  }
  const projectId = yield* resolveProject(orgId, flags.project.value)
  if (Option.isNone(flags.environment)) return { kind: "project", orgId, projectId } satisfies Scope as Scope
  const environmentId = yield* resolveEnvironment(orgId, projectId, flags.environment.value)
  return { kind: "environment", orgId, projectId, environmentId } satisfies Scope as Scope
})
