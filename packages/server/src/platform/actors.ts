/** Turns a bearer token into an actor: session tokens first, anything else as an API key (spec Authentication 4). */
import type { Actor, ResolvedWorkspace } from "@cp/domain"
import { Context, type Effect, type Option } from "effect"

/** A request's credential and the workspace its path names, resolved in the routing order of contract §4. */
export interface ActorOnWorkspace {
  /** None for an unknown, expired or revoked credential. */
  readonly actor: Option.Option<Actor>
  /** None when there is no actor, or the reference is unknown or names a workspace the actor cannot see. */
  readonly workspace: Option.Option<ResolvedWorkspace>
}

export class ActorResolver extends Context.Service<ActorResolver, {
  /** None for an unknown, expired or revoked credential. */
  readonly resolve: (token: string) => Effect.Effect<Option.Option<Actor>>
  /**
   * The actor, then the workspace `ref` names as `WorkspaceResolver.resolve` resolves it for that actor; a session
   * token costs one database read for both.
   */
  readonly resolveOnWorkspace: (token: string, ref: string) => Effect.Effect<ActorOnWorkspace>
}>()("@cp/server/ActorResolver") {}
