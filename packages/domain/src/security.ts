/**
 * Who is calling and what every endpoint requires. Endpoints declare their requirement with
 * `requires(...)`; one middleware on the server enforces it before any handler runs.
 */
import { Context, Schema } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import type { Grant, Permission, Role } from "./access.ts"
import { BadRequest, Forbidden, NotFound, Unauthenticated, ValidationFailed } from "./errors.ts"
import type { OrgId, ProjectId, ServicePrincipalId, SessionId, UserId } from "./ids.ts"
import type { Organization } from "./workspaces.ts"

export type Actor =
  | { readonly kind: "user"; readonly userId: UserId; readonly sessionId: SessionId }
  | {
    readonly kind: "service_principal"
    readonly principalId: ServicePrincipalId
    readonly apiKeyId: string
    readonly orgId: OrgId
    readonly projectId: ProjectId | null
    readonly role: Role
  }
  | {
    readonly kind: "workflow"
    readonly subject: string
    readonly orgId: OrgId
    readonly projectId: ProjectId
  }

/** The authenticated caller, provided by `Authentication`. */
export class CurrentActor extends Context.Service<CurrentActor, Actor>()("@cp/domain/CurrentActor") {}

/** A workspace the caller can see, with every grant the caller holds on it (direct, team, cascaded). */
export interface ResolvedWorkspace {
  readonly organization: Organization
  readonly grants: ReadonlyArray<Grant>
}

/** The one id that names an actor as a principal (idempotency, rate limits, audit). */
export const actorId = (actor: Actor): string => {
  switch (actor.kind) {
    case "user":
      return actor.userId
    case "service_principal":
      return actor.principalId
    case "workflow":
      return actor.subject
  }
}

/** What an endpoint needs: nothing, any authenticated caller, a session (not an API key), or a permission. */
export type Requirement =
  | { readonly _tag: "None" }
  | { readonly _tag: "Authenticated" }
  | { readonly _tag: "Session" }
  | { readonly _tag: "Permission"; readonly permission: Permission }

export class RequiredAccess extends Context.Service<RequiredAccess, Requirement>()("@cp/domain/RequiredAccess") {}

export const requires = {
  none: Context.make(RequiredAccess, { _tag: "None" }),
  authenticated: Context.make(RequiredAccess, { _tag: "Authenticated" }),
  session: Context.make(RequiredAccess, { _tag: "Session" }),
  permission: (permission: Permission) => Context.make(RequiredAccess, { _tag: "Permission", permission })
}

/**
 * Marks a workspace route that a signed-in caller may reach without seeing the workspace: accepting an invitation
 * by its token, since the invitee is not a member yet. The edge still resolves the reference (404 when unknown) and
 * hands the route the caller's grants there, possibly none; the handler decides by the token.
 */
export class ReachesHiddenWorkspace extends Context.Service<ReachesHiddenWorkspace, true>()(
  "@cp/domain/ReachesHiddenWorkspace"
) {}

export const reachesHiddenWorkspace = Context.make(ReachesHiddenWorkspace, true)

/** Bearer authentication: resolves the token (session or API key) to the current actor. */
export class Authentication extends HttpApiMiddleware.Service<Authentication, { provides: CurrentActor }>()(
  "@cp/domain/Authentication",
  {
    error: [Unauthenticated, Forbidden],
    security: { bearer: HttpApiSecurity.bearer },
    requiredForClient: true
  }
) {}

/** Enforces the endpoint's declared requirement (and, on workspace routes, that the workspace is visible). */
export class Authorization extends HttpApiMiddleware.Service<Authorization, { requires: CurrentActor }>()(
  "@cp/domain/Authorization",
  { error: [Forbidden, NotFound] }
) {}

/** Schema failures: 422 `validation_failed` (body, query), 400 for malformed JSON, 404 for a malformed path id. */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()(
  "@cp/domain/RequestValidation",
  { error: [ValidationFailed, BadRequest, NotFound] }
) {}

/** Lists and pages: `limit` 1..100 (default 50) and an opaque `cursor`. */
export const PageQuery = {
  limit: Schema.optionalKey(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))
  ),
  cursor: Schema.optionalKey(Schema.String)
}
