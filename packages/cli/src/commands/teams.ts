/**
 * Team commands, in the workspace of `-w` (or the default), `<team>` an id (team_…) or a slug: `teams list`,
 * `teams create <name> [--slug]`, `teams get <team>`,
 * `teams update <team> [--name] [--slug]`, `teams delete <team>`, `teams members <team>`,
 * `teams add-member <team> <subject> [--type]`, `teams remove-member <team> <subject>`, `teams grants [--team]`,
 * `teams grant <team> <role> [--scope] [--project]` and `teams revoke <team> <role> [--scope] [--project]`.
 */
import {
  Name,
  Role,
  ScopeKind,
  Slug,
  type Team,
  TeamId,
  type TeamMember,
  type TeamRoleGrant,
  type TeamRoleTuple,
  TeamSubjectType
} from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import {
  allRows,
  confirm,
  fetchRows,
  flagWords,
  optionalKey,
  pageFlags,
  resolveProject,
  resolveTeam,
  workspaceFlag,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

export { workspaceFlag }

const teamColumns: Columns<Team> = {
  id: (team) => team.id,
  slug: (team) => team.slug,
  name: (team) => team.name,
  status: (team) => team.status,
  created: (team) => team.createdAt
}

/** Who each member is (email and name, `-` where there is none) beside the subject id the commands take. */
const memberColumns: Columns<TeamMember> = {
  subject: (member) => member.subjectId,
  email: (member) => member.email,
  name: (member) => member.displayName,
  type: (member) => member.subjectType,
  status: (member) => member.status,
  added: (member) => member.createdAt
}

const grantColumns = (teams: ReadonlyArray<Team>): Columns<TeamRoleGrant> => ({
  team: (grant) => teams.find((team) => team.id === grant.teamId)?.slug ?? grant.teamId,
  role: (grant) => grant.role,
  scope: (grant) => grant.scopeKind,
  ref: (grant) => grant.scopeRef
})

const teamArgument = Argument.String("team").pipe(Argument.withDescription("The team's id (team_…) or slug"))

/** Every team of the workspace (to show grants by team slug). */
const teamsOf = Effect.fnUntraced(function*(orgId: string) {
  const { api } = yield* ControlPlaneClient
  return yield* allRows((query) =>
    Effect.map(api.teams.list({ params: { orgId }, query }), (page) => ({ rows: page.data.teams, next: page.cursor }))
  )
})

const subjectArgument = Argument.String("subject").pipe(
  Argument.withDescription("The member's user id (usr_…) or service principal id (sp_…)")
)

const list = Command.make(
  "list",
  { workspace: workspaceFlag, ...pageFlags },
  Effect.fn("cpctl.teams.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.teams.list({ params: { orgId: flags.workspace }, query }),
        (page) => ({ rows: page.data.teams, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: teamColumns,
      empty: "No teams.",
      command: ["cpctl", "teams", "list", "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List a workspace's teams"), withClient)

const create = Command.make(
  "create",
  {
    workspace: workspaceFlag,
    name: Argument.String("name").pipe(Argument.withSchema(Name), Argument.withDescription("Display name")),
    slug: Flag.String("slug").pipe(
      Flag.withSchema(Slug),
      Flag.withDescription("URL name, unique in the workspace (derived from the name when absent)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.teams.create")(function*({ workspace, name, slug }) {
    const { api } = yield* ControlPlaneClient
    const { team } = yield* api.teams.create({
      params: { orgId: workspace },
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(team, (team) => renderTable(teamColumns, [team]))
  })
).pipe(Command.withDescription("Create a team"), withClient)

const get = Command.make(
  "get",
  { workspace: workspaceFlag, team: teamArgument },
  Effect.fn("cpctl.teams.get")(function*({ workspace, team }) {
    const { api } = yield* ControlPlaneClient
    const teamId = yield* resolveTeam(workspace, team)
    const found = yield* api.teams.get({ params: { orgId: workspace, teamId } })
    yield* printResult(found.team, (team) => renderTable(teamColumns, [team]))
  })
).pipe(Command.withDescription("Show one team"), withClient)

const update = Command.make(
  "update",
  {
    workspace: workspaceFlag,
    team: teamArgument,
    name: Flag.String("name").pipe(Flag.withSchema(Name), Flag.withDescription("New display name"), Flag.optional),
    slug: Flag.String("slug").pipe(Flag.withSchema(Slug), Flag.withDescription("New URL name"), Flag.optional)
  },
  Effect.fn("cpctl.teams.update")(function*({ workspace, team, name, slug }) {
    const { api } = yield* ControlPlaneClient
    const teamId = yield* resolveTeam(workspace, team)
    const updated = yield* api.teams.update({
      params: { orgId: workspace, teamId },
      payload: { ...optionalKey("name", name), ...optionalKey("slug", slug) }
    })
    yield* printResult(updated.team, (team) => renderTable(teamColumns, [team]))
  })
).pipe(Command.withDescription("Rename a team or change its slug"), withClient)

const remove = Command.make(
  "delete",
  { workspace: workspaceFlag, team: teamArgument, yes: yesFlag },
  Effect.fn("cpctl.teams.delete")(function*({ workspace, team, yes }) {
    const { api } = yield* ControlPlaneClient
    const teamId = yield* resolveTeam(workspace, team)
    yield* confirm(yes, `Delete team ${team}, its memberships and its grants?`)
    const deleted = yield* api.teams.delete({ params: { orgId: workspace, teamId } })
    yield* printResult(deleted, () => `Deleted team ${team}; its grants no longer apply.`)
  })
).pipe(Command.withDescription("Delete a team, its memberships and its grants (asks unless --yes)"), withClient)

const members = Command.make(
  "members",
  { workspace: workspaceFlag, team: teamArgument, ...pageFlags },
  Effect.fn("cpctl.teams.members")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const teamId = yield* resolveTeam(flags.workspace, flags.team)
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.teams.listMembers({ params: { orgId: flags.workspace, teamId }, query }),
        (page) => ({ rows: page.data.members, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: memberColumns,
      empty: "No members in this team.",
      command: ["cpctl", "teams", "members", flags.team, "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List a team's members"), withClient)

const addMember = Command.make(
  "add-member",
  {
    workspace: workspaceFlag,
    team: teamArgument,
    subject: subjectArgument,
    type: Flag.Literals("type", TeamSubjectType.literals).pipe(
      Flag.withDescription("user (default) or service_principal"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.teams.addMember")(function*({ workspace, team, subject, type }) {
    const { api } = yield* ControlPlaneClient
    const teamId = yield* resolveTeam(workspace, team)
    const added = yield* api.teams.addMember({
      params: { orgId: workspace, teamId },
      payload: { subjectId: subject, ...optionalKey("subjectType", type) }
    })
    yield* printResult(added.member, (member) => renderTable(memberColumns, [member]))
  })
).pipe(Command.withDescription("Add a member of the workspace to a team"), withClient)

const removeMember = Command.make(
  "remove-member",
  {
    workspace: workspaceFlag,
    team: teamArgument,
    subject: subjectArgument,
    yes: yesFlag
  },
  Effect.fn("cpctl.teams.removeMember")(function*({ workspace, team, subject, yes }) {
    const { api } = yield* ControlPlaneClient
    const teamId = yield* resolveTeam(workspace, team)
    yield* confirm(yes, `Remove ${subject} from team ${team}? The roles the team grants no longer apply to it.`)
    const removed = yield* api.teams.removeMember({ params: { orgId: workspace, teamId, subjectId: subject } })
    yield* printResult(removed, () => `Removed ${subject} from team ${team}.`)
  })
).pipe(Command.withDescription("Remove a member from a team (asks unless --yes)"), withClient)

const grants = Command.make(
  "grants",
  {
    workspace: workspaceFlag,
    team: Flag.String("team").pipe(Flag.withDescription("Only this team's grants (id or slug)"), Flag.optional),
    ...pageFlags
  },
  Effect.fn("cpctl.teams.grants")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const teams = yield* teamsOf(flags.workspace)
    const teamId = Option.isSome(flags.team)
      ? Option.some(yield* resolveTeam(flags.workspace, flags.team.value))
      : Option.none<TeamId>()
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.teams.listGrants({
          params: { orgId: flags.workspace },
          query: { ...query, ...optionalKey("teamId", teamId) }
        }),
        (page) => ({ rows: page.data.grants, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: grantColumns(teams),
      empty: "No team grants.",
      command: [
        "cpctl",
        "teams",
        "grants",
        "-w",
        flags.workspace,
        ...flagWords("--team", flags.team),
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List the roles granted to a workspace's teams"), withClient)

/**
 * The flags that name a grant beside its team and role: `--scope` (default: project with --project, else
 * organization).
 */
const tupleFlags = {
  workspace: workspaceFlag,
  team: teamArgument,
  role: Argument.Literals("role", Role.literals).pipe(Argument.withDescription("The role to grant or revoke")),
  scope: Flag.Literals("scope", ScopeKind.literals).pipe(
    Flag.withDescription("account (on an account root), organization or project"),
    Flag.optional
  ),
  project: Flag.String("project").pipe(
    Flag.withDescription("The project of a project-scoped grant (prj_… or slug)"),
    Flag.optional
  )
}

/** The grant the flags name, the team and project references resolved to ids. */
const tupleOf = Effect.fnUntraced(function*(flags: {
  readonly workspace: string
  readonly team: string
  readonly role: Role
  readonly scope: Option.Option<ScopeKind>
  readonly project: Option.Option<string>
}) {
  const projectId = Option.isSome(flags.project)
    ? Option.some(yield* resolveProject(flags.workspace, flags.project.value))
    : Option.none()
  const tuple: TeamRoleTuple = {
    teamId: yield* resolveTeam(flags.workspace, flags.team),
    role: flags.role,
    scopeKind: Option.getOrElse(flags.scope, () => Option.isSome(flags.project) ? "project" : "organization"),
    ...optionalKey("scopeRef", projectId)
  }
  return tuple
})

const grant = Command.make(
  "grant",
  tupleFlags,
  Effect.fn("cpctl.teams.grant")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const granted = yield* api.teams.grant({ params: { orgId: flags.workspace }, payload: yield* tupleOf(flags) })
    yield* printResult(granted.grant, (grant) => renderTable(grantColumns([]), [grant]))
  })
).pipe(Command.withDescription("Grant a role to every member of a team"), withClient)

const revoke = Command.make(
  "revoke",
  { ...tupleFlags, yes: yesFlag },
  Effect.fn("cpctl.teams.revoke")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const tuple = yield* tupleOf(flags)
    yield* confirm(flags.yes, `Revoke ${tuple.role} on ${tuple.scopeKind} from team ${flags.team}?`)
    const revoked = yield* api.teams.revoke({ params: { orgId: flags.workspace }, payload: tuple })
    yield* printResult(revoked, () => `Revoked ${tuple.role} on ${tuple.scopeKind} from team ${tuple.teamId}.`)
  })
).pipe(Command.withDescription("Revoke a role from a team (asks unless --yes)"), withClient)

/** `cpctl teams`: teams, their members and their role grants. */
export const teams = Command.make("teams").pipe(
  Command.withDescription("Manage teams, their members and the roles granted to them"),
  Command.withSubcommands([list, create, get, update, remove, members, addMember, removeMember, grants, grant, revoke])
)
