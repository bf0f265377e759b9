/**
 * Teams with their members and role grants: one aggregate, so one repository. Deleting a team deletes its members
 * and grants with it (`on delete cascade`), so a deleted team's grants stop applying in the same statement.
 */
import { Role } from "@cp/domain/access"
import { OrgId, TeamId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { isSlugOfFamily, keyAfter, oldestFirst, slugOfFamily, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { ScopeKind, SubjectType } from "../workspaces/rows.ts"
import {
  TeamGrantRow,
  type TeamGrantTuple,
  TeamMemberRow,
  type TeamPagePosition,
  type TeamPageWindow,
  TeamRow
} from "./rows.ts"
import { grantKey, memberKey, TeamTables } from "./TeamTables.ts"

/** The constraint behind the `UniqueViolation` of a slug already taken in the workspace. */
export const teamsSlugConstraint = "teams_org_slug_key"
/** The constraint behind the `UniqueViolation` of adding a subject to a team twice. */
export const teamMembersConstraint = "team_members_pkey"
/** The constraint behind the `UniqueViolation` of granting a team the same role on the same scope twice. */
export const teamGrantsConstraint = "team_role_grants_grant_key"

/** A team's new name and/or slug; absent fields stay as they are. */
export interface TeamChange {
  readonly name?: string | undefined
  readonly slug?: string | undefined
  readonly updatedAt: Date
}

const teamUniques: ReadonlyArray<UniqueKey<TeamRow>> = [
  primaryKey("teams_pkey"),
  { constraint: teamsSlugConstraint, key: (team) => `${team.orgId} ${team.slug}` }
]

const memberUniques: ReadonlyArray<UniqueKey<TeamMemberRow>> = [{ constraint: teamMembersConstraint, key: memberKey }]
const grantUniques: ReadonlyArray<UniqueKey<TeamGrantRow>> = [
  primaryKey("team_role_grants_pkey"),
  { constraint: teamGrantsConstraint, key: grantKey }
]

const teamPosition = (team: TeamRow): TeamPagePosition => ({ at: team.createdAt, key: team.id })
const memberPosition = (member: TeamMemberRow): TeamPagePosition => ({ at: member.createdAt, key: member.subjectId })
const grantPosition = (grant: TeamGrantRow): TeamPagePosition => ({ at: grant.createdAt, key: grant.id })

const AfterSchema = Schema.optionalKey(Schema.UndefinedOr(Schema.Struct({ at: Schema.Date, key: Schema.String })))
const TeamKey = Schema.Struct({ orgId: OrgId, teamId: TeamId })
const TeamPage = Schema.Struct({ orgId: OrgId, limit: Schema.Int, after: AfterSchema })
const SlugFamily = Schema.Struct({ orgId: OrgId, base: Schema.String })
const SlugResult = Schema.Struct({ slug: Schema.String })
const TeamUpdate = Schema.Struct({
  orgId: OrgId,
  teamId: TeamId,
  name: Schema.UndefinedOr(Schema.String),
  slug: Schema.UndefinedOr(Schema.String),
  updatedAt: Schema.Date
})
const MemberPage = Schema.Struct({ teamId: TeamId, limit: Schema.Int, after: AfterSchema })
const MemberKey = Schema.Struct({ teamId: TeamId, subjectType: SubjectType, subjectId: Schema.String })
const GrantTuple = Schema.Struct({
  teamId: TeamId,
  role: Role,
  scopeKind: ScopeKind,
  scopeRef: Schema.NullOr(Schema.String)
})
const GrantPage = Schema.Struct({
  orgId: OrgId,
  teamId: Schema.UndefinedOr(TeamId),
  limit: Schema.Int,
  after: AfterSchema
})

export class TeamsRepo extends Context.Service<TeamsRepo, {
  /** `UniqueViolation` on `teams_org_slug_key` when the workspace already has a team with that slug. */
  readonly insert: (team: TeamRow) => Effect.Effect<void, UniqueViolation>
  /** The team with this id in this workspace (a team of another workspace is None). */
  readonly find: (orgId: OrgId, teamId: TeamId) => Effect.Effect<Option.Option<TeamRow>>
  /**
   * `find` that also locks the team against deletion until the surrounding transaction ends, so a member or grant
   * added to it cannot outlive it (a concurrent delete waits, or has already happened and this is None).
   */
  readonly findLocked: (orgId: OrgId, teamId: TeamId) => Effect.Effect<Option.Option<TeamRow>>
  /** Up to `limit` of the workspace's teams strictly after `after`, newest first (createdAt desc, id desc). */
  readonly list: (orgId: OrgId, window: TeamPageWindow) => Effect.Effect<ReadonlyArray<TeamRow>>
  /** The workspace's taken slugs among `base` and `base-<n>`, from which the caller picks the next free suffix. */
  readonly slugsStartingWith: (orgId: OrgId, base: string) => Effect.Effect<ReadonlyArray<string>>
  /** Renames the team; None when it is not in this workspace; `UniqueViolation` when the new slug is taken. */
  readonly update: (
    orgId: OrgId,
    teamId: TeamId,
    change: TeamChange
  ) => Effect.Effect<Option.Option<TeamRow>, UniqueViolation>
  /** Deletes the team with its members and grants; the deleted row, or None when it was not there. */
  readonly delete: (orgId: OrgId, teamId: TeamId) => Effect.Effect<Option.Option<TeamRow>>
  /** `UniqueViolation` on `team_members_pkey` when the subject is already a member of the team. */
  readonly insertMember: (member: TeamMemberRow) => Effect.Effect<void, UniqueViolation>
  /** Up to `limit` of the team's members strictly after `after`, newest first (createdAt desc, subjectId desc). */
  readonly listMembers: (teamId: TeamId, window: TeamPageWindow) => Effect.Effect<ReadonlyArray<TeamMemberRow>>
  /** Removes the subject from the team; the removed row, or None when it was not a member. */
  readonly deleteMember: (
    teamId: TeamId,
    subjectType: SubjectType,
    subjectId: string
  ) => Effect.Effect<Option.Option<TeamMemberRow>>
  /** `UniqueViolation` on `team_role_grants_grant_key` when the team already holds that role on that scope. */
  readonly insertGrant: (grant: TeamGrantRow) => Effect.Effect<void, UniqueViolation>
  /** Revokes the grant the tuple names; the revoked row, or None when the team did not hold it. */
  readonly deleteGrant: (tuple: TeamGrantTuple) => Effect.Effect<Option.Option<TeamGrantRow>>
  /** Every grant the team holds, in grant order (createdAt, id). */
  readonly grantsOf: (teamId: TeamId) => Effect.Effect<ReadonlyArray<TeamGrantRow>>
  /** Up to `limit` grants of the workspace's teams (or of one team) strictly after `after`, newest first. */
  readonly listGrants: (
    orgId: OrgId,
    filter: TeamPageWindow & { readonly teamId?: TeamId | undefined }
  ) => Effect.Effect<ReadonlyArray<TeamGrantRow>>
}>()("@cp/persistence/teams/TeamsRepo") {
  /** Teams in memory, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    TeamsRepo,
    Effect.gen(function*() {
      const { grants, members, teams } = yield* TeamTables
      const teamIn = (orgId: OrgId, teamId: TeamId) =>
        Option.filter(Option.fromUndefinedOr(teams.get(teamId)), (team) => team.orgId === orgId)
      return TeamsRepo.of({
        insert: Effect.fn("TeamsRepo.insert")((team: TeamRow) => insertUnique(teams, team.id, team, teamUniques)),
        find: Effect.fn("TeamsRepo.find")(function*(orgId: OrgId, teamId: TeamId) {
          return teamIn(orgId, teamId)
        }),
        findLocked: Effect.fn("TeamsRepo.findLocked")(function*(orgId: OrgId, teamId: TeamId) {
          return teamIn(orgId, teamId)
        }),
        list: Effect.fn("TeamsRepo.list")(function*(orgId: OrgId, window: TeamPageWindow) {
          const rows = Array.from(teams.values()).filter((team) => team.orgId === orgId)
          return windowOf(rows, teamPosition, window)
        }),
        slugsStartingWith: Effect.fn("TeamsRepo.slugsStartingWith")(function*(orgId: OrgId, base: string) {
          return Array.from(teams.values()).filter((team) => team.orgId === orgId && isSlugOfFamily(base)(team.slug))
            .map((team) => team.slug)
        }),
        update: Effect.fn("TeamsRepo.update")((orgId: OrgId, teamId: TeamId, change: TeamChange) =>
          atomically((changes) => {
            const current = teamIn(orgId, teamId)
            if (Option.isNone(current)) return Effect.succeed(Option.none<TeamRow>())
            const next: TeamRow = {
              ...current.value,
              name: change.name ?? current.value.name,
              slug: change.slug ?? current.value.slug,
              updatedAt: change.updatedAt
            }
            const taken = Array.from(teams.values()).some((team) =>
              team.orgId === orgId && team.id !== teamId && team.slug === next.slug
            )
            if (taken) return Effect.fail(new UniqueViolation({ constraint: teamsSlugConstraint }))
            changes.set(teams, teamId, next)
            return Effect.succeed(Option.some(next))
          })
        ),
        delete: Effect.fn("TeamsRepo.delete")((orgId: OrgId, teamId: TeamId) =>
          atomically((changes) => {
            const current = teamIn(orgId, teamId)
            if (Option.isSome(current)) {
              changes.delete(teams, teamId)
              for (const [key, member] of members) if (member.teamId === teamId) changes.delete(members, key)
              for (const [key, grant] of grants) if (grant.teamId === teamId) changes.delete(grants, key)
            }
            return Effect.succeed(current)
          })
        ),
        insertMember: Effect.fn("TeamsRepo.insertMember")((member: TeamMemberRow) =>
          insertUnique(members, memberKey(member), member, memberUniques)
        ),
        listMembers: Effect.fn("TeamsRepo.listMembers")(function*(teamId: TeamId, window: TeamPageWindow) {
          const rows = Array.from(members.values()).filter((member) => member.teamId === teamId)
          return windowOf(rows, memberPosition, window)
        }),
        deleteMember: Effect.fn("TeamsRepo.deleteMember")(
          (teamId: TeamId, subjectType: SubjectType, subjectId: string) =>
            atomically((changes) => {
              const key = memberKey({ teamId, subjectType, subjectId })
              const current = Option.fromUndefinedOr(members.get(key))
              if (Option.isSome(current)) changes.delete(members, key)
              return Effect.succeed(current)
            })
        ),
        insertGrant: Effect.fn("TeamsRepo.insertGrant")((grant: TeamGrantRow) =>
          insertUnique(grants, grantKey(grant), grant, grantUniques)
        ),
        deleteGrant: Effect.fn("TeamsRepo.deleteGrant")((tuple: TeamGrantTuple) =>
          atomically((changes) => {
            const key = grantKey(tuple)
            const current = Option.fromUndefinedOr(grants.get(key))
            if (Option.isSome(current)) changes.delete(grants, key)
            return Effect.succeed(current)
          })
        ),
        grantsOf: Effect.fn("TeamsRepo.grantsOf")(function*(teamId: TeamId) {
          return Array.from(grants.values()).filter((grant) => grant.teamId === teamId)
            .sort((a, b) => oldestFirst(grantPosition(a), grantPosition(b)))
        }),
        listGrants: Effect.fn("TeamsRepo.listGrants")(
          function*(orgId: OrgId, filter: TeamPageWindow & { readonly teamId?: TeamId | undefined }) {
            const rows = Array.from(grants.values()).filter((grant) =>
              teams.get(grant.teamId)?.orgId === orgId &&
              (filter.teamId === undefined || grant.teamId === filter.teamId)
            )
            return windowOf(rows, grantPosition, filter)
          }
        )
      })
    })
  ).pipe(Layer.provide(TeamTables.layer))

  /** Teams in the `teams`, `team_members` and `team_role_grants` tables. */
  static readonly sql = Layer.effect(
    TeamsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const insert = SqlSchema.void({
        Request: TeamRow,
        execute: (team) => sql`insert into teams ${sql.insert(team)}`
      })
      const find = SqlSchema.findOneOption({
        Request: TeamKey,
        Result: TeamRow,
        execute: ({ orgId, teamId }) => sql`select * from teams where id = ${teamId} and org_id = ${orgId}`
      })
      // `for key share` conflicts only with deleting the row (or changing its key), not with renames or reads.
      const findLocked = SqlSchema.findOneOption({
        Request: TeamKey,
        Result: TeamRow,
        execute: ({ orgId, teamId }) =>
          sql`select * from teams where id = ${teamId} and org_id = ${orgId} for key share`
      })
      const list = SqlSchema.findAll({
        Request: TeamPage,
        Result: TeamRow,
        execute: ({ orgId, limit, after }) =>
          sql`
            select * from teams
            where ${sql.and([sql`org_id = ${orgId}`, ...keyAfter(sql, after)])}
            order by created_at desc, id desc
            limit ${limit}`
      })
      const slugFamily = SqlSchema.findAll({
        Request: SlugFamily,
        Result: SlugResult,
        execute: ({ orgId, base }) => sql`select slug from teams where org_id = ${orgId} and ${slugOfFamily(sql, base)}`
      })
      const update = SqlSchema.findOneOption({
        Request: TeamUpdate,
        Result: TeamRow,
        execute: ({ orgId, teamId, name, slug, updatedAt }) =>
          sql`
            update teams set
              name = coalesce(${name ?? null}, name),
              slug = coalesce(${slug ?? null}, slug),
              updated_at = ${updatedAt}
            where id = ${teamId} and org_id = ${orgId}
            returning *`
      })
      const remove = SqlSchema.findOneOption({
        Request: TeamKey,
        Result: TeamRow,
        execute: ({ orgId, teamId }) => sql`delete from teams where id = ${teamId} and org_id = ${orgId} returning *`
      })
      const insertMember = SqlSchema.void({
        Request: TeamMemberRow,
        execute: (member) => sql`insert into team_members ${sql.insert(member)}`
      })
      const listMembers = SqlSchema.findAll({
        Request: MemberPage,
        Result: TeamMemberRow,
        execute: ({ teamId, limit, after }) =>
          sql`
            select * from team_members
            where ${sql.and([sql`team_id = ${teamId}`, ...keyAfter(sql, after, "subject_id")])}
            order by created_at desc, subject_id desc
            limit ${limit}`
      })
      const deleteMember = SqlSchema.findOneOption({
        Request: MemberKey,
        Result: TeamMemberRow,
        execute: ({ teamId, subjectType, subjectId }) =>
          sql`
            delete from team_members
            where team_id = ${teamId} and subject_type = ${subjectType} and subject_id = ${subjectId}
            returning *`
      })
      const insertGrant = SqlSchema.void({
        Request: TeamGrantRow,
        execute: (grant) => sql`insert into team_role_grants ${sql.insert(grant)}`
      })
      const deleteGrant = SqlSchema.findOneOption({
        Request: GrantTuple,
        Result: TeamGrantRow,
        execute: ({ teamId, role, scopeKind, scopeRef }) =>
          sql`
            delete from team_role_grants
            where team_id = ${teamId} and role = ${role} and scope_kind = ${scopeKind}
              and scope_ref is not distinct from ${scopeRef}
            returning *`
      })
      const grantsOf = SqlSchema.findAll({
        Request: TeamId,
        Result: TeamGrantRow,
        execute: (teamId) => sql`select * from team_role_grants where team_id = ${teamId} order by created_at, id`
      })
      const listGrants = SqlSchema.findAll({
        Request: GrantPage,
        Result: TeamGrantRow,
        execute: ({ orgId, teamId, limit, after }) =>
          sql`
            select g.* from team_role_grants g join teams t on t.id = g.team_id
            where ${
            sql.and([
              sql`t.org_id = ${orgId}`,
              ...(teamId === undefined ? [] : [sql`g.team_id = ${teamId}`]),
              ...(after === undefined ? [] : [sql`(g.created_at, g.id) < (${after.at}, ${after.key})`])
            ])
          }
            order by g.created_at desc, g.id desc
            limit ${limit}`
      })

      return TeamsRepo.of({
        insert: Effect.fn("TeamsRepo.insert")((team: TeamRow) => uniqueViolationOrDie(insert(team))),
        find: Effect.fn("TeamsRepo.find")((orgId: OrgId, teamId: TeamId) => Effect.orDie(find({ orgId, teamId }))),
        findLocked: Effect.fn("TeamsRepo.findLocked")((orgId: OrgId, teamId: TeamId) =>
          Effect.orDie(findLocked({ orgId, teamId }))
        ),
        list: Effect.fn("TeamsRepo.list")((orgId: OrgId, window: TeamPageWindow) =>
          Effect.orDie(list({ orgId, limit: window.limit, after: window.after }))
        ),
        slugsStartingWith: Effect.fn("TeamsRepo.slugsStartingWith")((orgId: OrgId, base: string) =>
          slugFamily({ orgId, base }).pipe(Effect.map((rows) => rows.map((row) => row.slug)), Effect.orDie)
        ),
        update: Effect.fn("TeamsRepo.update")((orgId: OrgId, teamId: TeamId, change: TeamChange) =>
          uniqueViolationOrDie(
            update({ orgId, teamId, name: change.name, slug: change.slug, updatedAt: change.updatedAt })
          )
        ),
        delete: Effect.fn("TeamsRepo.delete")((orgId: OrgId, teamId: TeamId) =>
          Effect.orDie(remove({ orgId, teamId }))
        ),
        insertMember: Effect.fn("TeamsRepo.insertMember")((member: TeamMemberRow) =>
          uniqueViolationOrDie(insertMember(member))
        ),
        listMembers: Effect.fn("TeamsRepo.listMembers")((teamId: TeamId, window: TeamPageWindow) =>
          Effect.orDie(listMembers({ teamId, limit: window.limit, after: window.after }))
        ),
        deleteMember: Effect.fn("TeamsRepo.deleteMember")(
          (teamId: TeamId, subjectType: SubjectType, subjectId: string) =>
            Effect.orDie(deleteMember({ teamId, subjectType, subjectId }))
        ),
        insertGrant: Effect.fn("TeamsRepo.insertGrant")((grant: TeamGrantRow) =>
          uniqueViolationOrDie(insertGrant(grant))
        ),
        deleteGrant: Effect.fn("TeamsRepo.deleteGrant")((tuple: TeamGrantTuple) => Effect.orDie(deleteGrant(tuple))),
        grantsOf: Effect.fn("TeamsRepo.grantsOf")((teamId: TeamId) => Effect.orDie(grantsOf(teamId))),
        listGrants: Effect.fn("TeamsRepo.listGrants")(
          (orgId: OrgId, filter: TeamPageWindow & { readonly teamId?: TeamId | undefined }) =>
            Effect.orDie(listGrants({ orgId, teamId: filter.teamId, limit: filter.limit, after: filter.after }))
        )
      })
    })
  )
}
