/**
 * Secrets (spec: secret resource; "Configuration (under {scope})" secrets rows): write-only values at workspace,
 * project and environment scope. Only metadata ever leaves the server: the value is sealed at rest under
 * `SECRETS_KEK` and appears in no response, event, audit entry or log line. DELETE revokes: the row stays, with
 * `status: "revoked"`, and the answer is its final state.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, NotFound } from "./errors.ts"
import { EnvironmentId, OrgId, ProjectId, SecretId } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { LineText, Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** Where a secret is defined: the workspace itself, one project, or one environment of a project. */
export const SecretScopeKind = Schema.Literals(["organization", "project", "environment"])
export type SecretScopeKind = typeof SecretScopeKind.Type

/** `active` from create until DELETE; `revoked` afterwards (the row stays, its value can no longer be rotated). */
export const SecretStatus = Schema.Literals(["active", "revoked"])
export type SecretStatus = typeof SecretStatus.Type

/** Environment-variable style: an upper-case letter, then upper-case letters, digits and `_`; at most 128. */
export const SecretKey = Text.check(
  Schema.isPattern(/^[A-Z][A-Z0-9_]*$/, {
    message: "must start with an upper-case letter and contain only A-Z, 0-9 and _"
  }),
  Schema.isMaxLength(128)
)

/** The write-only value: 1 to 65536 characters. */
export const SecretValue = Text.check(Schema.isMinLength(1), Schema.isMaxLength(65_536))

export const Secret = Schema.Struct({
  id: SecretId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  scopeKind: SecretScopeKind,
  secretKey: Schema.String,
  displayName: Schema.String,
  status: SecretStatus,
  version: Schema.Int,
  rotationPolicy: Schema.NullOr(Schema.String),
  lastRotatedAt: Schema.NullOr(Timestamp),
  expiresAt: Schema.NullOr(Timestamp),
  createdBy: Schema.String,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Secret = typeof Secret.Type

export const SecretInput = Schema.Struct({
  secretKey: SecretKey,
  value: SecretValue,
  displayName: LineText.check(Schema.isMinLength(1), Schema.isMaxLength(128))
})
export type SecretInput = typeof SecretInput.Type

export const SecretRotation = Schema.Struct({ value: SecretValue })
export type SecretRotation = typeof SecretRotation.Type

/** `scope` is checked by the service, so its two messages (contract §4) are the spec's, not the schema's. */
export const SecretListQuery = {
  ...PageQuery,
  scope: Schema.optionalKey(
    describedText("`all` on the workspace route lists the secrets of every scope together")
  )
}

const workspacePath = "/v1/organizations/:orgId"
const projectPath = `${workspacePath}/projects/:projectId`
const environmentPath = `${projectPath}/environments/:environmentId`

const orgParams = { orgId: OrgRef }
const projectParams = { ...orgParams, projectId: ProjectId }
const environmentParams = { ...projectParams, environmentId: EnvironmentId }

const One = Envelope({ secret: Secret })
const Many = Page({ secrets: Schema.Array(Secret) })

/** The four secret routes under one `{scope}` prefix, guarded by that scope's read and write permissions. */
const secretEndpoints = <const P extends `/${string}`, const Params extends Schema.Struct.Fields>(
  prefix: P,
  params: Params,
  read: "organization.config.read" | "project.config.read",
  write: "organization.config.write" | "project.config.write"
) =>
  [
    HttpApiEndpoint.get("list", `${prefix}/config/secrets`, {
      params,
      query: SecretListQuery,
      success: Many,
      error: NotFound
    }).annotateMerge(doc("List secrets", "Metadata only: values are never returned.")).annotateMerge(
      requires.permission(read)
    ),
    HttpApiEndpoint.post("create", `${prefix}/config/secrets`, {
      params,
      payload: SecretInput,
      success: One,
      error: [NotFound, Conflict]
    }).annotateMerge(
      doc(
        "Create a secret",
        "The value is encrypted at rest and never shown again. Send an `Idempotency-Key` to make retries safe."
      )
    ).annotateMerge(requires.permission(write)),
    HttpApiEndpoint.post("rotate", `${prefix}/config/secrets/:secretId/rotate`, {
      params: { ...params, secretId: SecretId },
      payload: SecretRotation,
      success: One,
      error: [NotFound, Conflict]
    }).annotateMerge(doc("Rotate a secret", "Stores a new value as the next version.")).annotateMerge(
      requires.permission(write)
    ),
    HttpApiEndpoint.delete("revoke", `${prefix}/config/secrets/:secretId`, {
      params: { ...params, secretId: SecretId },
      success: One,
      error: [NotFound, Conflict]
    }).annotateMerge(doc("Revoke a secret")).annotateMerge(requires.permission(write))
  ] as const

const workspaceEndpoints = secretEndpoints(
  workspacePath,
  orgParams,
  "organization.config.read",
  "organization.config.write"
)
const projectEndpoints = secretEndpoints(projectPath, projectParams, "project.config.read", "project.config.write")
const environmentEndpoints = secretEndpoints(
  environmentPath,
  environmentParams,
  "project.config.read",
  "project.config.write"
)

/** Workspace-scope secrets; `GET …/config/secrets?scope=all` lists every scope of the workspace together. */
export class SecretsApi extends HttpApiGroup.make("secrets")
  .add(...workspaceEndpoints)
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Secrets", description: "Write-only secrets at workspace scope" }))
{}

export class ProjectSecretsApi extends HttpApiGroup.make("projectSecrets")
  .add(...projectEndpoints)
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Project secrets", description: "Write-only secrets at project scope" }))
{}

export class EnvironmentSecretsApi extends HttpApiGroup.make("environmentSecrets")
  .add(...environmentEndpoints)
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(
    OpenApi.annotations({ title: "Environment secrets", description: "Write-only secrets at environment scope" })
  )
{}
