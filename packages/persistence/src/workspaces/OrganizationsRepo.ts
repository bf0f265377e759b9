/** Workspaces (organizations): account roots and their child workspaces, found by any of their three references. */
import { OrgId, TeamId, UserId, WorkspaceRef } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import {
  createdOldestFirst,
  idPosition,
  isSlugOfFamily,
  keysetQuery,
  pageFields,
  slugFamilyQuery,
  SlugRow,
  slugsOf,
  windowOf
} from "../keyset.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { teamBindingsOfSubject, TeamTables } from "../teams/TeamTables.ts"
import { bindingsOfSubject, WorkspaceTables } from "./MemoryTables.ts"
import { subjectOnWorkspaceSql } from "./resolution.ts"
import {
  OrganizationFromJson,
  OrganizationRow,
  RoleBindingFromJson,
  RoleBindingRow,
  SubjectOnWorkspace
} from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a taken slug. */
export const organizationsSlugConstraint = "organizations_slug_key"

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

/** The workspace JSON of the statements in `resolution.ts`: already a `ResolvedWorkspace` once decoded. */
export const ResolvedWorkspaceJson = Schema.Struct({
  organization: OrganizationFromJson,
  bindings: Schema.Array(Schema.Struct({ ...RoleBindingFromJson.fields, teamId: Schema.optionalKey(TeamId) }))
})

const ResolvedRow = Schema.Struct({ workspace: Schema.NullOr(ResolvedWorkspaceJson) })
const LockedRow = Schema.Struct({ id: OrgId })

