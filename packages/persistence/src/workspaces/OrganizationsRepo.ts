/** Workspaces (organizations): account roots and their child workspaces, found by any of their three references. */
import { OrgId, TeamId, UserId, WorkspaceRef } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { isSlugOfFamily, slugOfFamily } from "../keyset.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { teamBindingsOfSubject, TeamTables } from "../teams/TeamTables.ts"
import { bindingsOfSubject, newestFirst, oldestFirst, WorkspaceTables } from "./MemoryTables.ts"
import { subjectOnWorkspaceSql } from "./resolution.ts"
import { OrganizationFromJson, OrganizationRow, RoleBindingFromJson, RoleBindingRow, SubjectType } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a taken slug. */
export const organizationsSlugConstraint = "organizations_slug_key"

/** A workspace reference in any spelling: `org_…`, `ws_…` or a slug. */
export interface SubjectOnWorkspace {
  readonly ref: string
  readonly subjectType: SubjectType
  readonly subjectId: string
}

/**
 * A role the subject holds on a workspace: a role binding of its own, or (`teamId` set) a grant of a team it is a
 * member of, with the team's workspace as `orgId` and the grant's id, scope and time.
 */
export const HeldBinding = Schema.Struct({ ...RoleBindingRow.fields, teamId: Schema.optionalKey(TeamId) })
export type HeldBinding = typeof HeldBinding.Type

/**
 * A resolved workspace with the roles the subject holds on it and on its account root, directly or through teams,
 * in grant order (createdAt, id); each names its `orgId`.
 */
export interface ResolvedWorkspace {
  readonly organization: OrganizationRow
  readonly bindings: ReadonlyArray<HeldBinding>
}

const uniques: ReadonlyArray<UniqueKey<OrganizationRow>> = [
  primaryKey("organizations_pkey"),
  { constraint: "organizations_public_id_key", key: (org) => org.publicId },
  { constraint: organizationsSlugConstraint, key: (org) => org.slug }
]

const SlugResult = Schema.Struct({ slug: Schema.String })
const Resolve = Schema.Struct({ ref: Schema.String, subjectType: SubjectType, subjectId: Schema.String })

/** The workspace JSON of the statements in `resolution.ts`: already a `ResolvedWorkspace` once decoded. */
export const ResolvedWorkspaceJson = Schema.Struct({
  organization: OrganizationFromJson,
  bindings: Schema.Array(Schema.Struct({ ...RoleBindingFromJson.fields, teamId: Schema.optionalKey(TeamId) }))
})

const ResolvedRow = Schema.Struct({ workspace: Schema.NullOr(ResolvedWorkspaceJson) })

/**
 * Workspaces; `resolveForSubject` is the one read behind a workspace-scoped request (`SessionsRepo.findWithWorkspace`
 * folds it into the session read for session tokens).
 */
