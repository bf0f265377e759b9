/**
 * Teams: CRUD, membership and role grants. A team's grants reach its members through the edge's one workspace
 * lookup (`OrganizationsRepo.resolveForSubject`), so nothing here touches role bindings; deleting a team deletes its
 * members and grants with it, and they stop applying on the next request.
 */
import {
  type Actor,
  Conflict,
  Forbidden,
  isProjectRole,
  NotFound,
  type Paged,
  type ProjectId,
  type ResolvedWorkspace,
  type Team,
  type TeamId,
  type TeamMember,
  type TeamRoleGrant,
  type TeamRoleTuple,
  type TeamSubjectType,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  MembersRepo,
  ProjectsRepo,
  RoleBindingsRepo,
  type TeamGrantRow,
  type TeamGrantTuple,
  type TeamMemberRow,
  type TeamPagePosition,
  type TeamRow,
  TeamsRepo,
  Transactor
} from "@cp/persistence"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { type EventActor, eventActorOf, EventLog } from "../platform/events.ts"
import { mint, newUuid } from "../platform/ids.ts"
import {
  type CursorBinding,
  Cursors,
  DEFAULT_PAGE_SIZE,
  pageOf,
  TimeIdPosition,
  timeIdPosition
} from "../platform/pagination.ts"
import { coversRole } from "../platform/rbac.ts"
import { requireProjectIn } from "../projects/scope.ts"
import type { PageRequest } from "../workspaces/service.ts"
import { nextFreeSlug, slugify } from "../workspaces/slugs.ts"

export const toTeam = (row: TeamRow): Team => ({
  id: row.id,
  name: row.name,
  slug: row.slug,
  status: row.status,
  createdAt: row.createdAt
})

export const toTeamMember = (row: TeamMemberRow): TeamMember => ({
  subjectId: row.subjectId,
  subjectType: row.subjectType,
  status: row.status,
  createdAt: row.createdAt
})

export const toTeamRoleGrant = (row: TeamGrantRow): TeamRoleGrant => ({
  teamId: row.teamId,
  role: row.role,
  scopeKind: row.scopeKind,
  scopeRef: row.scopeRef
})

/** The subject type an id's prefix names; undefined for anything that is neither a user nor a service principal. */
export const subjectTypeOf = (subjectId: string): TeamSubjectType | undefined =>
  /^usr_[0-9A-HJKMNP-TV-Z]{26}$/.test(subjectId)
    ? "user"
    : /^sp_[0-9A-HJKMNP-TV-Z]{26}$/.test(subjectId)
    ? "service_principal"
    : undefined

const teamNotFound = (teamId: string) => wireError(NotFound, "Team not found", { teamId })

/**
 * Nobody hands out (or takes back) through a team a role stronger than its own: an admin may not make or unmake
 * owners (contract §5), nor billing admins (`billing.manage` is not the admin's), as with API keys.
 */
const exceedsCaller = (what: string, role: string) =>
  wireError(Forbidden, `You cannot ${what}: role ${role} holds permissions you do not`, {
    reason: "exceeds_caller",
    role
  })

/** The first of `grants` whose role the caller does not cover, if any. */
const uncovered = (workspace: ResolvedWorkspace, grants: ReadonlyArray<TeamGrantTuple>) =>
  grants.find((grant) =>
    !coversRole(workspace.grants, grant.role, grant.scopeKind === "project" ? grant.scopeRef : null)
  )

/**
 * The rules across the fields of a grant tuple, every failing field at once: `scopeRef` names a project exactly
 * when `scopeKind` is `project`, project roles are granted on projects only (and workspace roles never on one), and
 * `account` scope exists only on an account root.
 */
type CheckedTuple = TeamGrantTuple & { readonly scopeRef: ProjectId | null }

