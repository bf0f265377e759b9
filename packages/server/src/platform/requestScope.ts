/**
 * What the edge learned about the current request before routing: the caller, the workspace its path
 * names (already resolved and checked for visibility), and client details for security events. Only the
 * authentication middleware reads the caller and the workspace; handlers get them as `CurrentActor` and
 * `CurrentWorkspace`.
 */
import { type Actor, NotFound, type ResolvedWorkspace, wireError } from "@cp/domain"
import { Context } from "effect"

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

/** A request the edge has not seen carries no credential. */
export const CurrentRequestScope = Context.Reference<RequestScope>("@cp/server/CurrentRequestScope", {
  defaultValue: () => ({ actor: { _tag: "Anonymous" }, workspace: undefined, ip: null, userAgent: null })
})

/** The answer for a workspace reference that is unknown or hidden from the caller. */
export const workspaceNotFound = () => wireError(NotFound, "Workspace not found")
