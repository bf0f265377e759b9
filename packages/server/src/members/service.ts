/**
 * Members (spec: Member; "Members and invitations" endpoints; contract §5): the workspace's members with their
 * roles, changing a member's workspace role, removing a member. Owners are protected twice: only an owner may
 * change or remove an owner or make someone owner, and a workspace never loses its last owner.
 */
import {
  type Actor,
  Forbidden,
  Member,
  type MemberId,
  NotFound,
  type OrgId,
  type Paged,
  type Permission,
  PreconditionFailed,
  type ResolvedWorkspace,
  type ValidationFailed,
  wireError,
  type WorkspaceRole
} from "@cp/domain"
import {
  type MemberListing,
  memberPosition,
  type MemberRow,
  MembersRepo,
  OrganizationsRepo,
  type RoleBindingRow,
  RoleBindingsRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { lockedAuthority } from "../platform/authority.ts"
import { apiJson, eventActorOf, EventLog, previousJson } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { holdsRole } from "../platform/rbac.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"

/**
 * The API view of a member: its roles are its role bindings on this workspace, in grant order; its email and display
 * name were read with it.
 */
export const toMember = (row: MemberListing, bindings: ReadonlyArray<RoleBindingRow>): Member => ({
  id: row.id,
  subjectType: row.subjectType,
  subjectId: row.subjectId,
  status: row.status,
  joinedAt: row.joinedAt,
  roles: bindings
    .filter((binding) => binding.subjectType === row.subjectType && binding.subjectId === row.subjectId)
    .map((binding) => ({ role: binding.role, scopeKind: binding.scopeKind })),
  email: row.email,
  displayName: row.displayName
})

/** A membership just inserted in this transaction, read back with its subject's email and name, as the API shows it. */
export const insertedMember = (
  members: MembersRepo["Service"],
  row: MemberRow,
  bindings: ReadonlyArray<RoleBindingRow>
) =>
  members.findById({ orgId: row.orgId, id: row.id }).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.die(new Error(`membership ${row.id} vanished inside its own transaction`)),
      onSome: (listed) => Effect.succeed(toMember(listed, bindings))
    }))
  )

/** An owner binding that makes its holder an owner of the whole workspace (not a project role). */
const isOwnerBinding = (binding: RoleBindingRow): boolean => binding.role === "owner" && binding.scopeKind !== "project"

/** 403 for an admin (or anyone short of owner) touching an owner or the owner role (contract §5). */
export const ownerRequired = (what: string) =>
  wireError(Forbidden, `Only an owner can ${what}`, { reason: "owner_required" })

const lastOwner = () =>
  wireError(PreconditionFailed, "A workspace must keep at least one owner; make another member owner first", {
    reason: "last_owner"
  })

const memberNotFound = () => wireError(NotFound, "Member not found")

/** The member as the subject of its role bindings on its workspace. */
const subjectOf = (member: MemberRow) => ({
  orgId: member.orgId,
  subjectType: member.subjectType,
  subjectId: member.subjectId
})

