/** Members: a user or service principal belonging to a workspace, at most once per workspace. */
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, keysetQuery, newestFirst, pageFields, type PagePosition, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { SubjectTables, withProfile, withSubjectProfile } from "../subjects.ts"
import { WorkspaceTables } from "../workspaces/MemoryTables.ts"
import { OrganizationRow, Subject, SubjectInOrg } from "../workspaces/rows.ts"
import { MemberKey, MemberListing, MemberRow, MembersPage } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of adding a subject to a workspace it already belongs to. */
export const membersSubjectConstraint = "members_org_subject_key"

const uniques: ReadonlyArray<UniqueKey<MemberRow>> = [
  primaryKey("members_pkey"),
  {
    constraint: membersSubjectConstraint,
    key: (member) => compositeKey(member.orgId, member.subjectType, member.subjectId)
  }
]

/** A workspace's members page by (joinedAt, id). */
export const memberPosition = (member: MemberRow): PagePosition => ({ at: member.joinedAt, key: member.id })

const RemovedRow = Schema.Struct({ id: Schema.String })

/** A page of one subject's workspaces. */
export const SubjectOrgsPage = Schema.Struct({ ...Subject.fields, ...pageFields })
export type SubjectOrgsPage = typeof SubjectOrgsPage.Type

/** Workspace memberships. */
export class MembersRepo extends Context.Service<MembersRepo, {
  /** `UniqueViolation` when the subject is already a member of that workspace. */
  readonly insert: (member: MemberRow) => Effect.Effect<void, UniqueViolation>
  readonly find: (membership: SubjectInOrg) => Effect.Effect<Option.Option<MemberRow>>
  /** The workspace's members, newest first (joinedAt desc, id desc). */
  readonly listByOrg: (orgId: OrgId) => Effect.Effect<ReadonlyArray<MemberRow>>
  /** A page of the workspaces the subject is an active member of, newest first (createdAt desc, id desc). */
  readonly pageOrgsForSubject: (page: SubjectOrgsPage) => Effect.Effect<ReadonlyArray<OrganizationRow>>
  /** The member with this id in this workspace, with its subject's profile (another workspace's member is None). */
  readonly findById: (key: MemberKey) => Effect.Effect<Option.Option<MemberListing>>
  /** Up to `limit` of the workspace's members strictly after `after`, newest first, with their subjects' profiles. */
  readonly listPage: (page: MembersPage) => Effect.Effect<ReadonlyArray<MemberListing>>
  /** Deletes the membership; false when it was already gone. */
  readonly remove: (key: MemberKey) => Effect.Effect<boolean>
}>()("@cp/persistence/members/MembersRepo") {
  /** Members in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    MembersRepo,
    Effect.gen(function*() {
      const { members, organizations } = yield* WorkspaceTables
      const subjects = yield* SubjectTables
      const where = (predicate: (member: MemberRow) => boolean) => Array.from(members.values()).filter(predicate)
      const memberIn = ({ orgId, id }: MemberKey) =>
        Option.filter(Option.fromUndefinedOr(members.get(id)), (member) => member.orgId === orgId)
      return MembersRepo.of({
        insert: (member) => insertUnique(members, member.id, member, uniques),
        find: ({ orgId, subjectType, subjectId }) =>
          Effect.sync(() =>
            Option.fromUndefinedOr(
              where((member) =>
                member.orgId === orgId && member.subjectType === subjectType && member.subjectId === subjectId
              )[0]
            )
          ),
        listByOrg: (orgId) =>
          Effect.sync(() =>
            where((member) => member.orgId === orgId).sort((a, b) => newestFirst(memberPosition(a), memberPosition(b)))
          ),
        pageOrgsForSubject: ({ subjectType, subjectId, ...window }) =>
          Effect.sync(() =>
            windowOf(
              where((member) =>
                member.subjectType === subjectType && member.subjectId === subjectId && member.status === "active"
              ).flatMap((member) => Option.toArray(Option.fromUndefinedOr(organizations.get(member.orgId)))),
              idPosition,
              window
            )
          ),
        findById: (key) => Effect.sync(() => Option.map(memberIn(key), (member) => withProfile(subjects, member))),
        listPage: (page) =>
          Effect.sync(() =>
            windowOf(where((member) => member.orgId === page.orgId), memberPosition, page)
              .map((member) => withProfile(subjects, member))
          ),
        remove: (key) =>
          atomically((changes) => {
            if (Option.isNone(memberIn(key))) return Effect.succeed(false)
            changes.delete(members, key.id)
            return Effect.succeed(true)
          })
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer), Layer.provide(SubjectTables.layer))

  /** Members in the `members` table. */
  static readonly sql = Layer.effect(
    MembersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const listings = withSubjectProfile(sql, sql`members`)
      return MembersRepo.of({
        insert: insertRow(sql, "members", MemberRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: SubjectInOrg,
            Result: MemberRow,
            execute: ({ orgId, subjectType, subjectId }) =>
              sql`
                select * from members
                where org_id = ${orgId} and subject_type = ${subjectType} and subject_id = ${subjectId}`
          }),
          Effect.orDie
        ),
        listByOrg: flow(
          SqlSchema.findAll({
            Request: OrgId,
            Result: MemberRow,
            execute: (orgId) => sql`select * from members where org_id = ${orgId} order by joined_at desc, id desc`
          }),
          Effect.orDie
        ),
        pageOrgsForSubject: flow(
          SqlSchema.findAll({
            Request: SubjectOrgsPage,
            Result: OrganizationRow,
            // The subject's memberships by index (`members_subject_idx`), the page cut and ordered in the statement.
            execute: ({ subjectType, subjectId, ...window }) =>
              keysetQuery(
                sql,
                sql`select o.* from members m join organizations o on o.id = m.org_id`,
                [sql`m.subject_type = ${subjectType} and m.subject_id = ${subjectId} and m.status = 'active'`],
                window,
                { at: "o.created_at", key: "o.id" }
              )
          }),
          Effect.orDie
        ),
        findById: flow(
          SqlSchema.findOneOption({
            Request: MemberKey,
            Result: MemberListing,
            execute: ({ orgId, id }) => sql`${listings} where s.id = ${id} and s.org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        listPage: flow(
          SqlSchema.findAll({
            Request: MembersPage,
            Result: MemberListing,
            execute: ({ orgId, ...window }) =>
              keysetQuery(sql, listings, [sql`s.org_id = ${orgId}`], window, { at: "s.joined_at", key: "s.id" })
          }),
          Effect.orDie
        ),
        remove: flow(
          SqlSchema.findOneOption({
            Request: MemberKey,
            Result: RemovedRow,
            execute: ({ orgId, id }) => sql`delete from members where id = ${id} and org_id = ${orgId} returning id`
          }),
          Effect.map(Option.isSome),
          Effect.orDie
        )
      })
    })
  )
}