const checkTuple = (
  tuple: TeamRoleTuple,
  workspace: ResolvedWorkspace
): Effect.Effect<CheckedTuple, ValidationFailed> => {
  const fields: Record<string, Array<string>> = {}
  const scopeRef = tuple.scopeRef ?? null
  if (tuple.scopeKind === "project" && scopeRef === null) {
    fields["scopeRef"] = ["is required when scopeKind is 'project'"]
  }
  if (tuple.scopeKind !== "project" && scopeRef !== null) {
    fields["scopeRef"] = ["must be absent unless scopeKind is 'project'"]
  }
  if (tuple.scopeKind === "project" && !isProjectRole(tuple.role)) {
    fields["role"] = ["must be project_admin, project_builder or project_viewer when scopeKind is 'project'"]
  }
  if (tuple.scopeKind !== "project" && isProjectRole(tuple.role)) {
    fields["role"] = [`is a project role: grant it with scopeKind 'project' and a scopeRef`]
  }
  if (tuple.scopeKind === "account" && !workspace.organization.isAccountRoot) {
    fields["scopeKind"] = ["'account' is valid only on an account root"]
  }
  return Object.keys(fields).length > 0
    ? Effect.fail(validationFailed(fields))
    : Effect.succeed({ teamId: tuple.teamId, role: tuple.role, scopeKind: tuple.scopeKind, scopeRef })
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

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      /** One keyset page of a newest-first list, behind a cursor bound to the list, its scope and its filters. */
      const keysetPage = Effect.fnUntraced(function*<Row>(
        binding: CursorBinding,
        page: PageRequest,
        fetch: (
          window: { readonly limit: number; readonly after?: TeamPagePosition }
        ) => Effect.Effect<ReadonlyArray<Row>>,
        positionOf: (row: Row) => TeamPagePosition
      ) {
        const after = yield* cursors.decode(binding, page.cursor, TimeIdPosition)
        const limit = page.limit ?? DEFAULT_PAGE_SIZE
        const rows = yield* fetch(
          after === undefined
            ? { limit: limit + 1 }
            : { limit: limit + 1, after: { at: new Date(after.at), key: after.id } }
        )
        const { items, next } = pageOf(rows, limit, (row) => {
          const { at, key } = positionOf(row)
          return timeIdPosition(at, key)
        })
        return { items, cursor: next === undefined ? null : cursors.encode(binding, next) }
      })

      const findTeam = (workspace: ResolvedWorkspace, teamId: TeamId) =>
        Effect.flatMap(
          teams.find(workspace.organization.id, teamId),
          Option.match({
            onNone: () => Effect.fail(teamNotFound(teamId)),
            onSome: Effect.succeed
          })
        )

      /** The team, locked against a concurrent delete for the rest of the transaction. */
      const lockTeam = (workspace: ResolvedWorkspace, teamId: TeamId) =>
        Effect.flatMap(
          teams.findLocked(workspace.organization.id, teamId),
          Option.match({
            onNone: () => Effect.fail(teamNotFound(teamId)),
            onSome: Effect.succeed
          })
        )

      /** Who is in a team (or whether it exists) decides who holds its roles: changing it needs them all covered. */
      const requireCoversTeam = Effect.fnUntraced(function*(workspace: ResolvedWorkspace, team: TeamRow, what: string) {
        const stronger = uncovered(workspace, yield* teams.grantsOf(team.id))
        if (stronger !== undefined) return yield* exceedsCaller(what, stronger.role)
      })

      const record = (
        workspace: ResolvedWorkspace,
        actor: EventActor,
        team: TeamRow,
        type: string,
        data: Record<string, string | null>,
        description: string,
        projectId: ProjectId | null = null
      ) =>
        events.record({
          orgId: workspace.organization.id,
          type,
          actor,
          subject: { kind: "team", id: team.id, name: team.name },
          data: { teamId: team.id, ...data },
          projectId,
          description
        })

      /** A derived slug takes the first free `-N` suffix in the workspace; a racing create makes it try the next. */
      const insertWithDerivedSlug = (base: Omit<TeamRow, "slug">) => {
        const wanted = slugify(base.name, "team")
        return Effect.gen(function*() {
          const row: TeamRow = {
            ...base,
            slug: nextFreeSlug(wanted, new Set(yield* teams.slugsStartingWith(base.orgId, wanted)))
          }
          yield* tx.withTransaction(teams.insert(row))
          return row
        }).pipe(Effect.retry({ times: 5, while: (e) => e._tag === "UniqueViolation" }), Effect.orDie)
      }

      const slugTaken = (slug: string) =>
        wireError(Conflict, `The slug '${slug}' is taken in this workspace`, { field: "slug" })

      /**
       * Whether the subject may join a team of this workspace: an active member of it, or a service principal with a
       * binding on it (API keys have no membership). A project-scoped key's principal never joins: a team's grants
       * would take it outside its project.
       */
      const checkJoinable = Effect.fnUntraced(function*(
        workspace: ResolvedWorkspace,
        subjectType: TeamSubjectType,
        subjectId: string
      ) {
        const orgId = workspace.organization.id
        const membership = yield* members.find(orgId, subjectType, subjectId)
        const held = yield* bindings.listForSubject(orgId, subjectType, subjectId)
        const belongs = Option.exists(membership, (member) => member.status === "active") || held.length > 0
        if (!belongs) {
          return yield* wireError(NotFound, "No such member in this workspace", { subjectId })
        }
        if (subjectType === "service_principal" && held.some((binding) => binding.scopeKind === "project")) {
          return yield* validationFailed({
            subjectId: ["is the service principal of a project-scoped API key, which cannot join a team"]
          })
        }
      })

      return TeamsService.of({
        list: Effect.fn("Teams.list")(function*(workspace, page) {
          const orgId = workspace.organization.id
          const { items, cursor } = yield* keysetPage(
            { endpoint: "teams.list", scope: orgId },
            page,
            (window) => teams.list(orgId, window),
            (row) => ({ at: row.createdAt, key: row.id })
          )
          return { data: { teams: items.map(toTeam) }, cursor }
        }),

        create: Effect.fn("Teams.create")(function*(actor, workspace, input) {
          const at = yield* now
          const base = {
            id: mint.team(at.getTime()),
            orgId: workspace.organization.id,
            name: input.name.trim(),
            status: "active" as const,
            createdAt: at,
            updatedAt: at
          }
          const slug = input.slug
          return yield* tx.withTransaction(Effect.gen(function*() {
            const row = slug === undefined
              ? yield* insertWithDerivedSlug(base)
              : yield* teams.insert({ ...base, slug }).pipe(
                Effect.as({ ...base, slug }),
                Effect.catchTag("UniqueViolation", () => Effect.fail(slugTaken(slug)))
              )
            yield* record(
              workspace,
              eventActorOf(actor),
              row,
              "team.created",
              { name: row.name, slug: row.slug },
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
          const at = yield* now
          return yield* tx.withTransaction(Effect.gen(function*() {
            const before = yield* lockTeam(workspace, teamId)
            const updated = yield* teams.update(workspace.organization.id, teamId, {
              name,
              slug: patch.slug,
              updatedAt: at
            }).pipe(
              Effect.catchTag("UniqueViolation", () => Effect.fail(slugTaken(patch.slug ?? ""))),
              Effect.flatMap(Option.match({ onNone: () => Effect.fail(teamNotFound(teamId)), onSome: Effect.succeed }))
            )
            yield* record(workspace, eventActorOf(actor), updated, "team.updated", {
              name: updated.name,
              slug: updated.slug,
              previousName: before.name,
              previousSlug: before.slug
            }, `Team ${updated.name} updated`)
            return { team: toTeam(updated) }
          }))
        }),

        delete: Effect.fn("Teams.delete")(function*(actor, workspace, teamId) {
          return yield* tx.withTransaction(Effect.gen(function*() {
            const team = yield* findTeam(workspace, teamId)
            yield* requireCoversTeam(workspace, team, "delete this team")
            const deleted = yield* teams.delete(workspace.organization.id, teamId)
            if (Option.isNone(deleted)) return yield* teamNotFound(teamId)
            yield* record(
              workspace,
              eventActorOf(actor),
              team,
              "team.deleted",
              { name: team.name, slug: team.slug },
              `Team ${team.name} deleted`
            )
            return { deleted: true as const }
          }))
        }),

        listMembers: Effect.fn("Teams.listMembers")(function*(workspace, teamId, page) {
          const team = yield* findTeam(workspace, teamId)
          const { items, cursor } = yield* keysetPage(
            { endpoint: "teams.members", scope: team.id },
            page,
            (window) => teams.listMembers(team.id, window),
            (row) => ({ at: row.createdAt, key: row.subjectId })
          )
          return { data: { members: items.map(toTeamMember) }, cursor }
        }),

        addMember: Effect.fn("Teams.addMember")(function*(actor, workspace, teamId, input) {
          const subjectType = input.subjectType ?? "user"
          if (subjectTypeOf(input.subjectId) !== subjectType) {
            return yield* validationFailed({
              subjectId: [
                subjectType === "user" ? "must be a user id (usr_…)" : "must be a service principal id (sp_…)"
              ]
            })
          }
          const at = yield* now
          return yield* tx.withTransaction(Effect.gen(function*() {
            const team = yield* lockTeam(workspace, teamId)
            yield* requireCoversTeam(workspace, team, "add members to this team")
            yield* checkJoinable(workspace, subjectType, input.subjectId)
            const row: TeamMemberRow = {
              teamId: team.id,
              subjectType,
              subjectId: input.subjectId,
              status: "active",
              createdAt: at
            }
            yield* teams.insertMember(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () =>
                  Effect.fail(
                    wireError(Conflict, "The subject is already a member of this team", { subjectId: input.subjectId })
                  )
              )
            )
            yield* record(workspace, eventActorOf(actor), team, "team.member.added", {
              subjectType,
              subjectId: input.subjectId
            }, `${input.subjectId} added to team ${team.name}`)
            return { member: toTeamMember(row) }
          }))
        }),

        removeMember: Effect.fn("Teams.removeMember")(function*(actor, workspace, teamId, subjectId) {
          return yield* tx.withTransaction(Effect.gen(function*() {
            const team = yield* lockTeam(workspace, teamId)
            const subjectType = subjectTypeOf(subjectId)
            const notMember = wireError(NotFound, "The subject is not a member of this team", { subjectId })
            if (subjectType === undefined) return yield* notMember
            yield* requireCoversTeam(workspace, team, "remove members from this team")
            const removed = yield* teams.deleteMember(team.id, subjectType, subjectId)
            if (Option.isNone(removed)) return yield* notMember
            yield* record(workspace, eventActorOf(actor), team, "team.member.removed", {
              subjectType,
              subjectId
            }, `${subjectId} removed from team ${team.name}`)
            return { deleted: true as const }
          }))
        }),

        listGrants: Effect.fn("Teams.listGrants")(function*(workspace, query) {
          const orgId = workspace.organization.id
          const teamId = query.teamId
          if (teamId !== undefined) yield* findTeam(workspace, teamId)
          const { items, cursor } = yield* keysetPage(
            { endpoint: "teams.grants", scope: orgId, filters: { teamId: teamId ?? null } },
            query,
            (window) => teams.listGrants(orgId, { ...window, teamId }),
            (row) => ({ at: row.createdAt, key: row.id })
          )
          return { data: { grants: items.map(toTeamRoleGrant) }, cursor }
        }),

        grant: Effect.fn("Teams.grant")(function*(actor, workspace, input) {
          const tuple = yield* checkTuple(input, workspace)
          // Only a grant checks that its project exists: revoking by tuple keeps working whatever became of it.
          if (tuple.scopeRef !== null) {
            yield* requireProjectIn(projects, workspace.organization.id, tuple.scopeRef, "scopeRef")
          }
          const at = yield* now
          return yield* tx.withTransaction(Effect.gen(function*() {
            const team = yield* lockTeam(workspace, tuple.teamId)
            if (uncovered(workspace, [tuple]) !== undefined) return yield* exceedsCaller("grant this role", tuple.role)
            const row: TeamGrantRow = { id: newUuid(at.getTime()), ...tuple, createdAt: at }
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
              { role: row.role, scopeKind: row.scopeKind, scopeRef: row.scopeRef },
              `Team ${team.name} granted ${row.role} on ${row.scopeKind}${
                row.scopeRef === null ? "" : ` ${row.scopeRef}`
              }`,
              tuple.scopeRef
            )
            return { grant: toTeamRoleGrant(row) }
          }))
        }),

        revoke: Effect.fn("Teams.revoke")(function*(actor, workspace, input) {
          const tuple = yield* checkTuple(input, workspace)
          return yield* tx.withTransaction(Effect.gen(function*() {
            const team = yield* lockTeam(workspace, tuple.teamId)
            if (uncovered(workspace, [tuple]) !== undefined) return yield* exceedsCaller("revoke this role", tuple.role)
            const revoked = yield* teams.deleteGrant(tuple)
            if (Option.isNone(revoked)) {
              return yield* wireError(NotFound, "The team does not hold this role on this scope", { ...tuple })
            }
            yield* record(
              workspace,
              eventActorOf(actor),
              team,
              "team.role.revoked",
              { role: tuple.role, scopeKind: tuple.scopeKind, scopeRef: tuple.scopeRef },
              `Team ${team.name} lost ${tuple.role} on ${tuple.scopeKind}${
                tuple.scopeRef === null ? "" : ` ${tuple.scopeRef}`
              }`,
              tuple.scopeRef
            )
            return { deleted: true as const }
          }))
        })
      })
    })
  )
}
