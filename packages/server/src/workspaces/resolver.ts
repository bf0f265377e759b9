/** The edge's workspace lookup: reference → workspace plus the caller's grants, or nothing (404). */
import type { Actor, OrgId, WorkspaceRef } from "@cp/domain"
import { OrganizationsRepo } from "@cp/persistence"
import { Effect, Layer, Option } from "effect"
import { workflowGrants } from "../platform/rbac.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { grantsOf } from "./grants.ts"
import { toOrganization } from "./service.ts"

const principalOf = (actor: Actor) => {
  switch (actor.kind) {
    case "user":
      return { subjectType: "user" as const, subjectId: actor.userId, pinnedTo: undefined }
    case "service_principal":
      return { subjectType: "service_principal" as const, subjectId: actor.principalId, pinnedTo: actor.orgId }
    case "workflow":
      return undefined
  }
}

export const WorkspaceResolverLive = Layer.effect(
  WorkspaceResolver,
  Effect.gen(function*() {
    const orgs = yield* OrganizationsRepo
    const resolver: WorkspaceResolver["Service"] = WorkspaceResolver.of({
      resolve: Effect.fnUntraced(function*(ref, actor) {
        if (actor.kind === "workflow") {
          // No membership or binding: the token binds the workspace and project; the workspace must be that one.
          const found = yield* orgs.resolveForSubject({ ref, subjectType: "service_principal", subjectId: actor.subject })
          return Option.flatMap(found, ({ organization }) =>
            organization.id === actor.orgId
              ? Option.some({ organization: toOrganization(organization), grants: workflowGrants(actor.projectId) })
              : Option.none())
        }
        const principal = principalOf(actor)
        if (principal === undefined) return Option.none()
        const found = yield* orgs.resolveForSubject({ ref, ...principal })
        return Option.flatMap(found, ({ organization, bindings }) => {
          if (principal.pinnedTo !== undefined && organization.id !== principal.pinnedTo) return Option.none()
          const grants = grantsOf(organization.id, bindings)
          return grants.length === 0 ? Option.none() : Option.some({ organization: toOrganization(organization), grants })
        })
      }),
      // Only users reach a hidden workspace (an invitee); there they hold no grant, so such a route checks none.
      resolveEvenIfHidden: Effect.fnUntraced(function*(ref, actor) {
        const visible = yield* resolver.resolve(ref, actor)
        if (Option.isSome(visible) || actor.kind !== "user") return visible
        const found = yield* orgs.resolveForSubject({ ref, subjectType: "user", subjectId: actor.userId })
        return Option.map(found, ({ organization }) => ({ organization: toOrganization(organization), grants: [] }))
      }),
      publicIds: Effect.fnUntraced(function*(orgIds) {
        const rows = yield* Effect.forEach(orgIds, (id) => orgs.findById(id))
        return new Map<OrgId, WorkspaceRef>(rows.flatMap(Option.toArray).map((row) => [row.id, row.publicId]))
      })
    })
    return resolver
  })
)
