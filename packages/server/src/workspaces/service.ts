/** Workspaces: creation with account selection, listing, child workspaces and effective access. */
import {
  type Actor,
  type ChildWorkspace as ChildWorkspaceSchema,
  Conflict,
  Forbidden,
  NotFound,
  type Organization,
  type Paged,
  type PermissionDecision,
  type ProjectId,
  type ResolvedWorkspace,
  type UserId,
  type ValidationFailed,
  wireError
} from "@cp/domain"
import { MembersRepo, type OrganizationRow, OrganizationsRepo, RoleBindingsRepo, Transactor } from "@cp/persistence"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { type EventActor, eventActorOf, EventLog } from "../platform/events.ts"
import { mint, newUuid } from "../platform/ids.ts"
import {
  Cursors,
  DEFAULT_PAGE_SIZE,
  pageOf,
  rowsAfter,
  TimeIdPosition,
  timeIdPosition
} from "../platform/pagination.ts"
import { decide, effectiveAccess } from "../platform/rbac.ts"
import { grantsOf } from "./grants.ts"
import { nextFreeSlug, slugify } from "./slugs.ts"

export const toOrganization = (row: OrganizationRow): Organization => ({
  id: row.id,
  name: row.name,
  slug: row.slug,
  workspaceRef: row.publicId,
  accountId: row.accountId,
  kind: row.kind,
  isAccountRoot: row.isAccountRoot,
  createdAt: row.createdAt
})

export interface PageRequest {
  readonly limit?: number
  readonly cursor?: string
}

export interface CreatedWorkspace {
  readonly organization: Organization
  readonly membership: { readonly role: "owner"; readonly joinedAt: Date }
}

const subjectTypeOf = (subjectId: string): "user" | "service_principal" | undefined =>
  subjectId.startsWith("usr_") ? "user" : subjectId.startsWith("sp_") ? "service_principal" : undefined

