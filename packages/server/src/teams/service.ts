/**
 * Teams: CRUD, membership and role grants. A team's grants reach its members through the edge's one workspace
 * lookup (`OrganizationsRepo.resolveForSubject`), so nothing here touches role bindings; deleting a team deletes its
 * members and grants with it, and they stop applying on the next request.
 */
import {
  type Actor,
  Conflict,
  Forbidden,
  NotFound,
  type Paged,
  type ProjectId,
  type ResolvedWorkspace,
  subjectTypeOf,
  Team,
  type TeamId,
  TeamMember,
  TeamRoleGrant,
  type TeamRoleTuple,
  type TeamSubjectType,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  idPosition,
  type JsonObject,
  MembersRepo,
  OrganizationsRepo,
  ProjectsRepo,
  RoleBindingsRepo,
  type TeamGrantRow,
  type TeamMemberListing,
  teamMemberPosition,
  type TeamMemberRow,
  type TeamRow,
  TeamsRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer } from "effect"
import { lockedAuthority } from "../platform/authority.ts"
import { apiJson, type EventActor, eventActorOf, EventLog, previousJson } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { insertWithSlug, slugify } from "../platform/slugs.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { requireProjectIn } from "../projects/scope.ts"
import { checkedTuple, grantChange, joinRefusal, subjectIdProblem, tupleProblems, uncoveredGrant } from "./rules.ts"

export const toTeam = (row: TeamRow): Team => ({
  id: row.id,
  name: row.name,
  slug: row.slug,
  status: row.status,
  createdAt: row.createdAt
})

export const toTeamMember = (row: TeamMemberListing): TeamMember => ({
  subjectId: row.subjectId,
  subjectType: row.subjectType,
  status: row.status,
  createdAt: row.createdAt,
  email: row.email,
  displayName: row.displayName
})

export const toTeamRoleGrant = (row: TeamGrantRow): TeamRoleGrant => ({
  teamId: row.teamId,
  role: row.role,
  scopeKind: row.scopeKind,
  scopeRef: row.scopeRef
})

const teamNotFound = (teamId: string) => wireError(NotFound, "Team not found", { teamId })

/** The 403 for handing out or taking back (by a grant, or by changing a team's members) a role stronger than yours. */
const exceedsCaller = (what: string, role: string) =>
  wireError(Forbidden, `You cannot ${what}: role ${role} holds permissions you do not`, {
    reason: "exceeds_caller",
    role
  })

const slugTaken = (slug: string) =>
  wireError(Conflict, `The slug '${slug}' is taken in this workspace`, { field: "slug" })

/** The tuple as stored, or the 422 naming every field that breaks the rules across them. */
const validTuple = (tuple: TeamRoleTuple, workspace: ResolvedWorkspace) => {
  const problems = tupleProblems(tuple, workspace.organization.isAccountRoot)
  return Object.keys(problems).length > 0
    ? Effect.fail(validationFailed(problems))
    : Effect.succeed(checkedTuple(tuple))
}

