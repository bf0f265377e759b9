/** What an area's service needs in a memory-backed test, built once here instead of in every suite. */
import type { Actor } from "@cp/domain"
import { Layer } from "effect"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { EventLog } from "../../src/platform/events.ts"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspaceResolverLive } from "../../src/workspaces/resolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"

/** Workspaces, the edge's resolver, events, cursors and keys over memory repositories, in test mode. */
export const areaServicesLayer = WorkspacesService.layer.pipe(
  Layer.provideMerge(WorkspaceResolverLive),
  Layer.provideMerge(Layer.mergeAll(EventLog.layer, Cursors.layer)),
  Layer.provideMerge(ServerKeys.layer),
  Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
  Layer.provideMerge(RepositoriesMemory)
)

/** A signed-in user actor with fresh ids. */
export const userActor = (): Actor & { readonly kind: "user" } => ({
  kind: "user",
  userId: mint.user(0),
  sessionId: mint.session(0)
})
