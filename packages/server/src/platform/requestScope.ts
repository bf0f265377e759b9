/**
 * What the edge learned about the current request before routing: the caller, the workspace its path
 * names (already resolved and checked for visibility), and client details for security events.
 */
import { type Actor, NotFound, type ResolvedWorkspace, wireError } from "@cp/domain"
import { Context, Effect } from "effect"

export type ActorResolution =
  | { readonly _tag: "Anonymous" }
  | { readonly _tag: "Invalid" }
  | { readonly _tag: "Resolved"; readonly actor: Actor }

export interface RequestScope {
  readonly actor: ActorResolution
  readonly workspace: ResolvedWorkspace | undefined
  readonly ip: string | null
  readonly userAgent: string | null
}

export const CurrentRequestScope = Context.Reference<RequestScope>("@cp/server/CurrentRequestScope", {
  defaultValue: () => ({ actor: { _tag: "Anonymous" }, workspace: undefined, ip: null, userAgent: null })
})

/** The workspace the path names; routes under `/v1/organizations/{orgId}` always have one (the edge 404s otherwise). */
export const currentWorkspace = Effect.flatMap(CurrentRequestScope, ({ workspace }) =>
  workspace === undefined
    ? Effect.fail(wireError(NotFound, "Workspace not found"))
    : Effect.succeed(workspace))
