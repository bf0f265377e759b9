/** Role bindings: which role a user or service principal holds on a workspace, a project in it, or its account. */
import { Role } from "@cp/domain/access"
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { bindingsOfSubject, oldestFirst, WorkspaceTables } from "./MemoryTables.ts"
import { RoleBindingRow, SubjectType } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of granting the same role on the same scope twice. */
export const roleBindingsGrantConstraint = "role_bindings_grant_key"

const uniques: ReadonlyArray<UniqueKey<RoleBindingRow>> = [
  primaryKey("role_bindings_pkey"),
  {
    constraint: roleBindingsGrantConstraint,
    key: (binding) =>
      compositeKey(
        binding.orgId,
        binding.subjectType,
        binding.subjectId,
        binding.role,
        binding.scopeKind,
        binding.scopeRef
      )
  }
]

const SubjectInOrgs = Schema.Struct({
  orgIds: Schema.Array(OrgId),
  subjectType: SubjectType,
  subjectId: Schema.String
})

const SubjectsInOrg = Schema.Struct({ orgId: OrgId, subjectIds: Schema.Array(Schema.String) })
const RoleInOrg = Schema.Struct({ orgId: OrgId, role: Role })
const SubjectInOrg = Schema.Struct({ orgId: OrgId, subjectType: SubjectType, subjectId: Schema.String })

