/** Workspaces (organizations): account roots and their child workspaces, found by any of their three references. */
import { OrgId, UserId, WorkspaceRef } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../identity/memoryTable.ts"
import { bindingsOfSubject, newestFirst, oldestFirst, WorkspaceTables } from "./MemoryTables.ts"
import { OrganizationRow, RoleBindingFromJson, type RoleBindingRow, SubjectType } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a taken slug. */
export const organizationsSlugConstraint = "organizations_slug_key"

/** A workspace reference in any spelling: `org_…`, `ws_…` or a slug. */
export interface SubjectOnWorkspace {
  readonly ref: string
  readonly subjectType: SubjectType
  readonly subjectId: string
}

/** A resolved workspace with the subject's bindings on it and on its account root; each names its `orgId`. */
export interface ResolvedWorkspace {
  readonly organization: OrganizationRow
  readonly bindings: ReadonlyArray<RoleBindingRow>
}

const uniques: ReadonlyArray<UniqueKey<OrganizationRow>> = [
  primaryKey("organizations_pkey"),
  { constraint: "organizations_public_id_key", key: (org) => org.publicId },
  { constraint: organizationsSlugConstraint, key: (org) => org.slug }
]

/** `base` itself or `base-<digits>`: the slugs that decide the next free suffix. */
const isSlugOfFamily = (base: string) => (slug: string) =>
  slug === base || (slug.startsWith(`${base}-`) && /^[0-9]+$/.test(slug.slice(base.length + 1)))

const SlugResult = Schema.Struct({ slug: Schema.String })
const Resolve = Schema.Struct({ ref: Schema.String, subjectType: SubjectType, subjectId: Schema.String })
const ResolvedRow = Schema.Struct({ ...OrganizationRow.fields, bindings: Schema.Array(RoleBindingFromJson) })

/** Workspaces; `resolveForSubject` is the one-round-trip read behind every workspace-scoped request. */
export class OrganizationsRepo extends Context.Service<OrganizationsRepo, {
  /** `UniqueViolation` on `organizations_slug_key` when the slug is taken (the caller then tries the next suffix). */
  readonly insert: (organization: OrganizationRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: OrgId) => Effect.Effect<Option.Option<OrganizationRow>>
  readonly findByPublicId: (publicId: WorkspaceRef) => Effect.Effect<Option.Option<OrganizationRow>>
  readonly findBySlug: (slug: string) => Effect.Effect<Option.Option<OrganizationRow>>
  /** The taken slugs among `base` and `base-<n>`, from which the caller picks the next free suffix. */
  readonly slugsStartingWith: (base: string) => Effect.Effect<ReadonlyArray<string>>
  /** The non-root workspaces of the account whose root has this public id, newest first. */
  readonly listChildren: (accountPublicId: WorkspaceRef) => Effect.Effect<ReadonlyArray<OrganizationRow>>
  /** The caller's own account: the earliest-created root on which the user is `owner` at organization scope. */
  readonly findEarliestOwnedAccountRoot: (userId: UserId) => Effect.Effect<Option.Option<OrganizationRow>>
  /** The workspace a reference names plus the subject's bindings on it and its account root; None when unknown. */
  readonly resolveForSubject: (query: SubjectOnWorkspace) => Effect.Effect<Option.Option<ResolvedWorkspace>>
}>()("@cp/persistence/workspaces/OrganizationsRepo") {
  /** Workspaces in the shared workspace tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    OrganizationsRepo,
    Effect.gen(function*() {
      const { organizations, roleBindings } = yield* WorkspaceTables
      const where = (predicate: (org: OrganizationRow) => boolean) => Array.from(organizations.values()).filter(predicate)
      const first = (predicate: (org: OrganizationRow) => boolean) => Option.fromUndefinedOr(where(predicate)[0])
      return OrganizationsRepo.of({
        insert: Effect.fn("OrganizationsRepo.insert")((organization: OrganizationRow) =>
          insertUnique(organizations, organization.id, organization, uniques)
        ),
        findById: Effect.fn("OrganizationsRepo.findById")(function*(id: OrgId) {
          return Option.fromUndefinedOr(organizations.get(id))
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
                return { organization, bindings: bindingsOfSubject(roleBindings, orgIds, subjectType, subjectId) }
              })
            )
          }
        )
      })
    })
  ).pipe(Layer.provide(WorkspaceTables.layer))

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
        // Slugs are byte-ordered, so every `base-…` lies in [`base-`, `base.`): an index range even in a generic plan.
        execute: (base) =>
          sql`
            select slug from organizations
            where slug = ${base}
               or (slug > ${`${base}-`} and slug < ${`${base}.`} and substr(slug, ${base.length + 2}) ~ '^[0-9]+$')`
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
      // One round trip: the workspace by any reference, with the subject's bindings on it and on its account root
      // aggregated into a JSON array (camelCase keys, as the client leaves JSON untouched).
      const resolveForSubject = SqlSchema.findOneOption({
        Request: Resolve,
        Result: ResolvedRow,
        execute: ({ ref, subjectType, subjectId }) =>
          sql`
            select o.*, coalesce((
              select jsonb_agg(jsonb_build_object(
                'id', b.id, 'orgId', b.org_id, 'subjectType', b.subject_type, 'subjectId', b.subject_id,
                'role', b.role, 'scopeKind', b.scope_kind, 'scopeRef', b.scope_ref, 'createdAt', b.created_at
              ) order by b.created_at, b.id)
              from role_bindings b
              where b.subject_type = ${subjectType} and b.subject_id = ${subjectId}
                and b.org_id in (o.id, (select root.id from organizations root where root.public_id = o.account_id))
            ), '[]'::jsonb) as bindings
            from organizations o
            where o.id = ${ref} or o.public_id = ${ref} or o.slug = ${ref}
            limit 1`
      })
      return OrganizationsRepo.of({
        insert: Effect.fn("OrganizationsRepo.insert")((organization: OrganizationRow) =>
          uniqueViolationOrDie(insert(organization))
        ),
        findById: Effect.fn("OrganizationsRepo.findById")((id: OrgId) => Effect.orDie(findById(id))),
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
            Effect.map(Option.map(({ bindings, ...organization }) => ({ organization, bindings }))),
            Effect.orDie
          )
        )
      })
    })
  )
}
