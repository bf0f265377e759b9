/** Workspaces: creation with account selection, listing, child workspaces and effective access. */
import {
  type Actor,
  type ChildWorkspace as ChildWorkspaceSchema,
  Conflict,
  Forbidden,
  Member,
  NotFound,
  Organization,
  type Paged,
  type PermissionDecision,
  type ProjectId,
  type ResolvedWorkspace,
  subjectTypeOf,
  type UserId,
  type ValidationFailed,
  wireError
} from "@cp/domain"
import {
  idPosition,
  type MemberRow,
  MembersRepo,
  type OrganizationRow,
  OrganizationsRepo,
  ProjectsRepo,
  type RoleBindingRow,
  RoleBindingsRepo,
  Transactor,
  windowOf
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { insertedMember } from "../members/service.ts"
import { apiJson, type EventActor, eventActorOf, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { decide, effectiveAccess } from "../platform/rbac.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { insertWithDerivedSlug, insertWithSlug, slugify, type SlugSteps } from "../platform/slugs.ts"
import { requireProjectIn } from "../projects/scope.ts"
import { grantsOf } from "./grants.ts"

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

export interface CreatedWorkspace {
  readonly organization: Organization
  readonly membership: { readonly role: "owner"; readonly joinedAt: Date }
}

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
  ) => Effect.Effect<
    { readonly permissions: ReadonlyArray<PermissionDecision> },
    NotFound | Forbidden | ValidationFailed
  >
}>()("@cp/server/WorkspacesService") {
  static readonly layer = Layer.effect(
    WorkspacesService,
    Effect.gen(function*() {
      const orgs = yield* OrganizationsRepo
      const members = yield* MembersRepo
      const bindings = yield* RoleBindingsRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors

      /** The workspace row under the owner's account, or a new account root when the owner has none. */
      const workspaceRow = Effect.fnUntraced(function*(name: string, owner: UserId, now: Date) {
        const root = yield* orgs.findEarliestOwnedAccountRoot(owner)
        const publicId = mint.workspaceRef(now.getTime())
        return {
          id: mint.org(now.getTime()),
          publicId,
          name,
          kind: Option.isSome(root) ? "workspace" : "account",
          accountId: Option.isSome(root) ? root.value.publicId : publicId,
          isAccountRoot: Option.isNone(root),
          createdAt: now,
          updatedAt: now
        }
      })

      const slugTaken = (slug: string) => wireError(Conflict, `The slug '${slug}' is taken`, { field: "slug" })

      const createFor = Effect.fnUntraced(function*<E>(
        owner: UserId,
        name: string,
        insert: (steps: SlugSteps<OrganizationRow>) => Effect.Effect<OrganizationRow, E>,
        actor: EventActor
      ) {
        const now = yield* currentDate
        const base = yield* workspaceRow(name, owner, now)
        const row = yield* insert({
          namespace: "organizations",
          taken: orgs.slugsStartingWith,
          withSlug: (slug) => ({ ...base, slug }),
          insert: orgs.insert
        })
        const member: MemberRow = {
          id: mint.member(now.getTime()),
          orgId: row.id,
          subjectType: "user",
          subjectId: owner,
          status: "active",
          joinedAt: now
        }
        const binding: RoleBindingRow = {
          id: mint.roleBinding(now.getTime()),
          orgId: row.id,
          subjectType: "user",
          subjectId: owner,
          role: "owner",
          scopeKind: "organization",
          scopeRef: null,
          createdAt: now
        }
        // Fresh ids on a fresh workspace: a collision here is a defect, not a caller's conflict.
        yield* members.insert(member).pipe(Effect.orDie)
        yield* bindings.insert(binding).pipe(Effect.orDie)
        // webhooks.md §1: each event carries its resource as the API returns it.
        yield* events.record({
          orgId: row.id,
          type: "organization.created",
          actor,
          subject: { kind: "organization", id: row.id, name: row.name },
          data: { organization: apiJson(Organization, toOrganization(row)) },
          description: `Workspace ${row.name} created`
        })
        yield* events.record({
          orgId: row.id,
          type: "membership.added",
          actor,
          subject: { kind: "member", id: member.id, name: null },
          data: { member: apiJson(Member, yield* insertedMember(members, member, [binding])) },
          description: "Creator joined as owner"
        })
        return { organization: toOrganization(row), membership: { role: "owner" as const, joinedAt: now } }
      })

      return WorkspacesService.of({
        create: Effect.fn("Workspaces.create")(function*(actor, input) {
          if (actor.kind !== "user") {
            return yield* wireError(Forbidden, "Only a signed-in user can create a workspace")
          }
          const name = input.name.trim()
          const slug = { requested: input.slug, base: slugify(name) }
          const insert = (steps: SlugSteps<OrganizationRow>) => insertWithSlug(tx, slug, { ...steps, slugTaken })
          return yield* tx.withTransaction(createFor(actor.userId, name, insert, eventActorOf(actor)))
        }),

        createPersonal: (userId, emailLocalPart) =>
          createFor(
            userId,
            "Personal",
            (steps) => insertWithDerivedSlug(tx, slugify(emailLocalPart), steps),
            { actorType: "user", actorId: userId }
          ),

        list: Effect.fn("Workspaces.list")(function*(actor, page) {
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "organizations.list", scope: actor.kind === "user" ? actor.userId : actor.orgId },
            page,
            (window) =>
              actor.kind === "user"
                ? members.pageOrgsForSubject({ subjectType: "user", subjectId: actor.userId, ...window })
                : Effect.map(orgs.findById(actor.orgId), (row) => windowOf(Option.toArray(row), idPosition, window)),
            idPosition
          )
          return { data: { organizations: items.map(toOrganization) }, cursor }
        }),

        children: Effect.fn("Workspaces.children")(function*(workspace, page) {
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "organizations.children", scope: workspace.organization.id },
            page,
            (window) =>
              workspace.organization.isAccountRoot
                ? orgs.pageChildren({ account: workspace.organization.workspaceRef, ...window })
                : Effect.succeed([]),
            idPosition
          )
          return {
            data: { workspaces: items.map((row) => ({ orgId: row.id, workspaceRef: row.publicId, name: row.name })) },
            cursor
          }
        }),

        effectiveAccess: Effect.fn("Workspaces.effectiveAccess")(function*(actor, workspace, query) {
          // A project of another workspace is refused as API-key creation refuses it, not answered for.
          if (query.projectId !== undefined) {
            yield* requireProjectIn(projects, workspace.organization.id, query.projectId, "projectId")
          }
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