export class MembersService extends Context.Service<MembersService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly members: ReadonlyArray<Member> }>, ValidationFailed>
  /** Makes `role` the member's only role binding on the workspace (organization scope). */
  readonly updateRole: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    memberId: MemberId,
    role: WorkspaceRole
  ) => Effect.Effect<{ readonly member: Member }, Forbidden | NotFound | PreconditionFailed>
  /** Deletes the membership and every role binding the member holds on the workspace. */
  readonly remove: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    memberId: MemberId
  ) => Effect.Effect<{ readonly deleted: true }, Forbidden | NotFound | PreconditionFailed>
}>()("@cp/server/MembersService") {
  static readonly layer = Layer.effect(
    MembersService,
    Effect.gen(function*() {
      const members = yield* MembersRepo
      const organizations = yield* OrganizationsRepo
      const bindings = yield* RoleBindingsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors
      const authority = lockedAuthority(organizations, yield* WorkspaceResolver)

      /**
       * Inside a transaction: locks the workspace's memberships and checks the caller's `permission` again there, then
       * reads the member and its bindings, so the owner checks below see every concurrent change that committed first,
       * the caller's own roles included.
       */
      const lockedMember = Effect.fnUntraced(function*(
        actor: Actor,
        workspace: ResolvedWorkspace,
        memberId: MemberId,
        permission: Permission
      ) {
        const current = yield* authority(actor, workspace, permission)
        const orgId = workspace.organization.id
        const member = yield* members.findById({ orgId, id: memberId }).pipe(orFail(memberNotFound))
        return { current, member, held: yield* bindings.listForSubject(subjectOf(member)) }
      })

      /** Whether a user other than `member` holds the owner role on the workspace directly. */
      const anotherOwnerRemains = Effect.fnUntraced(function*(orgId: OrgId, member: MemberRow) {
        const owners = yield* bindings.listByRoleInOrg({ orgId, role: "owner" })
        return owners.some((binding) =>
          isOwnerBinding(binding) && binding.subjectType === "user" &&
          !(binding.subjectType === member.subjectType && binding.subjectId === member.subjectId)
        )
      })

      /** The owner rules for changing or removing `member`, in the order a caller should learn about them. */
      const checkOwnerRules = Effect.fnUntraced(function*(
        workspace: ResolvedWorkspace,
        member: MemberRow,
        held: ReadonlyArray<RoleBindingRow>,
        change: { readonly what: string; readonly keepsOwner: boolean; readonly grantsOwner: boolean }
      ) {
        const isOwner = held.some(isOwnerBinding)
        if ((isOwner || change.grantsOwner) && !holdsRole(workspace.grants, "owner")) {
          return yield* ownerRequired(change.what)
        }
        if (isOwner && !change.keepsOwner && member.subjectType === "user") {
          if (!(yield* anotherOwnerRemains(workspace.organization.id, member))) return yield* lastOwner()
        }
      })

      return MembersService.of({
        list: Effect.fn("Members.list")(function*(workspace, page) {
          const orgId = workspace.organization.id
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "members.list", scope: orgId },
            page,
            (window) => members.listPage({ orgId, ...window }),
            memberPosition
          )
          const held = yield* bindings.listForSubjectsInOrg({ orgId, subjectIds: items.map((row) => row.subjectId) })
          return { data: { members: items.map((row) => toMember(row, held)) }, cursor }
        }),

        updateRole: Effect.fn("Members.updateRole")(function*(actor, workspace, memberId, role) {
          const orgId = workspace.organization.id
          return yield* tx.withTransaction(Effect.gen(function*() {
            const { current, member, held } = yield* lockedMember(
              actor,
              workspace,
              memberId,
              "organization.member.update_role"
            )
            yield* checkOwnerRules(current, member, held, {
              what: role === "owner" ? "make a member owner" : "change an owner's role",
              keepsOwner: role === "owner",
              grantsOwner: role === "owner"
            })
            const [only, ...more] = held
            if (only !== undefined && more.length === 0 && only.role === role && only.scopeKind === "organization") {
              return { member: toMember(member, held) }
            }
            const now = yield* currentDate
            yield* bindings.removeForSubject(subjectOf(member))
            const binding: RoleBindingRow = {
              id: mint.roleBinding(now.getTime()),
              ...subjectOf(member),
              role,
              scopeKind: "organization",
              scopeRef: null,
              createdAt: now
            }
            // The subject's bindings here were just deleted: a collision is a defect.
            yield* bindings.insert(binding).pipe(Effect.orDie)
            yield* events.record({
              orgId,
              type: "membership.updated",
              actor: eventActorOf(actor),
              subject: { kind: "member", id: member.id, name: null },
              // webhooks.md §1: the member as the API returns it, `previous` its roles before.
              data: {
                member: apiJson(Member, toMember(member, [binding])),
                previous: previousJson(Member, toMember(member, held), toMember(member, [binding]))
              },
              description: `Member role changed to ${role}`
            })
            return { member: toMember(member, [binding]) }
          }))
        }),

        remove: Effect.fn("Members.remove")(function*(actor, workspace, memberId) {
          const orgId = workspace.organization.id
          return yield* tx.withTransaction(Effect.gen(function*() {
            const { current, member, held } = yield* lockedMember(
              actor,
              workspace,
              memberId,
              "organization.member.remove"
            )
            yield* checkOwnerRules(current, member, held, {
              what: "remove an owner",
              keepsOwner: false,
              grantsOwner: false
            })
            const removed = yield* bindings.removeForSubject(subjectOf(member))
            yield* members.remove({ orgId, id: member.id })
            yield* events.record({
              orgId,
              type: "membership.removed",
              actor: eventActorOf(actor),
              subject: { kind: "member", id: member.id, name: null },
              // Its final state: the roles it held until now.
              data: { member: apiJson(Member, toMember(member, removed)) },
              description: "Member removed"
            })
            return { deleted: true as const }
          }))
        })
      })
    })
  )
}
