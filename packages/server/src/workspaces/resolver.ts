/** The edge's workspace lookup: reference → workspace plus the caller's grants, or nothing (404). */
import type { Actor, OrgId, ResolvedWorkspace, WorkspaceRef } from "@cp/domain"
import { OrganizationsRepo, type ResolvedWorkspace as WorkspaceRow } from "@cp/persistence"
import { Effect, Layer, Option } from "effect"
import { workflowGrants } from "../platform/rbac.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { grantsOf } from "./grants.ts"
import { toOrganization } from "./service.ts"

/**
 * The workspace `found` for the actor as the actor may see it, with every grant the actor holds there; None when it
 * holds none, or when the actor is pinned to another workspace (a service principal, a workflow token).
 */
export const visibleTo = (actor: Actor, found: Option.Option<WorkspaceRow>): Option.Option<ResolvedWorkspace> =>
  Option.flatMap(found, ({ organization, bindings }) => {
    if (actor.kind === "workflow") {
      // No membership or binding: the token binds the workspace and project; the workspace must be that one.
      return organization.id === actor.orgId
        ? Option.some({ organization: toOrganization(organization), grants: workflowGrants(actor.projectId) })
        : Option.none()
    }
    if (actor.kind === "service_principal" && organization.id !== actor.orgId) return Option.none()
    const grants = grantsOf(organization.id, bindings)
    return grants.length === 0 ? Option.none() : Option.some({ organization: toOrganization(organization), grants })
  })

/** The subject whose roles decide what an actor sees: a workflow token acts as its service principal. */
const subjectOf = (actor: Actor) => {
  switch (actor.kind) {
    case "user":
      return { subjectType: "user" as const, subjectId: actor.userId }
    case "service_principal":
      return { subjectType: "service_principal" as const, subjectId: actor.principalId }
    case "workflow":
      return { subjectType: "service_principal" as const, subjectId: actor.subject }
  }
}

export const WorkspaceResolverLive = Layer.effect(
  WorkspaceResolver,
  Effect.gen(function*() {
    const orgs = yield* OrganizationsRepo
    const resolver: WorkspaceResolver["Service"] = WorkspaceResolver.of({
      resolve: Effect.fnUntraced(function*(ref, actor) {
        return visibleTo(actor, yield* orgs.resolveForSubject({ ref, ...subjectOf(actor) }))
      }),
      // Only users reach a hidden workspace (an invitee); there they hold no grant, so such a route checks none.
      resolveEvenIfHidden: Effect.fnUntraced(function*(ref, actor) {
        const visible = yield* resolver.resolve(ref, actor)
        if (Option.isSome(visible) || actor.kind !== "user") return visible
        const found = yield* orgs.resolveForSubject({ ref, subjectType: "user", subjectId: actor.userId })
        return Option.map(found, ({ organization }) => ({ organization: toOrganization(organization), grants: [] }))
      }),
      publicIds: Effect.fnUntraced(function*(orgIds) {
        const rows = yield* orgs.findByIds(orgIds)
        return new Map<OrgId, WorkspaceRef>(rows.map((row) => [row.id, row.publicId]))
      })
    })
    return resolver
  })
)
