/** Members: a user or service principal belonging to a workspace, at most once per workspace. */
import { MemberId, OrgId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Order, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
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

/** Keyset position in a workspace's member list: the last member of the previous page. */
export interface MemberKey {
  readonly joinedAt: Date
  readonly id: string
}

/** One keyset page of a workspace's members, newest first. */
export interface MemberPageQuery {
  readonly orgId: OrgId
  /** At most this many rows come back: ask for one more than the page size to learn whether another page follows. */
  readonly limit: number
  /** Exclusive: the page holds the members strictly after this key in the list's order. */
  readonly after?: MemberKey
}

const MemberById = Schema.Struct({ orgId: OrgId, id: MemberId })
const MemberPage = Schema.Struct({
  orgId: OrgId,
  limit: Schema.Int,
  after: Schema.optionalKey(Schema.Struct({ joinedAt: Schema.Date, id: Schema.String }))
})
const LockedOrg = Schema.Struct({ id: OrgId })
const RemovedMember = Schema.Struct({ id: MemberId })

/** `order by joined_at desc, id desc`: a workspace's members, newest first. */
const newestMemberFirst = Order.mapInput(newestFirst, (key: MemberKey) => ({ createdAt: key.joinedAt, id: key.id }))

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
  /** The member with this id in this workspace (a member of another workspace is None). */
  readonly findById: (orgId: OrgId, id: MemberId) => Effect.Effect<Option.Option<MemberRow>>
  /** Up to `limit` of the workspace's members strictly after `after`, newest first (joinedAt desc, id desc). */
  readonly listPage: (query: MemberPageQuery) => Effect.Effect<ReadonlyArray<MemberRow>>
  /** Deletes the membership; false when it was already gone. */
  readonly remove: (orgId: OrgId, id: MemberId) => Effect.Effect<boolean>
  /**
   * Serializes membership changes of one workspace: holds a row lock on the workspace until the surrounding
   * transaction ends, so checks such as "another owner remains" cannot race. Call inside `Transactor.withTransaction`
   * (the memory flavour needs nothing: its transactions already run one at a time). False for an unknown workspace.
   */
  readonly lockWorkspace: (orgId: OrgId) => Effect.Effect<boolean>
}>()("@cp/persistence/workspaces/MembersRepo") {
  /** Members in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    MembersRepo,
    Effect.gen(function*() {
      const { members, organizations } = yield* WorkspaceTables
      const where = (predicate: (member: MemberRow) => boolean) => Array.from(members.values()).filter(predicate)
      return MembersRepo.of({
        insert: Effect.fn("MembersRepo.insert")((member: MemberRow) =>
          insertUnique(members, member.id, member, uniques)
        ),
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
        ),
        findById: Effect.fn("MembersRepo.findById")(function*(orgId: OrgId, id: MemberId) {
          return Option.filter(Option.fromUndefinedOr(members.get(id)), (member) => member.orgId === orgId)
        }),
        listPage: Effect.fn("MembersRepo.listPage")(function*({ orgId, limit, after }: MemberPageQuery) {
          return where((member) =>
            member.orgId === orgId &&
            (after === undefined || newestMemberFirst(member, after) > 0)
          )
            .sort(newestMemberFirst)
            .slice(0, limit)
        }),
        remove: Effect.fn("MembersRepo.remove")((orgId: OrgId, id: MemberId) =>
          atomically((changes) => {
            const member = members.get(id)
            if (member === undefined || member.orgId !== orgId) return Effect.succeed(false)
            changes.delete(members, id)
            return Effect.succeed(true)
          })
        ),
        lockWorkspace: Effect.fn("MembersRepo.lockWorkspace")(function*(orgId: OrgId) {
          return organizations.has(orgId)
        })
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
      const findById = SqlSchema.findOneOption({
        Request: MemberById,
        Result: MemberRow,
        execute: ({ orgId, id }) => sql`select * from members where id = ${id} and org_id = ${orgId}`
      })
      const listPage = SqlSchema.findAll({
        Request: MemberPage,
        Result: MemberRow,
        execute: ({ orgId, limit, after }) =>
          sql`
            select * from members
            where ${
            sql.and([
              sql`org_id = ${orgId}`,
              ...(after === undefined ? [] : [sql`(joined_at, id) < (${after.joinedAt}, ${after.id})`])
            ])
          }
            order by joined_at desc, id desc
            limit ${limit}`
      })
      const remove = SqlSchema.findAll({
        Request: MemberById,
        Result: RemovedMember,
        execute: ({ orgId, id }) => sql`delete from members where id = ${id} and org_id = ${orgId} returning id`
      })
      // `for no key update` conflicts only with itself (and stronger locks): rows referencing the workspace can still
      // be inserted meanwhile, their foreign-key checks take `for key share`.
      const lockWorkspace = SqlSchema.findAll({
        Request: OrgId,
        Result: LockedOrg,
        execute: (orgId) => sql`select id from organizations where id = ${orgId} for no key update`
      })
      return MembersRepo.of({
        findById: Effect.fn("MembersRepo.findById")((orgId: OrgId, id: MemberId) =>
          Effect.orDie(findById({ orgId, id }))
        ),
        listPage: Effect.fn("MembersRepo.listPage")((query: MemberPageQuery) => Effect.orDie(listPage(query))),
        remove: Effect.fn("MembersRepo.remove")((orgId: OrgId, id: MemberId) =>
          remove({ orgId, id }).pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
        ),
        lockWorkspace: Effect.fn("MembersRepo.lockWorkspace")((orgId: OrgId) =>
          lockWorkspace(orgId).pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
        ),
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