export class TeamsService extends Context.Service<TeamsService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly teams: ReadonlyArray<Team> }>, ValidationFailed>
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: { readonly name: string; readonly slug?: string }
  ) => Effect.Effect<{ readonly team: Team }, Conflict>
  readonly get: (workspace: ResolvedWorkspace, teamId: TeamId) => Effect.Effect<{ readonly team: Team }, NotFound>
  readonly update: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    teamId: TeamId,
    patch: { readonly name?: string; readonly slug?: string }
  ) => Effect.Effect<{ readonly team: Team }, NotFound | Conflict>
  readonly delete: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    teamId: TeamId
  ) => Effect.Effect<{ readonly deleted: true }, NotFound | Forbidden>
  readonly listMembers: (
    workspace: ResolvedWorkspace,
    teamId: TeamId,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly members: ReadonlyArray<TeamMember> }>, NotFound | ValidationFailed>
  readonly addMember: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    teamId: TeamId,
    input: { readonly subjectId: string; readonly subjectType?: TeamSubjectType }
  ) => Effect.Effect<{ readonly member: TeamMember }, NotFound | Conflict | Forbidden | ValidationFailed>
  readonly removeMember: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    teamId: TeamId,
    subjectId: string
  ) => Effect.Effect<{ readonly deleted: true }, NotFound | Forbidden>
  readonly listGrants: (
    workspace: ResolvedWorkspace,
    query: PageRequest & { readonly teamId?: TeamId }
  ) => Effect.Effect<Paged<{ readonly grants: ReadonlyArray<TeamRoleGrant> }>, NotFound | ValidationFailed>
  readonly grant: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    tuple: TeamRoleTuple
  ) => Effect.Effect<{ readonly grant: TeamRoleGrant }, NotFound | Conflict | Forbidden | ValidationFailed>
  readonly revoke: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    tuple: TeamRoleTuple
  ) => Effect.Effect<{ readonly deleted: true }, NotFound | Forbidden | ValidationFailed>
}>()("@cp/server/TeamsService") {
  static readonly layer = Layer.effect(
    TeamsService,
    Effect.gen(function*() {
      const teams = yield* TeamsRepo
      const members = yield* MembersRepo
      const bindings = yield* RoleBindingsRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors
      const authority = lockedAuthority(yield* OrganizationsRepo, yield* WorkspaceResolver)

      const findTeam = (workspace: ResolvedWorkspace, teamId: TeamId) =>
        teams.find({ orgId: workspace.organization.id, teamId }).pipe(orFail(() => teamNotFound(teamId)))

      /** The team, locked against a concurrent delete for the rest of the transaction. */
      const lockTeam = (workspace: ResolvedWorkspace, teamId: TeamId) =>
        teams.findLocked({ orgId: workspace.organization.id, teamId }).pipe(orFail(() => teamNotFound(teamId)))

      /** Who is in a team (or whether it exists) decides who holds its roles: changing it needs them all covered. */
      const requireCoversTeam = Effect.fnUntraced(function*(workspace: ResolvedWorkspace, team: TeamRow, what: string) {
        const stronger = uncoveredGrant(workspace.grants, yield* teams.grantsOf(team.id))
        if (stronger !== undefined) return yield* exceedsCaller(what, stronger.role)
      })

      const record = (
        workspace: ResolvedWorkspace,
        actor: EventActor,
        team: TeamRow,
        type: string,
        data: JsonObject,
        description: string,
        projectId: ProjectId | null = null
      ) =>
        events.record({
          orgId: workspace.organization.id,
          type,
          actor,
          subject: { kind: "team", id: team.id, name: team.name },
          // webhooks.md §1: the team as the API returns it, then what the event adds.
          data: { team: apiJson(Team, toTeam(team)), ...data },
          projectId,
          description
        })

      /** 404 unless the subject belongs to the workspace; 422 for a project-scoped key's principal. */
      const checkJoinable = Effect.fnUntraced(function*(
        workspace: ResolvedWorkspace,
        subjectType: TeamSubjectType,
        subjectId: string
      ) {
        const subject = { orgId: workspace.organization.id, subjectType, subjectId }
        switch (joinRefusal(subjectType, yield* members.find(subject), yield* bindings.listForSubject(subject))) {
          case "not_in_workspace":
            return yield* wireError(NotFound, "No such member in this workspace", { subjectId })
          case "project_scoped_key":
            return yield* validationFailed({
              subjectId: ["is the service principal of a project-scoped API key, which cannot join a team"]
            })
        }
      })

      return TeamsService.of({
        list: Effect.fn("Teams.list")(function*(workspace, page) {
          const orgId = workspace.organization.id
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "teams.list", scope: orgId },
            page,
            (window) => teams.list({ orgId, ...window }),
            idPosition
          )
          return { data: { teams: items.map(toTeam) }, cursor }
        }),

        create: Effect.fn("Teams.create")(function*(actor, workspace, input) {
          const at = yield* currentDate
          const orgId = workspace.organization.id
          const base = {
            id: mint.team(at.getTime()),
            orgId,
            name: input.name.trim(),
            status: "active" as const,
            createdAt: at,
            updatedAt: at
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            const row = yield* insertWithSlug(tx, { requested: input.slug, base: slugify(base.name, "team") }, {
              namespace: `teams:${orgId}`,
              taken: (slugBase) => teams.slugsStartingWith({ orgId, base: slugBase }),
              withSlug: (slug): TeamRow => ({ ...base, slug }),
              insert: teams.insert,
              slugTaken
            })
            yield* record(
              workspace,
              eventActorOf(actor),
              row,
              "team.created",
              {},
              `Team ${row.name} created`
            )
            return { team: toTeam(row) }
          }))
        }),

        get: Effect.fn("Teams.get")(function*(workspace, teamId) {
          return { team: toTeam(yield* findTeam(workspace, teamId)) }
        }),

        update: Effect.fn("Teams.update")(function*(actor, workspace, teamId, patch) {
          const name = patch.name?.trim()
          if (name === undefined && patch.slug === undefined) {
            return { team: toTeam(yield* findTeam(workspace, teamId)) }
          }
          const at = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const before = yield* lockTeam(workspace, teamId)
            const updated = yield* teams.update({
              orgId: workspace.organization.id,
              teamId,
              name,
              slug: patch.slug,
              updatedAt: at
            }).pipe(
              Effect.catchTag("UniqueViolation", () => Effect.fail(slugTaken(patch.slug ?? ""))),
              orFail(() => teamNotFound(teamId))
            )
            yield* record(workspace, eventActorOf(actor), updated, "team.updated", {
              previous: previousJson(Team, toTeam(before), toTeam(updated))
            }, `Team ${updated.name} updated`)
            return { team: toTeam(updated) }
          }))
        }),

        delete: Effect.fn("Teams.delete")(function*(actor, workspace, teamId) {
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "team.delete")
            const team = yield* findTeam(workspace, teamId)
            yield* requireCoversTeam(current, team, "delete this team")
            yield* teams.delete({ orgId: workspace.organization.id, teamId }).pipe(orFail(() => teamNotFound(teamId)))
            yield* record(
              workspace,
              eventActorOf(actor),
              team,
              "team.deleted",
              {},
              `Team ${team.name} deleted`
            )
            return { deleted: true as const }
          }))
        }),

        listMembers: Effect.fn("Teams.listMembers")(function*(workspace, teamId, page) {
          const team = yield* findTeam(workspace, teamId)
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "teams.members", scope: team.id },
            page,
            (window) => teams.listMembers({ teamId: team.id, ...window }),
            teamMemberPosition
          )
          return { data: { members: items.map(toTeamMember) }, cursor }
        }),

        addMember: Effect.fn("Teams.addMember")(function*(actor, workspace, teamId, input) {
          const subjectType = input.subjectType ?? "user"
          const problem = subjectIdProblem(input.subjectId, subjectType)
          if (problem !== undefined) return yield* validationFailed({ subjectId: [problem] })
          const at = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "team.member.add")
            const team = yield* lockTeam(workspace, teamId)
            yield* requireCoversTeam(current, team, "add members to this team")
            yield* checkJoinable(workspace, subjectType, input.subjectId)
            const row: TeamMemberRow = {
              teamId: team.id,
              subjectType,
              subjectId: input.subjectId,
              status: "active",
              createdAt: at
            }
            const added = yield* teams.insertMember(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () =>
                  Effect.fail(
                    wireError(Conflict, "The subject is already a member of this team", { subjectId: input.subjectId })
                  )
              )
            )
            yield* record(workspace, eventActorOf(actor), team, "team.member.added", {
              member: apiJson(TeamMember, toTeamMember(added))
            }, `${input.subjectId} added to team ${team.name}`)
            return { member: toTeamMember(added) }
          }))
        }),

        removeMember: Effect.fn("Teams.removeMember")(function*(actor, workspace, teamId, subjectId) {
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "team.member.remove")
            const team = yield* lockTeam(workspace, teamId)
            const subjectType = subjectTypeOf(subjectId)
            const notMember = () => wireError(NotFound, "The subject is not a member of this team", { subjectId })
            if (subjectType === undefined) return yield* notMember()
            yield* requireCoversTeam(current, team, "remove members from this team")
            yield* teams.deleteMember({ teamId: team.id, subjectType, subjectId }).pipe(orFail(notMember))
            yield* record(workspace, eventActorOf(actor), team, "team.member.removed", {
              member: { subjectId, subjectType }
            }, `${subjectId} removed from team ${team.name}`)
            return { deleted: true as const }
          }))
        }),

        listGrants: Effect.fn("Teams.listGrants")(function*(workspace, query) {
          const orgId = workspace.organization.id
          const teamId = query.teamId
          if (teamId !== undefined) yield* findTeam(workspace, teamId)
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "teams.grants", scope: orgId, filters: { teamId: teamId ?? null } },
            query,
            (window) => teams.listGrants({ orgId, teamId, ...window }),
            idPosition
          )
          return { data: { grants: items.map(toTeamRoleGrant) }, cursor }
        }),

        grant: Effect.fn("Teams.grant")(function*(actor, workspace, input) {
          const tuple = yield* validTuple(input, workspace)
          // Only a grant checks that its project exists: revoking by tuple keeps working whatever became of it.
          if (tuple.scopeRef !== null) {
            yield* requireProjectIn(projects, workspace.organization.id, tuple.scopeRef, "scopeRef")
          }
          const at = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "team.role.grant")
            const team = yield* lockTeam(workspace, tuple.teamId)
            if (uncoveredGrant(current.grants, [tuple]) !== undefined) {
              return yield* exceedsCaller("grant this role", tuple.role)
            }
            const row: TeamGrantRow = { id: mint.teamGrant(at.getTime()), ...tuple, createdAt: at }
            yield* teams.insertGrant(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () => Effect.fail(wireError(Conflict, "The team already holds this role on this scope", { ...tuple }))
              )
            )
            yield* record(
              workspace,
              eventActorOf(actor),
              team,
              "team.role.granted",
              { roleGrant: apiJson(TeamRoleGrant, toTeamRoleGrant(row)) },
              grantChange(team.name, "granted", row),
              tuple.scopeRef
            )
            return { grant: toTeamRoleGrant(row) }
          }))
        }),

        revoke: Effect.fn("Teams.revoke")(function*(actor, workspace, input) {
          const tuple = yield* validTuple(input, workspace)
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* authority(actor, workspace, "team.role.revoke")
            const team = yield* lockTeam(workspace, tuple.teamId)
            if (uncoveredGrant(current.grants, [tuple]) !== undefined) {
              return yield* exceedsCaller("revoke this role", tuple.role)
            }
            yield* teams.deleteGrant(tuple).pipe(
              orFail(() => wireError(NotFound, "The team does not hold this role on this scope", { ...tuple }))
            )
            yield* record(
              workspace,
              eventActorOf(actor),
              team,
              "team.role.revoked",
              { roleGrant: apiJson(TeamRoleGrant, tuple) },
              grantChange(team.name, "lost", tuple),
              tuple.scopeRef
            )
            return { deleted: true as const }
          }))
        })
      })
    })
  )
}
