/** Lookups of the project and environment a route names, failing with the wire 404 when they are missing. */
import { type EnvironmentId, NotFound, type OrgId, type ProjectId, wireError } from "@cp/domain"
import type { EnvironmentsRepo, ProjectsRepo } from "@cp/persistence"
import { Effect, Option } from "effect"

/** The 404 for a project missing from the workspace. */
export const projectNotFound = (projectId: string) => wireError(NotFound, "Project not found", { projectId })

/** The 404 for a missing environment, with the details the caller reports. */
export const environmentNotFound = (details: { readonly projectId?: string; readonly environmentId: string }) =>
  wireError(NotFound, "Environment not found", details)

/** The project in the workspace, or its 404 (archived projects are found). */
export const findProject = (projects: ProjectsRepo["Service"], orgId: OrgId, projectId: ProjectId) =>
  Effect.flatMap(projects.findById(orgId, projectId), Option.match({
    onNone: () => Effect.fail(projectNotFound(projectId)),
    onSome: Effect.succeed
  }))

/** The environment of the project, or a 404 carrying `details` (by default the environment id). */
export const findEnvironment = (
  environments: EnvironmentsRepo["Service"],
  orgId: OrgId,
  projectId: ProjectId,
  environmentId: EnvironmentId,
  details: { readonly projectId?: string; readonly environmentId: string } = { environmentId }
) =>
  Effect.flatMap(environments.findEnvironment(orgId, projectId, environmentId), Option.match({
    onNone: () => Effect.fail(environmentNotFound(details)),
    onSome: Effect.succeed
  }))