export class OrganizationsRepo extends Context.Service<OrganizationsRepo, {
  /** `UniqueViolation` on `organizations_slug_key` when the slug is taken (the caller then tries the next suffix). */
  readonly insert: (organization: OrganizationRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: OrgId) => Effect.Effect<Option.Option<OrganizationRow>>
  /** The workspaces with these ids, in no particular order; unknown ids are left out. */
  readonly findByIds: (ids: ReadonlyArray<OrgId>) => Effect.Effect<ReadonlyArray<OrganizationRow>>
  readonly findByPublicId: (publicId: WorkspaceRef) => Effect.Effect<Option.Option<OrganizationRow>>
  readonly findBySlug: (slug: string) => Effect.Effect<Option.Option<OrganizationRow>>
  /** The taken slugs among `base` and `base-<n>`, from which the caller picks the next free suffix. */
  readonly slugsStartingWith: (base: string) => Effect.Effect<ReadonlyArray<string>>
  /** The non-root workspaces of the account whose root has this public id, newest first. */
  readonly listChildren: (accountPublicId: WorkspaceRef) => Effect.Effect<ReadonlyArray<OrganizationRow>>
  /** The caller's own account: the earliest-created root on which the user is `owner` at organization scope. */
  readonly findEarliestOwnedAccountRoot: (userId: UserId) => Effect.Effect<Option.Option<OrganizationRow>>
  /**
   * The workspace a reference names plus the roles the subject holds on it and its account root, its own bindings
   * and its teams' grants; None when unknown. Team grants count only while the subject belongs to the team's
   * workspace (an active member, or a service principal with a binding there).
   */
  readonly resolveForSubject: (query: SubjectOnWorkspace) => Effect.Effect<Option.Option<ResolvedWorkspace>>
}>()("@cp/persistence/workspaces/OrganizationsRepo") {
  /** Workspaces in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    OrganizationsRepo,
    Effect.gen(function*() {
      const workspaceTables = yield* WorkspaceTables
      const { organizations, roleBindings } = workspaceTables
      const teamTables = yield* TeamTables
      const where = (predicate: (org: OrganizationRow) => boolean) =>
        Array.from(organizations.values()).filter(predicate)
      const first = (predicate: (org: OrganizationRow) => boolean) => Option.fromUndefinedOr(where(predicate)[0])
      return OrganizationsRepo.of({
        insert: Effect.fn("OrganizationsRepo.insert")((organization: OrganizationRow) =>
          insertUnique(organizations, organization.id, organization, uniques)
        ),
        findById: Effect.fn("OrganizationsRepo.findById")(function*(id: OrgId) {
          return Option.fromUndefinedOr(organizations.get(id))
        }),
        findByIds: Effect.fn("OrganizationsRepo.findByIds")(function*(ids: ReadonlyArray<OrgId>) {
          return [...new Set(ids)].flatMap((id) => organizations.get(id) ?? [])
        }),
        findByPublicId: Effect.fn("OrganizationsRepo.findByPublicId")(function*(publicId: WorkspaceRef) {
          return first((org) => org.publicId === publicId)
        }),
        findBySlug: Effect.fn("OrganizationsRepo.findBySlug")(function*(slug: string) {
          return first((org) => org.slug === slug)
        }),
        slugsStartingWith: Effect.fn("OrganizationsRepo.slugsStartingWith")(function*(base: string) {
          return where((org) => isSlugOfFamily(base)(org.slug)).map((org) => org.slug)
        }),
        listChildren: Effect.fn("OrganizationsRepo.listChildren")(function*(accountPublicId: WorkspaceRef) {
          return where((org) => org.accountId === accountPublicId && !org.isAccountRoot).sort(newestFirst)
        }),
        findEarliestOwnedAccountRoot: Effect.fn("OrganizationsRepo.findEarliestOwnedAccountRoot")(
          function*(userId: UserId) {
            const roots = where((org) => org.isAccountRoot)
            const owned = roots.filter((root) =>
              bindingsOfSubject(roleBindings, [root.id], "user", userId).some((binding) =>
                binding.role === "owner" && binding.scopeKind === "organization"
              )
            )
            return Option.fromUndefinedOr(owned.sort(oldestFirst)[0])
          }
        ),
        resolveForSubject: Effect.fn("OrganizationsRepo.resolveForSubject")(
          function*({ ref, subjectType, subjectId }: SubjectOnWorkspace) {
            return first((org) => org.id === ref || org.publicId === ref || org.slug === ref).pipe(
              Option.map((organization) => {
                const root = first((org) => org.publicId === organization.accountId)
                const orgIds = Option.match(root, {
                  onNone: () => [organization.id],
                  onSome: (root) => [organization.id, root.id]
                })
                const held: Array<HeldBinding> = [
                  ...bindingsOfSubject(roleBindings, orgIds, subjectType, subjectId),
                  ...teamBindingsOfSubject(teamTables, workspaceTables, orgIds, subjectType, subjectId)
                ]
                return { organization, bindings: held.sort(oldestFirst) }
              })
            )
          }
        )
      })
    })
  ).pipe(Layer.provide(Layer.mergeAll(WorkspaceTables.layer, TeamTables.layer)))

  /** Workspaces in the `organizations` table. */
  static readonly sql = Layer.effect(
    OrganizationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: OrganizationRow,
        execute: (organization) => sql`insert into organizations ${sql.insert(organization)}`
      })
      const findById = SqlSchema.findOneOption({
        Request: OrgId,
        Result: OrganizationRow,
        execute: (id) => sql`select * from organizations where id = ${id}`
      })
      const findByIds = SqlSchema.findAll({
        Request: Schema.Array(OrgId),
        Result: OrganizationRow,
        execute: (ids) => sql`select * from organizations where id in ${sql.in(ids)}`
      })
      const findByPublicId = SqlSchema.findOneOption({
        Request: WorkspaceRef,
        Result: OrganizationRow,
        execute: (publicId) => sql`select * from organizations where public_id = ${publicId}`
      })
      const findBySlug = SqlSchema.findOneOption({
        Request: Schema.String,
        Result: OrganizationRow,
        execute: (slug) => sql`select * from organizations where slug = ${slug}`
      })
      const slugFamily = SqlSchema.findAll({
        Request: Schema.String,
        Result: SlugResult,
        execute: (base) => sql`select slug from organizations where ${slugOfFamily(sql, base)}`
      })
      const listChildren = SqlSchema.findAll({
        Request: WorkspaceRef,
        Result: OrganizationRow,
        execute: (accountPublicId) =>
          sql`
            select * from organizations
            where account_id = ${accountPublicId} and not is_account_root
            order by created_at desc, id desc`
      })
      const findEarliestOwnedAccountRoot = SqlSchema.findOneOption({
        Request: UserId,
        Result: OrganizationRow,
        execute: (userId) =>
          sql`
            select o.* from role_bindings b join organizations o on o.id = b.org_id
            where b.subject_type = 'user' and b.subject_id = ${userId}
              and b.role = 'owner' and b.scope_kind = 'organization' and o.is_account_root
            order by o.created_at, o.id
            limit 1`
      })
      const resolveForSubject = SqlSchema.findOneOption({
        Request: Resolve,
        Result: ResolvedRow,
        execute: ({ ref, subjectType, subjectId }) =>
          sql.unsafe(subjectOnWorkspaceSql, [ref, subjectType, subjectId]).withoutTransform
      })
      return OrganizationsRepo.of({
        insert: Effect.fn("OrganizationsRepo.insert")((organization: OrganizationRow) =>
          uniqueViolationOrDie(insert(organization))
        ),
        findById: Effect.fn("OrganizationsRepo.findById")((id: OrgId) => Effect.orDie(findById(id))),
        findByIds: Effect.fn("OrganizationsRepo.findByIds")((ids: ReadonlyArray<OrgId>) =>
          ids.length === 0 ? Effect.succeed([]) : Effect.orDie(findByIds([...new Set(ids)]))
        ),
        findByPublicId: Effect.fn("OrganizationsRepo.findByPublicId")((publicId: WorkspaceRef) =>
          Effect.orDie(findByPublicId(publicId))
        ),
        findBySlug: Effect.fn("OrganizationsRepo.findBySlug")((slug: string) => Effect.orDie(findBySlug(slug))),
        slugsStartingWith: Effect.fn("OrganizationsRepo.slugsStartingWith")((base: string) =>
          slugFamily(base).pipe(Effect.map((rows) => rows.map((row) => row.slug)), Effect.orDie)
        ),
        listChildren: Effect.fn("OrganizationsRepo.listChildren")((accountPublicId: WorkspaceRef) =>
          Effect.orDie(listChildren(accountPublicId))
        ),
        findEarliestOwnedAccountRoot: Effect.fn("OrganizationsRepo.findEarliestOwnedAccountRoot")((userId: UserId) =>
          Effect.orDie(findEarliestOwnedAccountRoot(userId))
        ),
        resolveForSubject: Effect.fn("OrganizationsRepo.resolveForSubject")((query: SubjectOnWorkspace) =>
          resolveForSubject(query).pipe(
            Effect.map(Option.flatMap(({ workspace }) => Option.fromNullOr(workspace))),
            Effect.orDie
          )
        )
      })
    })
  )
}
