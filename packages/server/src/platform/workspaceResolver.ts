/** Resolves the workspace reference in a path (`org_…`, `ws_…` or slug) for the caller, before routing. */
import type { Actor, OrgId, ResolvedWorkspace, WorkspaceRef } from "@cp/domain"
import { Context, type Effect, type Option } from "effect"

export class WorkspaceResolver extends Context.Service<WorkspaceResolver, {
  /** None when the reference is unknown or names a workspace the actor cannot see (both answer 404). */
  readonly resolve: (ref: string, actor: Actor) => Effect.Effect<Option.Option<ResolvedWorkspace>>
  /**
   * For routes marked `reachesHiddenWorkspace` only: as `resolve`, but a workspace a signed-in user cannot see still
   * resolves, with no grants. None when the reference is unknown, or hidden from an actor that is not a user.
   */
  readonly resolveEvenIfHidden: (ref: string, actor: Actor) => Effect.Effect<Option.Option<ResolvedWorkspace>>
  /** The `ws_` public ids of the given `org_` ids, for the `/v1/workspaces` alias. */
  readonly publicIds: (orgIds: ReadonlyArray<OrgId>) => Effect.Effect<ReadonlyMap<OrgId, WorkspaceRef>>
}>()("@cp/server/WorkspaceResolver") {}