export class WorkspacesService extends Context.Service<WorkspacesService, {
  readonly create: (
    actor: Actor,
    input: { readonly name: string; readonly slug?: string }
  ) => Effect.Effect<CreatedWorkspace, Conflict | Forbidden>
  /** The `Personal` workspace of a first sign-in; runs inside the caller's transaction. */
  readonly createPersonal: (userId: UserId, emailLocalPart: string) => Effect.Effect<CreatedWorkspace>
  readonly list: (
    actor: Actor,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly organizations: ReadonlyArray<Organization> }>, ValidationFailed>
  readonly children: (
    workspace: ResolvedWorkspace,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly workspaces: ReadonlyArray<typeof ChildWorkspaceSchema.Type> }>, ValidationFailed>
  readonly effectiveAccess: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    query: { readonly projectId?: ProjectId; readonly subjectId?: string }
  ) => Effect.Effect<{ readonly permissions: ReadonlyArray<PermissionDecision> }, NotFound | Forbidden>
}>()("@cp/server/WorkspacesService") {
  static readonly layer = Layer.effect(
    WorkspacesService,
    Effect.gen(function*() {
      const orgs = yield* OrganizationsRepo
      const members = yield* MembersRepo
      const bindings = yield* RoleBindingsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors

      type NewWorkspace = Omit<OrganizationRow, "slug">

      /** The workspace row under the owner's account, or a new account root when the owner has none. */
      const workspaceRow = Effect.fnUntraced(function*(name: string, owner: UserId, now: Date) {
        const root = yield* orgs.findEarliestOwnedAccountRoot(owner)
        const publicId = mint.workspaceRef(now.getTime())
        const row: NewWorkspace = {
          id: mint.org(now.getTime()),
          publicId,
          name,
          kind: Option.isSome(root) ? "workspace" : "account",
          accountId: Option.isSome(root) ? root.value.publicId : publicId,
          isAccountRoot: Option.isNone(root),
          createdAt: now,
          updatedAt: now
        }
        return row
      })

      /** An explicitly requested slug that is taken is the caller's conflict (contract §4). */
      const insertWithSlug = (slug: string) => (base: NewWorkspace) => {
        const row = { ...base, slug }
        return orgs.insert(row).pipe(
          Effect.as(row),
          Effect.catchTag(
            "UniqueViolation",
            () => Effect.fail(wireError(Conflict, `The slug '${slug}' is taken`, { field: "slug" }))
          )
        )
      }

      /**
       * A derived slug takes the first free `-N` suffix. A concurrent create can take it between the read and
       * the insert, so the insert runs in a savepoint and retries with the next one.
       */
      const insertWithDerivedSlug = (from: string) => (base: NewWorkspace) => {
        const wanted = slugify(from)
        return Effect.gen(function*() {
          const row = { ...base, slug: nextFreeSlug(wanted, new Set(yield* orgs.slugsStartingWith(wanted))) }
          yield* tx.withTransaction(orgs.insert(row))
          return row
        }).pipe(Effect.retry({ times: 5, while: (e) => e._tag === "UniqueViolation" }), Effect.orDie)
      }

      const createFor = Effect.fnUntraced(function*<E>(
        owner: UserId,
        name: string,
        insert: (base: NewWorkspace) => Effect.Effect<OrganizationRow, E>,
        actor: EventActor
      ) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = yield* insert(yield* workspaceRow(name, owner, now))
        const memberId = mint.member(now.getTime())
        // Fresh ids on a fresh workspace: a collision here is a defect, not a caller's conflict.
        yield* members.insert({
          id: memberId,
          orgId: row.id,
          subjectType: "user",
          subjectId: owner,
          status: "active",
          joinedAt: now
        }).pipe(Effect.orDie)
        yield* bindings.insert({
          id: newUuid(now.getTime()),
          orgId: row.id,
          subjectType: "user",
          subjectId: owner,
          role: "owner",
          scopeKind: "organization",
          scopeRef: null,
          createdAt: now
        }).pipe(Effect.orDie)
        const subject = { kind: "organization", id: row.id, name: row.name }
        yield* events.record({
          orgId: row.id,
          type: "organization.created",
          actor,
          subject,
          data: { orgId: row.id, workspaceRef: row.publicId, name: row.name, slug: row.slug, accountId: row.accountId },
          description: `Workspace ${row.name} created`
        })
        yield* events.record({
          orgId: row.id,
          type: "membership.added",
          actor,
          subject: { kind: "member", id: memberId, name: null },
          data: { memberId, subjectType: "user", subjectId: owner, role: "owner" },
          description: "Creator joined as owner"
        })
        return { organization: toOrganization(row), membership: { role: "owner" as const, joinedAt: now } }
      })

      const listBinding = (endpoint: string, scope: string) => ({ endpoint, scope })

      return WorkspacesService.of({
        create: Effect.fn("Workspaces.create")(function*(actor, input) {
          if (actor.kind !== "user") {
            return yield* wireError(Forbidden, "Only a signed-in user can create a workspace")
          }
          const name = input.name.trim()
          const insert = input.slug === undefined ? insertWithDerivedSlug(name) : insertWithSlug(input.slug)
          return yield* tx.withTransaction(createFor(actor.userId, name, insert, eventActorOf(actor)))
        }),

        createPersonal: (userId, emailLocalPart) =>
          createFor(userId, "Personal", insertWithDerivedSlug(emailLocalPart), { actorType: "user", actorId: userId }),

        list: Effect.fn("Workspaces.list")(function*(actor, page) {
          const binding = listBinding("organizations.list", actor.kind === "user" ? actor.userId : actor.orgId)
          const after = yield* cursors.decode(binding, page.cursor, TimeIdPosition)
          const limit = page.limit ?? DEFAULT_PAGE_SIZE
          const rows = actor.kind === "user"
            ? yield* members.listOrgsForSubject("user", actor.userId)
            : Option.toArray(yield* orgs.findById(actor.orgId))
          const { items, next } = pageOf(
            rowsAfter(rows, after, limit, (row) => ({ at: row.createdAt, id: row.id })),
            limit,
            (row) => timeIdPosition(row.createdAt, row.id)
          )
          return {
            data: { organizations: items.map(toOrganization) },
            cursor: next === undefined ? null : cursors.encode(binding, next)
          }
        }),

        children: Effect.fn("Workspaces.children")(function*(workspace, page) {
          const binding = listBinding("organizations.children", workspace.organization.id)
          const after = yield* cursors.decode(binding, page.cursor, TimeIdPosition)
          const limit = page.limit ?? DEFAULT_PAGE_SIZE
          const rows = workspace.organization.isAccountRoot
            ? yield* orgs.listChildren(workspace.organization.workspaceRef)
            : []
          const { items, next } = pageOf(
            rowsAfter(rows, after, limit, (row) => ({ at: row.createdAt, id: row.id })),
            limit,
            (row) => timeIdPosition(row.createdAt, row.id)
          )
          return {
            data: { workspaces: items.map((row) => ({ orgId: row.id, workspaceRef: row.publicId, name: row.name })) },
            cursor: next === undefined ? null : cursors.encode(binding, next)
          }
        }),

        effectiveAccess: Effect.fn("Workspaces.effectiveAccess")(function*(actor, workspace, query) {
          const self = actor.kind === "user"
            ? actor.userId
            : actor.kind === "service_principal"
            ? actor.principalId
            : ""
          if (query.subjectId === undefined || query.subjectId === self) {
            return { permissions: effectiveAccess(workspace.grants, query.projectId) }
          }
          if (!decide(workspace.grants, "organization.member.list").allow) {
            return yield* wireError(Forbidden, "Missing permission organization.member.list", {
              permission: "organization.member.list"
            })
          }
          const subjectType = subjectTypeOf(query.subjectId)
          const resolved = subjectType === undefined ? Option.none() : yield* orgs.resolveForSubject({
            ref: workspace.organization.id,
            subjectType,
            subjectId: query.subjectId
          })
          const grants = Option.match(resolved, {
            onNone: () => [],
            onSome: ({ organization, bindings }) => grantsOf(organization.id, bindings)
          })
          if (grants.length === 0) return yield* wireError(NotFound, "No such subject in this workspace")
          return { permissions: effectiveAccess(grants, query.projectId) }
        })
      })
    })
  )
}
