/** Members: a user or service principal belonging to a workspace, at most once per workspace. */
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Order, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../identity/memoryTable.ts"
import { newestFirst, WorkspaceTables } from "./MemoryTables.ts"
import { MemberRow, OrganizationRow, SubjectType } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of adding a subject to a workspace it already belongs to. */
export const membersSubjectConstraint = "members_org_subject_key"

const uniques: ReadonlyArray<UniqueKey<MemberRow>> = [
  primaryKey("members_pkey"),
  {
    constraint: membersSubjectConstraint,
    key: (member) => compositeKey(member.orgId, member.subjectType, member.subjectId)
  }
]

const Membership = Schema.Struct({ orgId: OrgId, subjectType: SubjectType, subjectId: Schema.String })
const Subject = Schema.Struct({ subjectType: SubjectType, subjectId: Schema.String })

/** `order by joined_at desc, id desc`: a workspace's members, newest first. */
const newestMemberFirst = Order.mapInput(newestFirst, (member: MemberRow) => ({ createdAt: member.joinedAt, id: member.id }))

/** Workspace memberships. */
export class MembersRepo extends Context.Service<MembersRepo, {
  /** `UniqueViolation` when the subject is already a member of that workspace. */
  readonly insert: (member: MemberRow) => Effect.Effect<void, UniqueViolation>
  readonly find: (orgId: OrgId, subjectType: SubjectType, subjectId: string) => Effect.Effect<Option.Option<MemberRow>>
  /** The workspace's members, newest first (joinedAt desc, id desc). */
  readonly listByOrg: (orgId: OrgId) => Effect.Effect<ReadonlyArray<MemberRow>>
  /** The workspaces the subject is an active member of, newest first (createdAt desc, id desc). */
  readonly listOrgsForSubject: (
    subjectType: SubjectType,
    subjectId: string
  ) => Effect.Effect<ReadonlyArray<OrganizationRow>>
}>()("@cp/persistence/workspaces/MembersRepo") {
  /** Members in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    MembersRepo,
    Effect.gen(function*() {
      const { members, organizations } = yield* WorkspaceTables
      const where = (predicate: (member: MemberRow) => boolean) => Array.from(members.values()).filter(predicate)
      return MembersRepo.of({
        insert: Effect.fn("MembersRepo.insert")((member: MemberRow) => insertUnique(members, member.id, member, uniques)),
        find: Effect.fn("MembersRepo.find")(function*(orgId: OrgId, subjectType: SubjectType, subjectId: string) {
          return Option.fromUndefinedOr(
            where((member) =>
              member.orgId === orgId && member.subjectType === subjectType && member.subjectId === subjectId
            )[0]
          )
        }),
        listByOrg: Effect.fn("MembersRepo.listByOrg")(function*(orgId: OrgId) {
          return where((member) => member.orgId === orgId).sort(newestMemberFirst)
        }),
        listOrgsForSubject: Effect.fn("MembersRepo.listOrgsForSubject")(
          function*(subjectType: SubjectType, subjectId: string) {
            return where((member) =>
              member.subjectType === subjectType && member.subjectId === subjectId && member.status === "active"
            )
              .flatMap((member) => Option.toArray(Option.fromUndefinedOr(organizations.get(member.orgId))))
              .sort(newestFirst)
          }
        )
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer))

  /** Members in the `members` table. */
  static readonly sql = Layer.effect(
    MembersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: MemberRow,
        execute: (member) => sql`insert into members ${sql.insert(member)}`
      })
      const find = SqlSchema.findOneOption({
        Request: Membership,
        Result: MemberRow,
        execute: ({ orgId, subjectType, subjectId }) =>
          sql`
            select * from members
            where org_id = ${orgId} and subject_type = ${subjectType} and subject_id = ${subjectId}`
      })
      const listByOrg = SqlSchema.findAll({
        Request: OrgId,
        Result: MemberRow,
        execute: (orgId) => sql`select * from members where org_id = ${orgId} order by joined_at desc, id desc`
      })
      const listOrgsForSubject = SqlSchema.findAll({
        Request: Subject,
        Result: OrganizationRow,
        execute: ({ subjectType, subjectId }) =>
          sql`
            select o.* from members m join organizations o on o.id = m.org_id
            where m.subject_type = ${subjectType} and m.subject_id = ${subjectId} and m.status = 'active'
            order by o.created_at desc, o.id desc`
      })
      return MembersRepo.of({
        insert: Effect.fn("MembersRepo.insert")((member: MemberRow) => uniqueViolationOrDie(insert(member))),
        find: Effect.fn("MembersRepo.find")((orgId: OrgId, subjectType: SubjectType, subjectId: string) =>
          Effect.orDie(find({ orgId, subjectType, subjectId }))
        ),
        listByOrg: Effect.fn("MembersRepo.listByOrg")((orgId: OrgId) => Effect.orDie(listByOrg(orgId))),
        listOrgsForSubject: Effect.fn("MembersRepo.listOrgsForSubject")((subjectType: SubjectType, subjectId: string) =>
          Effect.orDie(listOrgsForSubject({ subjectType, subjectId }))
        )
      })
    })
  )
}
