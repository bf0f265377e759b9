/**
 * Team commands, all with `--workspace <ref>`: `teams list`, `teams create <name> [--slug]`, `teams get <team>`,
 * `teams update <team> [--name] [--slug]`, `teams delete <team>`, `teams members <team>`,
 * `teams add-member <team> <subject> [--type]`, `teams remove-member <team> <subject>`, `teams grants [--team]`,
 * `teams grant <team> <role> [--scope] [--project]` and `teams revoke <team> <role> [--scope] [--project]`.
 */
import {
  Name,
  ProjectId,
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
import { optionalKey, pageFlags, pageQuery } from "../options.ts"
import { type Columns, printResult, renderTable, withNextPage } from "../output.ts"

const teamColumns: Columns<Team> = {
  id: (team) => team.id,
  slug: (team) => team.slug,
  name: (team) => team.name,
  status: (team) => team.status,
  created: (team) => team.createdAt
}

const memberColumns: Columns<TeamMember> = {
  subject: (member) => member.subjectId,
  type: (member) => member.subjectType,
  status: (member) => member.status,
  added: (member) => member.createdAt
}

const grantColumns: Columns<TeamRoleGrant> = {
  team: (grant) => grant.teamId,
  role: (grant) => grant.role,
  scope: (grant) => grant.scopeKind,
  ref: (grant) => grant.scopeRef
}

/** `--workspace` / `-w`: the workspace every team command works in. */
export const workspaceFlag = Flag.String("workspace").pipe(
  Flag.withAlias("w"),
  Flag.withDescription("Workspace id (org_…), reference (ws_…) or slug")
)

const teamArgument = Argument.String("team").pipe(
  Argument.withSchema(TeamId),
  Argument.withDescription("The team's id (team_…)")
)

const subjectArgument = Argument.String("subject").pipe(
  Argument.withDescription("The member's user id (usr_…) or service principal id (sp_…)")
)

const list = Command.make(
  "list",
  { workspace: workspaceFlag, ...pageFlags },
  Effect.fn("cpctl.teams.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.teams.list({ params: { orgId: flags.workspace }, query: pageQuery(flags) })
    yield* printResult(
      page,
      ({ data, cursor }) =>
        withNextPage(renderTable(teamColumns, data.teams), cursor, `cpctl teams list --workspace ${flags.workspace}`)
    )
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
    const created = yield* api.teams.create({
      params: { orgId: workspace },
      payload: { name, ...optionalKey("slug", slug) }
    })
    yield* printResult(created, ({ team }) => renderTable(teamColumns, [team]))
  })
).pipe(Command.withDescription("Create a team"), withClient)

const get = Command.make(
  "get",
  { workspace: workspaceFlag, team: teamArgument },
  Effect.fn("cpctl.teams.get")(function*({ workspace, team }) {
    const { api } = yield* ControlPlaneClient
    const found = yield* api.teams.get({ params: { orgId: workspace, teamId: team } })
    yield* printResult(found, ({ team }) => renderTable(teamColumns, [team]))
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
    const updated = yield* api.teams.update({
      params: { orgId: workspace, teamId: team },
      payload: { ...optionalKey("name", name), ...optionalKey("slug", slug) }
    })
    yield* printResult(updated, ({ team }) => renderTable(teamColumns, [team]))
  })
).pipe(Command.withDescription("Rename a team or change its slug"), withClient)

const remove = Command.make(
  "delete",
  { workspace: workspaceFlag, team: teamArgument },
  Effect.fn("cpctl.teams.delete")(function*({ workspace, team }) {
    const { api } = yield* ControlPlaneClient
    const deleted = yield* api.teams.delete({ params: { orgId: workspace, teamId: team } })
    yield* printResult(deleted, () => `Deleted team ${team}; its grants no longer apply.`)
  })
).pipe(Command.withDescription("Delete a team, its memberships and its grants"), withClient)

