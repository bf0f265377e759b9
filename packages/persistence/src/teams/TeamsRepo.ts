/**
 * Teams with their members and role grants: one aggregate, so one repository. Deleting a team deletes its members
 * and grants with it (`on delete cascade`), so a deleted team's grants stop applying in the same statement.
 */
import { TeamId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import {
  idPosition,
  isSlugOfFamily,
  keysetQuery,
  oldestFirst,
  type PagePosition,
  slugFamilyQuery,
  SlugRow,
  slugsOf,
  windowOf
} from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { SubjectTables, withProfile, withSubjectProfile } from "../subjects.ts"
import {
  TeamGrantRow,
  TeamGrantsPage,
  TeamGrantTuple,
  TeamKey,
  TeamMemberKey,
  TeamMemberListing,
  TeamMemberRow,
  TeamMembersPage,
  TeamRow,
  TeamSlugFamily,
  TeamsPage,
  TeamUpdate
} from "./rows.ts"
import { grantKey, memberKey, TeamTables } from "./TeamTables.ts"

/** The constraint behind the `UniqueViolation` of a slug already taken in the workspace. */
export const teamsSlugConstraint = "teams_org_slug_key"
/** The constraint behind the `UniqueViolation` of adding a subject to a team twice. */
export const teamMembersConstraint = "team_members_pkey"
/** The constraint behind the `UniqueViolation` of granting a team the same role on the same scope twice. */
export const teamGrantsConstraint = "team_role_grants_grant_key"

const teamUniques: ReadonlyArray<UniqueKey<TeamRow>> = [
  primaryKey("teams_pkey"),
  { constraint: teamsSlugConstraint, key: (team) => `${team.orgId} ${team.slug}` }
]
const memberUniques: ReadonlyArray<UniqueKey<TeamMemberRow>> = [{ constraint: teamMembersConstraint, key: memberKey }]
const grantUniques: ReadonlyArray<UniqueKey<TeamGrantRow>> = [
  primaryKey("team_role_grants_pkey"),
  { constraint: teamGrantsConstraint, key: grantKey }
]

/** Team members page by subject id: a subject is a team's member at most once. */
export const teamMemberPosition = (member: TeamMemberRow): PagePosition => ({
  at: member.createdAt,
  key: member.subjectId
})

export class TeamsRepo extends Context.Service<TeamsRepo, {
  /** `UniqueViolation` on `teams_org_slug_key` when the workspace already has a team with that slug. */
  readonly insert: (team: TeamRow) => Effect.Effect<void, UniqueViolation>
  /** The team with this id in this workspace (a team of another workspace is None). */
  readonly find: (key: TeamKey) => Effect.Effect<Option.Option<TeamRow>>
  /**
   * `find` that also locks the team against deletion until the surrounding transaction ends, so a member or grant
   * added to it cannot outlive it (a concurrent delete waits, or has already happened and this is None).
   */
  readonly findLocked: (key: TeamKey) => Effect.Effect<Option.Option<TeamRow>>
  /** Up to `limit` of the workspace's teams strictly after `after`, newest first (createdAt desc, id desc). */
  readonly list: (page: TeamsPage) => Effect.Effect<ReadonlyArray<TeamRow>>
  /** The workspace's taken slugs among `base` and `base-<n>`, from which the caller picks the next free suffix. */
  readonly slugsStartingWith: (family: TeamSlugFamily) => Effect.Effect<ReadonlyArray<string>>
  /** Renames the team; None when it is not in this workspace; `UniqueViolation` when the new slug is taken. */
  readonly update: (change: TeamUpdate) => Effect.Effect<Option.Option<TeamRow>, UniqueViolation>
  /** Deletes the team with its members and grants; the deleted row, or None when it was not there. */
  readonly delete: (key: TeamKey) => Effect.Effect<Option.Option<TeamRow>>
  /**
   * Adds the member and answers it with its subject's profile; `UniqueViolation` on `team_members_pkey` when the
   * subject is already a member of the team.
   */
  readonly insertMember: (member: TeamMemberRow) => Effect.Effect<TeamMemberListing, UniqueViolation>
  /**
   * Up to `limit` of the team's members strictly after `after`, newest first (createdAt desc, subjectId desc), with
   * their subjects' profiles.
   */
  readonly listMembers: (page: TeamMembersPage) => Effect.Effect<ReadonlyArray<TeamMemberListing>>
  /** Removes the subject from the team; the removed row, or None when it was not a member. */
  readonly deleteMember: (key: TeamMemberKey) => Effect.Effect<Option.Option<TeamMemberRow>>
  /** `UniqueViolation` on `team_role_grants_grant_key` when the team already holds that role on that scope. */
  readonly insertGrant: (grant: TeamGrantRow) => Effect.Effect<void, UniqueViolation>
  /** Revokes the grant the tuple names; the revoked row, or None when the team did not hold it. */
  readonly deleteGrant: (tuple: TeamGrantTuple) => Effect.Effect<Option.Option<TeamGrantRow>>
  /** Every grant the team holds, in grant order (createdAt, id). */
  readonly grantsOf: (teamId: TeamId) => Effect.Effect<ReadonlyArray<TeamGrantRow>>
  /** Up to `limit` grants of the workspace's teams (or of one team) strictly after `after`, newest first. */
  readonly listGrants: (page: TeamGrantsPage) => Effect.Effect<ReadonlyArray<TeamGrantRow>>
}>()("@cp/persistence/teams/TeamsRepo") {
  /** Teams in memory, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    TeamsRepo,
    Effect.gen(function*() {
      const { grants, members, teams } = yield* TeamTables
      const subjects = yield* SubjectTables
      const teamIn = ({ orgId, teamId }: TeamKey) =>
        Option.filter(Option.fromUndefinedOr(teams.get(teamId)), (team) => team.orgId === orgId)
      /** Deletes the row under `key` and answers it, like `delete … returning *`. */
      const deleteFrom = <Row extends {}>(table: Map<string, Row>, key: string) =>
        atomically((changes) => {
          const current = Option.fromUndefinedOr(table.get(key))
          if (Option.isSome(current)) changes.delete(table, key)
          return Effect.succeed(current)
        })
      return TeamsRepo.of({
        insert: (team) => insertUnique(teams, team.id, team, teamUniques),
        find: (key) => Effect.sync(() => teamIn(key)),
        findLocked: (key) => Effect.sync(() => teamIn(key)),
        list: (page) =>
          Effect.sync(() =>
            windowOf(Array.from(teams.values()).filter((team) => team.orgId === page.orgId), idPosition, page)
          ),
        slugsStartingWith: ({ orgId, base }) =>
          Effect.sync(() =>
            Array.from(teams.values()).filter((team) => team.orgId === orgId && isSlugOfFamily(base)(team.slug))
              .map((team) => team.slug)
          ),
        update: (change) =>
          atomically((changes) => {
            const current = teamIn(change)
            if (Option.isNone(current)) return Effect.succeed(Option.none<TeamRow>())
            const next: TeamRow = {
              ...current.value,
              name: change.name ?? current.value.name,
              slug: change.slug ?? current.value.slug,
              updatedAt: change.updatedAt
            }
            const taken = Array.from(teams.values()).some((team) =>
              team.orgId === next.orgId && team.id !== next.id && team.slug === next.slug
            )
            if (taken) return Effect.fail(new UniqueViolation({ constraint: teamsSlugConstraint }))
            changes.set(teams, next.id, next)
            return Effect.succeed(Option.some(next))
          }),
        delete: (key) =>
          atomically((changes) => {
            const current = teamIn(key)
            if (Option.isSome(current)) {
              changes.delete(teams, key.teamId)
              for (const [id, member] of members) if (member.teamId === key.teamId) changes.delete(members, id)
              for (const [id, grant] of grants) if (grant.teamId === key.teamId) changes.delete(grants, id)
            }
            return Effect.succeed(current)
          }),
        insertMember: (member) =>
          insertUnique(members, memberKey(member), member, memberUniques).pipe(
            Effect.map(() => withProfile(subjects, member))
          ),
        listMembers: (page) =>
          Effect.sync(() =>
            windowOf(
              Array.from(members.values()).filter((member) => member.teamId === page.teamId),
              teamMemberPosition,
              page
            ).map((member) => withProfile(subjects, member))
          ),
        deleteMember: (key) => deleteFrom(members, memberKey(key)),
        insertGrant: (grant) => insertUnique(grants, grantKey(grant), grant, grantUniques),
        deleteGrant: (tuple) => deleteFrom(grants, grantKey(tuple)),
        grantsOf: (teamId) =>
          Effect.sync(() =>
            Array.from(grants.values()).filter((grant) => grant.teamId === teamId)
              .sort((a, b) => oldestFirst(idPosition(a), idPosition(b)))
          ),
        listGrants: (page) =>
          Effect.sync(() => {
            const rows = Array.from(grants.values()).filter((grant) =>
              teams.get(grant.teamId)?.orgId === page.orgId &&
              (page.teamId === undefined || grant.teamId === page.teamId)
            )
            return windowOf(rows, idPosition, page)
          })
      })
    })
  ).pipe(Layer.provide(TeamTables.layer), Layer.provide(SubjectTables.layer))

  /** Teams in the `teams`, `team_members` and `team_role_grants` tables. */
  static readonly sql = Layer.effect(
    TeamsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return TeamsRepo.of({
        insert: insertRow(sql, "teams", TeamRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: TeamKey,
            Result: TeamRow,
            execute: ({ orgId, teamId }) => sql`select * from teams where id = ${teamId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        // `for key share` conflicts only with deleting the row (or changing its key), not with renames or reads.
        findLocked: flow(
          SqlSchema.findOneOption({
            Request: TeamKey,
            Result: TeamRow,
            execute: ({ orgId, teamId }) =>
              sql`select * from teams where id = ${teamId} and org_id = ${orgId} for key share`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: TeamsPage,
            Result: TeamRow,
            execute: ({ orgId, ...window }) =>
              keysetQuery(sql, sql`select * from teams`, [sql`org_id = ${orgId}`], window)
          }),
          Effect.orDie
        ),
        slugsStartingWith: flow(
          SqlSchema.findAll({
            Request: TeamSlugFamily,
            Result: SlugRow,
            execute: ({ orgId, base }) => slugFamilyQuery(sql, "teams", [sql`org_id = ${orgId}`], base)
          }),
          slugsOf,
          Effect.orDie
        ),
        update: flow(
          SqlSchema.findOneOption({
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
          }),
          uniqueViolationOrDie
        ),
        delete: flow(
          SqlSchema.findOneOption({
            Request: TeamKey,
            Result: TeamRow,
            execute: ({ orgId, teamId }) =>
              sql`delete from teams where id = ${teamId} and org_id = ${orgId} returning *`
          }),
          Effect.orDie
        ),
        // One statement inserts the row and reads it back with its subject's profile.
        insertMember: flow(
          SqlSchema.findOne({
            Request: TeamMemberRow,
            Result: TeamMemberListing,
            execute: (member) =>
              sql`
                with inserted as (insert into team_members ${sql.insert(member)} returning *)
                ${withSubjectProfile(sql, sql`inserted`)}`
          }),
          Effect.catchTag("NoSuchElementError", Effect.die),
          uniqueViolationOrDie
        ),
        listMembers: flow(
          SqlSchema.findAll({
            Request: TeamMembersPage,
            Result: TeamMemberListing,
            execute: ({ teamId, ...window }) =>
              keysetQuery(sql, withSubjectProfile(sql, sql`team_members`), [sql`s.team_id = ${teamId}`], window, {
                at: "s.created_at",
                key: "s.subject_id"
              })
          }),
          Effect.orDie
        ),
        deleteMember: flow(
          SqlSchema.findOneOption({
            Request: TeamMemberKey,
            Result: TeamMemberRow,
            execute: ({ teamId, subjectType, subjectId }) =>
              sql`
                delete from team_members
                where team_id = ${teamId} and subject_type = ${subjectType} and subject_id = ${subjectId}
                returning *`
          }),
          Effect.orDie
        ),
        insertGrant: insertRow(sql, "team_role_grants", TeamGrantRow),
        deleteGrant: flow(
          SqlSchema.findOneOption({
            Request: TeamGrantTuple,
            Result: TeamGrantRow,
            execute: ({ teamId, role, scopeKind, scopeRef }) =>
              sql`
                delete from team_role_grants
                where team_id = ${teamId} and role = ${role} and scope_kind = ${scopeKind}
                  and scope_ref is not distinct from ${scopeRef}
                returning *`
          }),
          Effect.orDie
        ),
        grantsOf: flow(
          SqlSchema.findAll({
            Request: TeamId,
            Result: TeamGrantRow,
            execute: (teamId) => sql`select * from team_role_grants where team_id = ${teamId} order by created_at, id`
          }),
          Effect.orDie
        ),
        listGrants: flow(
          SqlSchema.findAll({
            Request: TeamGrantsPage,
            Result: TeamGrantRow,
            execute: ({ orgId, teamId, ...window }) =>
              keysetQuery(
                sql,
                sql`select g.* from team_role_grants g join teams t on t.id = g.team_id`,
                [sql`t.org_id = ${orgId}`, ...(teamId === undefined ? [] : [sql`g.team_id = ${teamId}`])],
                window,
                { at: "g.created_at", key: "g.id" }
              )
          }),
          Effect.orDie
        )
      })
    })
  )
}