/** Role bindings of direct subjects (team grants live with teams); reads return them in grant order. */
export class RoleBindingsRepo extends Context.Service<RoleBindingsRepo, {
  /** `UniqueViolation` when the subject already holds that role on that scope. */
  readonly insert: (binding: RoleBindingRow) => Effect.Effect<void, UniqueViolation>
  readonly listForSubject: (
    orgId: OrgId,
    subjectType: SubjectType,
    subjectId: string
  ) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** The subject's bindings on any of `orgIds` in one query: a child workspace and its account root, say. */
  readonly listForSubjectInOrgs: (
    orgIds: ReadonlyArray<OrgId>,
    subjectType: SubjectType,
    subjectId: string
  ) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** The bindings on `orgId` of any subject among `subjectIds` (of either subject type), in grant order. */
  readonly listForSubjectsInOrg: (
    orgId: OrgId,
    subjectIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** Every binding of `role` on `orgId`, any scope and subject, in grant order: the owners of a workspace, say. */
  readonly listByRoleInOrg: (orgId: OrgId, role: Role) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** Deletes every binding the subject holds on `orgId` (not on other workspaces) and returns them, in grant order. */
  readonly removeForSubject: (
    orgId: OrgId,
    subjectType: SubjectType,
    subjectId: string
  ) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
}>()("@cp/persistence/workspaces/RoleBindingsRepo") {
  /** Bindings in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    RoleBindingsRepo,
    Effect.gen(function*() {
      const { roleBindings } = yield* WorkspaceTables
      return RoleBindingsRepo.of({
        insert: Effect.fn("RoleBindingsRepo.insert")((binding: RoleBindingRow) =>
          insertUnique(roleBindings, binding.id, binding, uniques)
        ),
        listForSubject: Effect.fn("RoleBindingsRepo.listForSubject")(
          function*(orgId: OrgId, subjectType: SubjectType, subjectId: string) {
            return bindingsOfSubject(roleBindings, [orgId], subjectType, subjectId)
          }
        ),
        listForSubjectInOrgs: Effect.fn("RoleBindingsRepo.listForSubjectInOrgs")(
          function*(orgIds: ReadonlyArray<OrgId>, subjectType: SubjectType, subjectId: string) {
            return bindingsOfSubject(roleBindings, orgIds, subjectType, subjectId)
          }
        ),
        listForSubjectsInOrg: Effect.fn("RoleBindingsRepo.listForSubjectsInOrg")(
          function*(orgId: OrgId, subjectIds: ReadonlyArray<string>) {
            return Array.from(roleBindings.values())
              .filter((binding) => binding.orgId === orgId && subjectIds.includes(binding.subjectId))
              .sort(oldestFirst)
          }
        ),
        listByRoleInOrg: Effect.fn("RoleBindingsRepo.listByRoleInOrg")(function*(orgId: OrgId, role: Role) {
          return Array.from(roleBindings.values())
            .filter((binding) => binding.orgId === orgId && binding.role === role)
            .sort(oldestFirst)
        }),
        removeForSubject: Effect.fn("RoleBindingsRepo.removeForSubject")(
          (orgId: OrgId, subjectType: SubjectType, subjectId: string) =>
            atomically((changes) => {
              const removed = bindingsOfSubject(roleBindings, [orgId], subjectType, subjectId)
              for (const binding of removed) changes.delete(roleBindings, binding.id)
              return Effect.succeed(removed)
            })
        )
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer))

  /** Bindings in the `role_bindings` table. */
  static readonly sql = Layer.effect(
    RoleBindingsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: RoleBindingRow,
        execute: (binding) => sql`insert into role_bindings ${sql.insert(binding)}`
      })
      const listForSubjectInOrgs = SqlSchema.findAll({
        Request: SubjectInOrgs,
        Result: RoleBindingRow,
        execute: ({ orgIds, subjectType, subjectId }) =>
          sql`
            select * from role_bindings
            where org_id = any(${orgIds}) and subject_type = ${subjectType} and subject_id = ${subjectId}
            order by created_at, id`
      })
      const listForSubjectsInOrg = SqlSchema.findAll({
        Request: SubjectsInOrg,
        Result: RoleBindingRow,
        execute: ({ orgId, subjectIds }) =>
          sql`
            select * from role_bindings
            where org_id = ${orgId} and subject_id = any(${subjectIds})
            order by created_at, id`
      })
      const listByRoleInOrg = SqlSchema.findAll({
        Request: RoleInOrg,
        Result: RoleBindingRow,
        execute: ({ orgId, role }) =>
          sql`select * from role_bindings where org_id = ${orgId} and role = ${role} order by created_at, id`
      })
      const removeForSubject = SqlSchema.findAll({
        Request: SubjectInOrg,
        Result: RoleBindingRow,
        execute: ({ orgId, subjectType, subjectId }) =>
          sql`
            delete from role_bindings
            where org_id = ${orgId} and subject_type = ${subjectType} and subject_id = ${subjectId}
            returning *`
      })
      return RoleBindingsRepo.of({
        listForSubjectsInOrg: Effect.fn("RoleBindingsRepo.listForSubjectsInOrg")(
          (orgId: OrgId, subjectIds: ReadonlyArray<string>) =>
            subjectIds.length === 0 ? Effect.succeed([]) : Effect.orDie(listForSubjectsInOrg({ orgId, subjectIds }))
        ),
        listByRoleInOrg: Effect.fn("RoleBindingsRepo.listByRoleInOrg")((orgId: OrgId, role: Role) =>
          Effect.orDie(listByRoleInOrg({ orgId, role }))
        ),
        // `returning` gives no order: sort like every other read.
        removeForSubject: Effect.fn("RoleBindingsRepo.removeForSubject")(
          (orgId: OrgId, subjectType: SubjectType, subjectId: string) =>
            removeForSubject({ orgId, subjectType, subjectId }).pipe(
              Effect.map((rows) => [...rows].sort(oldestFirst)),
              Effect.orDie
            )
        ),
        insert: Effect.fn("RoleBindingsRepo.insert")((binding: RoleBindingRow) =>
          uniqueViolationOrDie(insert(binding))
        ),
        listForSubject: Effect.fn("RoleBindingsRepo.listForSubject")(
          (orgId: OrgId, subjectType: SubjectType, subjectId: string) =>
            Effect.orDie(listForSubjectInOrgs({ orgIds: [orgId], subjectType, subjectId }))
        ),
        listForSubjectInOrgs: Effect.fn("RoleBindingsRepo.listForSubjectInOrgs")(
          (orgIds: ReadonlyArray<OrgId>, subjectType: SubjectType, subjectId: string) =>
            Effect.orDie(listForSubjectInOrgs({ orgIds, subjectType, subjectId }))
        )
      })
    })
  )
}