const members = Command.make(
  "members",
  { workspace: workspaceFlag, team: teamArgument, ...pageFlags },
  Effect.fn("cpctl.teams.members")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.teams.listMembers({
      params: { orgId: flags.workspace, teamId: flags.team },
      query: pageQuery(flags)
    })
    yield* printResult(page, ({ data, cursor }) =>
      withNextPage(
        renderTable(memberColumns, data.members),
        cursor,
        `cpctl teams members ${flags.team} --workspace ${flags.workspace}`
      ))
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
    const added = yield* api.teams.addMember({
      params: { orgId: workspace, teamId: team },
      payload: { subjectId: subject, ...optionalKey("subjectType", type) }
    })
    yield* printResult(added, ({ member }) => renderTable(memberColumns, [member]))
  })
).pipe(Command.withDescription("Add a member of the workspace to a team"), withClient)

const removeMember = Command.make(
  "remove-member",
  {
    workspace: workspaceFlag,
    team: teamArgument,
    subject: subjectArgument
  },
  Effect.fn("cpctl.teams.removeMember")(function*({ workspace, team, subject }) {
    const { api } = yield* ControlPlaneClient
    const removed = yield* api.teams.removeMember({ params: { orgId: workspace, teamId: team, subjectId: subject } })
    yield* printResult(removed, () => `Removed ${subject} from team ${team}.`)
  })
).pipe(Command.withDescription("Remove a member from a team"), withClient)

const grants = Command.make(
  "grants",
  {
    workspace: workspaceFlag,
    team: Flag.String("team").pipe(
      Flag.withSchema(TeamId),
      Flag.withDescription("Only this team's grants"),
      Flag.optional
    ),
    ...pageFlags
  },
  Effect.fn("cpctl.teams.grants")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.teams.listGrants({
      params: { orgId: flags.workspace },
      query: { ...pageQuery(flags), ...optionalKey("teamId", flags.team) }
    })
    yield* printResult(
      page,
      ({ data, cursor }) =>
        withNextPage(
          renderTable(grantColumns, data.grants),
          cursor,
          `cpctl teams grants --workspace ${flags.workspace}`
        )
    )
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
    Flag.withSchema(ProjectId),
    Flag.withDescription("The project of a project-scoped grant (prj_…)"),
    Flag.optional
  )
}

const tupleOf = (flags: {
  readonly team: TeamId
  readonly role: Role
  readonly scope: Option.Option<ScopeKind>
  readonly project: Option.Option<ProjectId>
}): TeamRoleTuple => ({
  teamId: flags.team,
  role: flags.role,
  scopeKind: Option.getOrElse(flags.scope, () => Option.isSome(flags.project) ? "project" : "organization"),
  ...optionalKey("scopeRef", flags.project)
})

const grant = Command.make(
  "grant",
  tupleFlags,
  Effect.fn("cpctl.teams.grant")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const granted = yield* api.teams.grant({ params: { orgId: flags.workspace }, payload: tupleOf(flags) })
    yield* printResult(granted, ({ grant }) => renderTable(grantColumns, [grant]))
  })
).pipe(Command.withDescription("Grant a role to every member of a team"), withClient)

const revoke = Command.make(
  "revoke",
  tupleFlags,
  Effect.fn("cpctl.teams.revoke")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const tuple = tupleOf(flags)
    const revoked = yield* api.teams.revoke({ params: { orgId: flags.workspace }, payload: tuple })
    yield* printResult(revoked, () => `Revoked ${tuple.role} on ${tuple.scopeKind} from team ${tuple.teamId}.`)
  })
).pipe(Command.withDescription("Revoke a role from a team"), withClient)

/** `cpctl teams`: teams, their members and their role grants. */
export const teams = Command.make("teams").pipe(
  Command.withDescription("Manage teams, their members and the roles granted to them"),
  Command.withSubcommands([list, create, get, update, remove, members, addMember, removeMember, grants, grant, revoke])
)
