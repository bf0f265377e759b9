/**
 * Who is calling and what every endpoint requires. Endpoints declare their requirement with
 * `requires(...)`; one middleware on the server enforces it before any handler runs. Every signed-in
 * route carries one pair of middleware: `Authentication` and `Authorization` outside a workspace,
 * `WorkspaceAuthentication` and `WorkspaceAuthorization` under `/v1/organizations/{orgId}`, where
 * handlers find the workspace as `CurrentWorkspace`. Authorization is added first, so it runs inside
 * authentication and reads what authentication provides.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { HttpClientRequest } from "effect/http"
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import type { Grant, Permission, Role } from "./access.ts"
import { BadRequest, Forbidden, NotFound, Unauthenticated, ValidationFailed } from "./errors.ts"
import type { OrgId, ProjectId, ServicePrincipalId, SessionId, UserId } from "./ids.ts"
import { describedText, PAGE_LIMIT } from "./reference.ts"
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

/** The authenticated caller, provided by `Authentication` and `WorkspaceAuthentication`. */
export class CurrentActor extends Context.Service<CurrentActor, Actor>()("@cp/domain/CurrentActor") {}

/** A workspace the caller can see, with every grant the caller holds on it (direct, team, cascaded). */
export interface ResolvedWorkspace {
  readonly organization: Organization
  readonly grants: ReadonlyArray<Grant>
}

/** The workspace a `/v1/organizations/{orgId}/…` route names, as its caller sees it (`WorkspaceAuthentication`). */
export class CurrentWorkspace extends Context.Service<CurrentWorkspace, ResolvedWorkspace>()(
  "@cp/domain/CurrentWorkspace"
) {}

/** The caller and the workspace, for a workspace route's handler that hands both to its service. */
export const actorInWorkspace = Effect.all({ actor: CurrentActor, workspace: CurrentWorkspace })

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
  /**
   * A route on one resource that lives at workspace or project scope (webhook item routes): the service checks
   * `permission` when the resource is workspace scoped and `projectPermission` on its project when it is project
   * scoped, once it has found the resource. The middleware lets the request through to that check.
   */
  | { readonly _tag: "ResourcePermission"; readonly permission: Permission; readonly projectPermission: Permission }

export class RequiredAccess extends Context.Service<RequiredAccess, Requirement>()("@cp/domain/RequiredAccess") {}

export const requires = {
  none: Context.make(RequiredAccess, { _tag: "None" }),
  authenticated: Context.make(RequiredAccess, { _tag: "Authenticated" }),
  session: Context.make(RequiredAccess, { _tag: "Session" }),
  permission: (permission: Permission) => Context.make(RequiredAccess, { _tag: "Permission", permission }),
  resourcePermission: (permission: Permission, projectPermission: Permission) =>
    Context.make(RequiredAccess, { _tag: "ResourcePermission", permission, projectPermission })
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

/**
 * `Authorization: Bearer <token>`, the scheme name written in lowercase as OpenAPI tools expect (the docs page then
 * offers a token field and sends `Bearer`, not Basic credentials).
 */
const bearer = HttpApiSecurity.annotateMerge(
  HttpApiSecurity.http({ scheme: "bearer" }),
  OpenApi.annotations({
    description: "A session token (`sps_ses_…`, from `POST /v1/auth/login/complete`) or an API key (`sk_…`).",
    format: "session token or API key"
  })
)

/** Bearer authentication: the token (session or API key) resolved to the current actor, or 401. */
export class Authentication extends HttpApiMiddleware.Service<Authentication, { provides: CurrentActor }>()(
  "@cp/domain/Authentication",
  {
    error: Unauthenticated,
    security: { bearer },
    requiredForClient: true
  }
) {}

/**
 * Bearer authentication on a workspace route: the current actor and the workspace the path names, visible to that
 * actor (401 without a valid credential, 404 when the workspace is unknown or hidden from the caller).
 */
export class WorkspaceAuthentication extends HttpApiMiddleware.Service<
  WorkspaceAuthentication,
  { provides: CurrentActor | CurrentWorkspace }
>()("@cp/domain/WorkspaceAuthentication", {
  error: [Unauthenticated, NotFound],
  security: { bearer },
  requiredForClient: true
}) {}

/** Enforces the endpoint's declared requirement outside a workspace: any credential, or a signed-in user. */
export class Authorization extends HttpApiMiddleware.Service<Authorization, { requires: CurrentActor }>()(
  "@cp/domain/Authorization",
  { error: Forbidden }
) {}

/** Enforces the endpoint's declared requirement on a workspace route, permissions included. */
export class WorkspaceAuthorization extends HttpApiMiddleware.Service<
  WorkspaceAuthorization,
  { requires: CurrentActor | CurrentWorkspace }
>()("@cp/domain/WorkspaceAuthorization", { error: Forbidden }) {}

/** The client side of both bearer middlewares: `authorize` sets the credential on each request that declares one. */
export const layerBearerClient = (
  authorize: (request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
) =>
  Layer.mergeAll(
    HttpApiMiddleware.layerClient(Authentication, ({ next, request }) => next(authorize(request))),
    HttpApiMiddleware.layerClient(WorkspaceAuthentication, ({ next, request }) => next(authorize(request)))
  )

/** Schema failures: 422 `validation_failed` (body, query), 400 for malformed JSON, 404 for a malformed path id. */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()(
  "@cp/domain/RequestValidation",
  { error: [ValidationFailed, BadRequest, NotFound] }
) {}

/** Lists and pages: `limit` 1..100 (default 50) and an opaque `cursor`. */
export const PageQuery = {
  limit: Schema.optionalKey(
    Schema.NumberFromString.check(
      Schema.isInt(),
      Schema.isBetween({ minimum: PAGE_LIMIT.minimum, maximum: PAGE_LIMIT.maximum })
    )
  ),
  cursor: Schema.optionalKey(
    describedText("The `meta.cursor` of the previous page; absent for the first page.")
  )
}
