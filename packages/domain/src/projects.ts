/**
 * Projects and environments (spec: Project, environment; "Projects and environments" endpoints). Both are archived,
 * never hard-deleted: DELETE sets `status: "archived"` and `archivedAt`, and the record stays readable.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, NotFound, PreconditionFailed } from "./errors.ts"
import { EnvironmentId, OrgId, ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { Name, OrgRef, Slug } from "./workspaces.ts"

export const ProjectStatus = Schema.Literals(["active", "archived"])
export type ProjectStatus = typeof ProjectStatus.Type
export const EnvironmentStatus = Schema.Literals(["active", "archived"])
export type EnvironmentStatus = typeof EnvironmentStatus.Type

export const Project = Schema.Struct({
  id: ProjectId,
  orgId: OrgId,
  name: Schema.String,
  slug: Schema.String,
  status: ProjectStatus,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  archivedAt: Schema.NullOr(Timestamp)
})
export type Project = typeof Project.Type

/** `lastActiveAt` is null until the first push referencing the environment (the sweep then counts from createdAt). */
export const Environment = Schema.Struct({
  id: EnvironmentId,
  orgId: OrgId,
  projectId: ProjectId,
  name: Schema.String,
  slug: Schema.String,
  status: EnvironmentStatus,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  archivedAt: Schema.NullOr(Timestamp),
  lastActiveAt: Schema.NullOr(Timestamp)
})
export type Environment = typeof Environment.Type

export const ProjectInput = Schema.Struct({ name: Name, slug: Schema.optionalKey(Slug) })
export const EnvironmentInput = Schema.Struct({ name: Name, slug: Schema.optionalKey(Slug) })

const orgParams = { orgId: OrgRef }
const projectParams = { ...orgParams, projectId: ProjectId }
const environmentParams = { ...projectParams, environmentId: EnvironmentId }

export class ProjectsApi extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/projects", {
      params: orgParams,
      query: PageQuery,
      success: Page({ projects: Schema.Array(Project) })
    }).annotateMerge(doc("List projects")).annotateMerge(requires.permission("project.list")),
    HttpApiEndpoint.post("create", "/v1/organizations/:orgId/projects", {
      params: orgParams,
      payload: ProjectInput,
      success: Envelope({ project: Project }),
      error: [Conflict, PreconditionFailed]
    }).annotateMerge(
      doc("Create a project", "Counts against the plan's `limit.projects` (412 `precondition_failed` past it).")
    ).annotateMerge(requires.permission("project.create")),
    HttpApiEndpoint.get("get", "/v1/organizations/:orgId/projects/:projectId", {
      params: projectParams,
      success: Envelope({ project: Project }),
      error: NotFound
    }).annotateMerge(doc("Get a project")).annotateMerge(requires.permission("project.read")),
    HttpApiEndpoint.delete("archive", "/v1/organizations/:orgId/projects/:projectId", {
      params: projectParams,
      success: Envelope({ project: Project }),
      error: NotFound
    }).annotateMerge(
      doc("Archive a project", "Sets `status: archived`; the project stays readable and can be restored.")
    ).annotateMerge(requires.permission("project.delete")),
    HttpApiEndpoint.post("restore", "/v1/organizations/:orgId/projects/:projectId/restore", {
      params: projectParams,
      success: Envelope({ project: Project }),
      error: [NotFound, PreconditionFailed]
    }).annotateMerge(doc("Restore a project", "Counts against the plan's `limit.projects` again.")).annotateMerge(
      requires.permission("project.create")
    ),
    HttpApiEndpoint.get("listEnvironments", "/v1/organizations/:orgId/projects/:projectId/environments", {
      params: projectParams,
      query: PageQuery,
      success: Page({ environments: Schema.Array(Environment) }),
      error: NotFound
    }).annotateMerge(doc("List a project's environments")).annotateMerge(requires.permission("environment.read")),
    HttpApiEndpoint.post("createEnvironment", "/v1/organizations/:orgId/projects/:projectId/environments", {
      params: projectParams,
      payload: EnvironmentInput,
      success: Envelope({ environment: Environment }),
      error: [NotFound, Conflict]
    }).annotateMerge(doc("Create an environment")).annotateMerge(requires.permission("environment.create")),
    HttpApiEndpoint.get(
      "getEnvironment",
      "/v1/organizations/:orgId/projects/:projectId/environments/:environmentId",
      { params: environmentParams, success: Envelope({ environment: Environment }), error: NotFound }
    ).annotateMerge(doc("Get an environment")).annotateMerge(requires.permission("environment.read")),
    HttpApiEndpoint.delete(
      "archiveEnvironment",
      "/v1/organizations/:orgId/projects/:projectId/environments/:environmentId",
      { params: environmentParams, success: Envelope({ environment: Environment }), error: NotFound }
    ).annotateMerge(doc("Archive an environment", "Unused environments are also archived by the idle sweep."))
      .annotateMerge(requires.permission("environment.delete"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Projects", description: "Projects and their environments" }))
{}