/** A page of an account's child workspaces: the account root's public id. */
export const ChildrenPage = Schema.Struct({ account: WorkspaceRef, ...pageFields })
export type ChildrenPage = typeof ChildrenPage.Type

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
  /** A page of the non-root workspaces of the account whose root has public id `account`, newest first. */
  readonly pageChildren: (page: ChildrenPage) => Effect.Effect<ReadonlyArray<OrganizationRow>>
  /** The caller's own account: the earliest-created root on which the user is `owner` at organization scope. */
  readonly findEarliestOwnedAccountRoot: (userId: UserId) => Effect.Effect<Option.Option<OrganizationRow>>
  /**
   * The workspace a reference names plus the roles the subject holds on it and its account root, its own bindings
   * and its teams' grants; None when unknown. Team grants count only while the subject belongs to the team's
   * workspace (an active member, or a service principal with a binding there).
   */
  readonly resolveForSubject: (query: SubjectOnWorkspace) => Effect.Effect<Option.Option<ResolvedWorkspace>>
  /**
   * Serializes the checks a workspace's writes depend on ("another owner remains", "a project slot is free"): holds a
   * row lock on the workspace until the surrounding transaction ends, so they cannot race. Call inside
   * `Transactor.withTransaction` (the memory flavour needs nothing: its transactions already run one at a time).
   * False for an unknown workspace.
   */
  readonly lockWorkspace: (id: OrgId) => Effect.Effect<boolean>
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
        insert: (organization) => insertUnique(organizations, organization.id, organization, uniques),
        findById: (id) => Effect.sync(() => Option.fromUndefinedOr(organizations.get(id))),
        findByIds: (ids) => Effect.sync(() => [...new Set(ids)].flatMap((id) => organizations.get(id) ?? [])),
        findByPublicId: (publicId) => Effect.sync(() => first((org) => org.publicId === publicId)),
        findBySlug: (slug) => Effect.sync(() => first((org) => org.slug === slug)),
        slugsStartingWith: (base) =>
          Effect.sync(() => where((org) => isSlugOfFamily(base)(org.slug)).map((org) => org.slug)),
        pageChildren: ({ account, ...window }) =>
          Effect.sync(() =>
            windowOf(where((org) => org.accountId === account && !org.isAccountRoot), idPosition, window)
          ),
        findEarliestOwnedAccountRoot: (userId) =>
          Effect.sync(() => {
            const owned = where((org) => org.isAccountRoot).filter((root) =>
              bindingsOfSubject(roleBindings, { orgIds: [root.id], subjectType: "user", subjectId: userId }).some(
                (binding) => binding.role === "owner" && binding.scopeKind === "organization"
              )
            )
            return Option.fromUndefinedOr(owned.sort(createdOldestFirst)[0])
          }),
        resolveForSubject: ({ ref, subjectType, subjectId }) =>
          Effect.sync(() =>
            first((org) => org.id === ref || org.publicId === ref || org.slug === ref).pipe(
              Option.map((organization) => {
                const root = first((org) => org.publicId === organization.accountId)
                const orgIds = Option.match(root, {
                  onNone: () => [organization.id],
                  onSome: (root) => [organization.id, root.id]
                })
                const held: Array<HeldBinding> = [
                  ...bindingsOfSubject(roleBindings, { orgIds, subjectType, subjectId }),
                  ...teamBindingsOfSubject(teamTables, workspaceTables, orgIds, subjectType, subjectId)
                ]
                return { organization, bindings: held.sort(createdOldestFirst) }
              })
            )
          ),
        lockWorkspace: (id) => Effect.sync(() => organizations.has(id))
      })
    })
  ).pipe(Layer.provide(Layer.mergeAll(WorkspaceTables.layer, TeamTables.layer)))

  /** Workspaces in the `organizations` table. */
  static readonly sql = Layer.effect(
    OrganizationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const findByIds = flow(
        SqlSchema.findAll({
          Request: Schema.Array(OrgId),
          Result: OrganizationRow,
          execute: (ids) => sql`select * from organizations where id in ${sql.in(ids)}`
        }),
        Effect.orDie
      )
      return OrganizationsRepo.of({
        insert: insertRow(sql, "organizations", OrganizationRow),
        findById: flow(
          SqlSchema.findOneOption({
            Request: OrgId,
            Result: OrganizationRow,
            execute: (id) => sql`select * from organizations where id = ${id}`
          }),
          Effect.orDie
        ),
        // `in ()` is not SQL: no ids, no query.
        findByIds: (ids) => ids.length === 0 ? Effect.succeed([]) : findByIds([...new Set(ids)]),
        findByPublicId: flow(
          SqlSchema.findOneOption({
            Request: WorkspaceRef,
            Result: OrganizationRow,
            execute: (publicId) => sql`select * from organizations where public_id = ${publicId}`
          }),
          Effect.orDie
        ),
        findBySlug: flow(
          SqlSchema.findOneOption({
            Request: Schema.String,
            Result: OrganizationRow,
            execute: (slug) => sql`select * from organizations where slug = ${slug}`
          }),
          Effect.orDie
        ),
        slugsStartingWith: flow(
          SqlSchema.findAll({
            Request: Schema.String,
            Result: SlugRow,
            execute: (base) => slugFamilyQuery(sql, "organizations", [], base)
          }),
          slugsOf,
          Effect.orDie
        ),
        pageChildren: flow(
          SqlSchema.findAll({
            Request: ChildrenPage,
            Result: OrganizationRow,
            // `organizations_children_idx` is exactly this range, in this order.
            execute: ({ account, ...window }) =>
              keysetQuery(
                sql,
                sql`select * from organizations`,
                [sql`account_id = ${account} and not is_account_root`],
                window
              )
          }),
          Effect.orDie
        ),
        findEarliestOwnedAccountRoot: flow(
          SqlSchema.findOneOption({
            Request: UserId,
            Result: OrganizationRow,
            execute: (userId) =>
              sql`
                select o.* from role_bindings b join organizations o on o.id = b.org_id
                where b.subject_type = 'user' and b.subject_id = ${userId}
                  and b.role = 'owner' and b.scope_kind = 'organization' and o.is_account_root
                order by o.created_at, o.id
                limit 1`
          }),
          Effect.orDie
        ),
        resolveForSubject: flow(
          SqlSchema.findOneOption({
            Request: SubjectOnWorkspace,
            Result: ResolvedRow,
            execute: ({ ref, subjectType, subjectId }) =>
              sql.unsafe(subjectOnWorkspaceSql, [ref, subjectType, subjectId]).withoutTransform
          }),
          Effect.map(Option.flatMap(({ workspace }) => Option.fromNullOr(workspace))),
          Effect.orDie
        ),
        // `for no key update` conflicts only with itself (and stronger locks): rows referencing the workspace can
        // still be inserted meanwhile, their foreign-key checks take `for key share`.
        lockWorkspace: flow(
          SqlSchema.findOneOption({
            Request: OrgId,
            Result: LockedRow,
            execute: (id) => sql`select id from organizations where id = ${id} for no key update`
          }),
          Effect.map(Option.isSome),
          Effect.orDie
        )
      })
    })
  )
}
