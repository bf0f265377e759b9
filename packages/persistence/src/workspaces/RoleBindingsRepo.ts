/** Role bindings: which role a user or service principal holds on a workspace, a project in it, or its account. */
import { Context, Effect, flow, Layer } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { createdOldestFirst } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { bindingsOfSubject, WorkspaceTables } from "./MemoryTables.ts"
import { RoleBindingRow, RoleInOrg, SubjectInOrg, SubjectInOrgs, SubjectsInOrg } from "./rows.ts"

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

/** The subject's bindings on one workspace, as the several-workspaces read asks for them. */
const onOneOrg = ({ orgId, ...subject }: SubjectInOrg): SubjectInOrgs => ({ orgIds: [orgId], ...subject })

/** Role bindings of direct subjects (team grants live with teams); reads return them in grant order. */
export class RoleBindingsRepo extends Context.Service<RoleBindingsRepo, {
  /** `UniqueViolation` when the subject already holds that role on that scope. */
  readonly insert: (binding: RoleBindingRow) => Effect.Effect<void, UniqueViolation>
  readonly listForSubject: (subject: SubjectInOrg) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** The subject's bindings on any of `orgIds` in one query: a child workspace and its account root, say. */
  readonly listForSubjectInOrgs: (subject: SubjectInOrgs) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** The bindings on `orgId` of any subject among `subjectIds` (of either subject type), in grant order. */
  readonly listForSubjectsInOrg: (subjects: SubjectsInOrg) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** Every binding of `role` on `orgId`, any scope and subject, in grant order: the owners of a workspace, say. */
  readonly listByRoleInOrg: (role: RoleInOrg) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
  /** Deletes every binding the subject holds on `orgId` (not on other workspaces) and returns them, in grant order. */
  readonly removeForSubject: (subject: SubjectInOrg) => Effect.Effect<ReadonlyArray<RoleBindingRow>>
}>()("@cp/persistence/workspaces/RoleBindingsRepo") {
  /** Bindings in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    RoleBindingsRepo,
    Effect.gen(function*() {
      const { roleBindings } = yield* WorkspaceTables
      const where = (predicate: (binding: RoleBindingRow) => boolean) =>
        Array.from(roleBindings.values()).filter(predicate).sort(createdOldestFirst)
      return RoleBindingsRepo.of({
        insert: (binding) => insertUnique(roleBindings, binding.id, binding, uniques),
        listForSubject: (subject) => Effect.sync(() => bindingsOfSubject(roleBindings, onOneOrg(subject))),
        listForSubjectInOrgs: (subject) => Effect.sync(() => bindingsOfSubject(roleBindings, subject)),
        listForSubjectsInOrg: ({ orgId, subjectIds }) =>
          Effect.sync(() => where((binding) => binding.orgId === orgId && subjectIds.includes(binding.subjectId))),
        listByRoleInOrg: ({ orgId, role }) =>
          Effect.sync(() => where((binding) => binding.orgId === orgId && binding.role === role)),
        removeForSubject: (subject) =>
          atomically((changes) => {
            const removed = bindingsOfSubject(roleBindings, onOneOrg(subject))
            for (const binding of removed) changes.delete(roleBindings, binding.id)
            return Effect.succeed(removed)
          })
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer))

  /** Bindings in the `role_bindings` table. */
  static readonly sql = Layer.effect(
    RoleBindingsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const listForSubjectInOrgs = flow(
        SqlSchema.findAll({
          Request: SubjectInOrgs,
          Result: RoleBindingRow,
          execute: ({ orgIds, subjectType, subjectId }) =>
            sql`
              select * from role_bindings
              where org_id = any(${orgIds}) and subject_type = ${subjectType} and subject_id = ${subjectId}
              order by created_at, id`
        }),
        Effect.orDie
      )
      const listForSubjectsInOrg = flow(
        SqlSchema.findAll({
          Request: SubjectsInOrg,
          Result: RoleBindingRow,
          execute: ({ orgId, subjectIds }) =>
            sql`
              select * from role_bindings
              where org_id = ${orgId} and subject_id = any(${subjectIds})
              order by created_at, id`
        }),
        Effect.orDie
      )
      return RoleBindingsRepo.of({
        insert: insertRow(sql, "role_bindings", RoleBindingRow),
        listForSubject: (subject) => listForSubjectInOrgs(onOneOrg(subject)),
        listForSubjectInOrgs,
        listForSubjectsInOrg: (subjects) =>
          subjects.subjectIds.length === 0 ? Effect.succeed([]) : listForSubjectsInOrg(subjects),
        listByRoleInOrg: flow(
          SqlSchema.findAll({
            Request: RoleInOrg,
            Result: RoleBindingRow,
            execute: ({ orgId, role }) =>
              sql`select * from role_bindings where org_id = ${orgId} and role = ${role} order by created_at, id`
          }),
          Effect.orDie
        ),
        removeForSubject: flow(
          SqlSchema.findAll({
            Request: SubjectInOrg,
            Result: RoleBindingRow,
            execute: ({ orgId, subjectType, subjectId }) =>
              sql`
                delete from role_bindings
                where org_id = ${orgId} and subject_type = ${subjectType} and subject_id = ${subjectId}
                returning *`
          }),
          // `returning` gives no order: sort like every other read.
          Effect.map((rows) => rows.sort(createdOldestFirst)),
          Effect.orDie
        )
      })
    })
  )
}
