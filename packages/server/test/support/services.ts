/** What an area's service needs in a memory-backed test, built once here instead of in every suite. */
import type { Actor, OrgId, Role } from "@cp/domain"
import { MembersRepo, ProjectsRepo, RoleBindingsRepo } from "@cp/persistence"
import { Effect, Layer } from "effect"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { EventLog } from "../../src/platform/events.ts"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspaceResolverLive } from "../../src/workspaces/resolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"

/** Workspaces, the edge's resolver, events, cursors and keys over `repositories`, in test mode. */
export const areaServicesOver = <R, E, RIn>(repositories: Layer.Layer<R, E, RIn>) =>
  WorkspacesService.layer.pipe(
    Layer.provideMerge(WorkspaceResolverLive),
    Layer.provideMerge(Layer.mergeAll(EventLog.layer, Cursors.layer)),
    Layer.provideMerge(ServerKeys.layer),
    Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
    Layer.provideMerge(repositories)
  )

/** The area services over memory repositories. */
export const areaServicesLayer = areaServicesOver(RepositoriesMemory)

/** A signed-in user actor with fresh ids. */
export const userActor = (): Actor & { readonly kind: "user" } => ({
  kind: "user",
  userId: mint.user(0),
  sessionId: mint.session(0)
})

/** A project of the workspace, written straight to the repository (what a create writes): its id. */
export const seedProject = (orgId: OrgId, status: "active" | "archived" = "active") =>
  Effect.gen(function*() {
    const id = mint.project(0)
    const at = new Date(0)
    yield* (yield* ProjectsRepo).insert({
      id,
      orgId,
      name: `Project ${id.slice(-6)}`,
      slug: id.slice(-12).toLowerCase(),
      status,
      createdAt: at,
      updatedAt: at,
      archivedAt: status === "archived" ? at : null
    }).pipe(Effect.orDie)
    return id
  })

/** What an accepted invitation writes: an active membership and, unless `role` is undefined, a workspace binding. */
export const seedMembership = (orgId: OrgId, actor: Actor & { readonly kind: "user" }, role: Role | undefined) =>
  Effect.gen(function*() {
    const at = new Date(0)
    const subject = { orgId, subjectType: "user" as const, subjectId: actor.userId }
    yield* (yield* MembersRepo).insert({ id: mint.member(0), ...subject, status: "active", joinedAt: at })
    if (role === undefined) return
    yield* (yield* RoleBindingsRepo).insert({
      id: mint.roleBinding(0),
      ...subject,
      role,
      scopeKind: "organization",
      scopeRef: null,
      createdAt: at
    })
  }).pipe(Effect.orDie)
