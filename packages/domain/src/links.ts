/**
 * Command-line workspace links (spec: Command-line workspace link; Run-state plane "Command-line links";
 * run-state.md §1): a repository remote URL, stored canonical, bound to a project of the workspace (created when
 * absent). Unlinking sets `deletedAt`; the project stays.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, NotFound, PreconditionFailed } from "./errors.ts"
import { IdPrefix, OrgId, prefixed, ProjectId } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import { CreatedBy } from "./runs.ts"
import { Authentication, Authorization, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { LineText } from "./text.ts"
import { Envelope, Timestamp } from "./wire.ts"
import { OrgRef, Slug } from "./workspaces.ts"

export const LinkId = prefixed(IdPrefix.cliLink).pipe(Schema.brand("LinkId"))
export type LinkId = typeof LinkId.Type

export const LinkProvider = Schema.Literals(["scmhost", "git"])

export const CiSettings = Schema.Struct({
  oidcEnabled: Schema.Boolean,
  apiKeyEnabled: Schema.Boolean,
  allowedRefPattern: Schema.String,
  allowedEnvironments: Schema.Array(Schema.String)
})
export type CiSettings = typeof CiSettings.Type

export const defaultCiSettings: CiSettings = {
  oidcEnabled: false,
  apiKeyEnabled: true,
  allowedRefPattern: "*",
  allowedEnvironments: []
}

export const CiSettingsInput = Schema.Struct({
  oidcEnabled: Schema.optionalKey(Schema.Boolean),
  apiKeyEnabled: Schema.optionalKey(Schema.Boolean),
  allowedRefPattern: Schema.optionalKey(LineText.check(Schema.isMinLength(1), Schema.isMaxLength(255))),
  allowedEnvironments: Schema.optionalKey(
    Schema.Array(LineText.check(Schema.isMinLength(1), Schema.isMaxLength(64))).check(Schema.isMaxLength(50))
  )
})
export type CiSettingsInput = typeof CiSettingsInput.Type

export const CliLink = Schema.Struct({
  id: LinkId,
  orgId: OrgId,
  orgSlug: Schema.String,
  projectId: ProjectId,
  projectSlug: Schema.String,
  remoteUrl: Schema.String,
  provider: LinkProvider,
  providerRepoId: Schema.NullOr(Schema.String),
  providerOwnerId: Schema.NullOr(Schema.String),
  providerOwnerLogin: Schema.NullOr(Schema.String),
  ciSettings: CiSettings,
  createdBy: CreatedBy,
  createdAt: Timestamp,
  lastSeenAt: Schema.NullOr(Timestamp),
  deletedAt: Schema.NullOr(Timestamp)
})
export type CliLink = typeof CliLink.Type

/** A remote URL as a client sends it (the service canonicalises it, 422 when it cannot). */
export const RemoteUrl = describedText(
  "A repository remote URL: `https://host/owner/repo`, `ssh://git@host/owner/repo.git` or `git@host:owner/repo.git`"
).check(Schema.isMinLength(1), Schema.isMaxLength(2048))

export const LinkInput = Schema.Struct({
  remoteUrl: RemoteUrl,
  projectSlug: Schema.optionalKey(Slug),
  ciSettings: Schema.optionalKey(CiSettingsInput)
})
export type LinkInput = typeof LinkInput.Type

export const LinkUpdate = Schema.Struct({ ciSettings: CiSettingsInput })

const orgParams = { orgId: OrgRef }
const projectParams = { ...orgParams, projectId: ProjectId }
const linkParams = { ...projectParams, linkId: LinkId }

export class CliLinksApi extends HttpApiGroup.make("cliLinks")
  .add(
    HttpApiEndpoint.post("create", "/v1/organizations/:orgId/cli/links", {
      params: orgParams,
      payload: LinkInput,
      success: Envelope({ link: CliLink }),
      error: [Conflict, PreconditionFailed]
    }).annotateMerge(
      doc(
        "Link a repository",
        "Binds a remote URL, stored canonical, to a project (`projectSlug`, created when absent; derived from the" +
          " repository name without it). An active link for the same project and URL is answered as it is."
      )
    ).annotateMerge(requires.permission("org.cli.link")),
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/cli/links", {
      params: orgParams,
      success: Envelope({ links: Schema.Array(CliLink) })
    }).annotateMerge(doc("List the workspace's command-line links")).annotateMerge(requires.permission("org.cli.link")),
    HttpApiEndpoint.get("listForProject", "/v1/organizations/:orgId/projects/:projectId/cli/links", {
      params: projectParams,
      success: Envelope({ links: Schema.Array(CliLink) }),
      error: NotFound
    }).annotateMerge(doc("List a project's command-line links")).annotateMerge(requires.permission("project.read")),
    HttpApiEndpoint.patch("update", "/v1/organizations/:orgId/projects/:projectId/cli/links/:linkId", {
      params: linkParams,
      payload: LinkUpdate,
      success: Envelope({ link: CliLink }),
      error: NotFound
    }).annotateMerge(doc("Update a link's CI settings")).annotateMerge(requires.permission("org.cli.link")),
    HttpApiEndpoint.delete("unlink", "/v1/organizations/:orgId/projects/:projectId/cli/links/:linkId", {
      params: linkParams,
      success: Envelope({ link: CliLink }),
      error: NotFound
    }).annotateMerge(doc("Unlink a repository", "Sets `deletedAt`; the project stays.")).annotateMerge(
      requires.permission("org.cli.link")
    )
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Command-line links", description: "Repositories linked to projects" }))
{}

export class CliLinkResolveApi extends HttpApiGroup.make("cliLinkResolve")
  .add(
    HttpApiEndpoint.get("resolve", "/v1/cli/links/resolve", {
      query: { remoteUrl: RemoteUrl },
      success: Envelope({ candidates: Schema.Array(CliLink), links: Schema.Array(CliLink) })
    }).annotateMerge(
      doc(
        "Resolve a remote URL to links",
        "The caller's visible active links for the canonical URL across workspaces, newest first."
      )
    ).annotateMerge(requires.authenticated)
  )
  .middleware(Authorization)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Command-line link resolution" }))
{}
