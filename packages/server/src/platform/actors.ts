/** Turns a bearer token into an actor: session tokens first, anything else as an API key (spec Authentication 4). */
import type { Actor } from "@cp/domain"
import { Context, type Effect, type Option } from "effect"

export class ActorResolver extends Context.Service<ActorResolver, {
  /** None for an unknown, expired or revoked credential. */
  readonly resolve: (token: string) => Effect.Effect<Option.Option<Actor>>
}>()("@cp/server/ActorResolver") {}
