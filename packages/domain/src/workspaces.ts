/** Workspaces (organizations): create, list, get by any reference, child workspaces, effective access. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { PermissionDecision, Role } from "./access.ts"
import { Conflict, NotFound } from "./errors.ts"
import { OrgId, ProjectId, WorkspaceRef } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import {
  Authentication,
  Authorization,
  PageQuery,
  requires,
  WorkspaceAuthentication,
  WorkspaceAuthorization
} from "./security.ts"
import { LineText, Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"

export const Slug = Text.check(
  Schema.isPattern(/^[a-z0-9][a-z0-9-]{0,62}$/, {
    message: "must be 1 to 63 lowercase letters, digits or '-', starting with a letter or digit"
  })
)

export const Name = LineText.check(
  Schema.isPattern(/\S/, { message: "must not be blank" }),
  Schema.isMaxLength(128)
)

export const Organization = Schema.Struct({
  id: OrgId,
  name: Schema.String,
  slug: Schema.String,
  workspaceRef: WorkspaceRef,
  accountId: WorkspaceRef,
  kind: Schema.String,
  isAccountRoot: Schema.Boolean,
  createdAt: Timestamp
})
export type Organization = typeof Organization.Type

export const Membership = Schema.Struct({ role: Role, joinedAt: Timestamp })

export const ChildWorkspace = Schema.Struct({ orgId: OrgId, workspaceRef: WorkspaceRef, name: Schema.String })

/** Any of the three spellings of a workspace reference: `org_…`, `ws_…` or a slug. */
export const OrgRef = describedText("The workspace: its `org_` id, its `ws_` public id or its slug")

const orgParams = { orgId: OrgRef }

/** Creating and listing are outside any workspace, the rest inside one: each endpoint names its middleware. */
export class WorkspacesApi extends HttpApiGroup.make("workspaces")
  .add(
    HttpApiEndpoint.post("create", "/v1/organizations", {
      payload: Schema.Struct({ name: Name, slug: Schema.optionalKey(Slug) }),
      success: Envelope({ organization: Organization, membership: Membership }),
      error: Conflict
    })
      .annotateMerge(
        doc(
          "Create a workspace",
          "The caller becomes its owner; `parentId` makes it a child workspace of an account the caller administers."
        )
      ).annotateMerge(requires.authenticated)
      .middleware(Authorization)
      .middleware(Authentication),
    HttpApiEndpoint.get("list", "/v1/organizations", {
      query: PageQuery,
      success: Page({ organizations: Schema.Array(Organization) })
    })
      .annotateMerge(
        doc(
          "List your workspaces",
          "Every workspace the caller can see, directly or through a team or a parent account."
        )
      ).annotateMerge(requires.authenticated)
      .middleware(Authorization)
      .middleware(Authentication),
    HttpApiEndpoint.get("get", "/v1/organizations/:orgId", {
      params: orgParams,
      success: Envelope({ organization: Organization })
    })
      .annotateMerge(doc("Get a workspace", "`{orgId}` accepts the `org_` id, the `ws_` public id or the slug."))
      .annotateMerge(requires.permission("organization.read"))
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication),
    HttpApiEndpoint.get("children", "/v1/organizations/:orgId/workspaces", {
      params: orgParams,
      query: PageQuery,
      success: Page({ workspaces: Schema.Array(ChildWorkspace) })
    })
      .annotateMerge(doc("List child workspaces", "The workspaces whose parent account is this one.")).annotateMerge(
        requires.permission("organization.member.list")
      )
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication),
    HttpApiEndpoint.get("effectiveAccess", "/v1/organizations/:orgId/effective-access", {
      params: orgParams,
      query: {
        projectId: Schema.optionalKey(ProjectId),
        subjectId: Schema.optionalKey(
          describedText("Whose access (a `usr_` or `sp_` id); the caller's when absent")
        )
      },
      success: Envelope({ permissions: Schema.Array(PermissionDecision) }),
      error: NotFound
    })
      .annotateMerge(
        doc(
          "Explain effective access",
          "The caller's (or a given subject's) permissions in this workspace, each with where it comes " +
            "from: direct, team or account cascade."
        )
      ).annotateMerge(requires.authenticated)
      .middleware(WorkspaceAuthorization)
      .middleware(WorkspaceAuthentication)
  )
  .annotateMerge(OpenApi.annotations({ title: "Workspaces", description: "Workspaces and account roots" }))
{}
