/** Lookups of the project and environment a route or a body names: the wire 404 (route) or 422 (body) when missing. */
import {
  type EnvironmentId,
  NotFound,
  type OrgId,
  type ProjectId,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import type { EnvironmentsRepo, ProjectsRepo } from "@cp/persistence"
import { Effect, Option } from "effect"

/** The 404 for a project missing from the workspace. */
export const projectNotFound = (projectId: string) => wireError(NotFound, "Project not found", { projectId })

/** The 404 for a missing environment, with the details the caller reports. */
export const environmentNotFound = (details: { readonly projectId?: string; readonly environmentId: string }) =>
  wireError(NotFound, "Environment not found", details)

/** The project in the workspace, or its 404 (archived projects are found). */
export const findProject = (projects: ProjectsRepo["Service"], orgId: OrgId, projectId: ProjectId) =>
  Effect.flatMap(
    projects.findById(orgId, projectId),
    Option.match({
      onNone: () => Effect.fail(projectNotFound(projectId)),
      onSome: Effect.succeed
    })
  )

/**
 * Succeeds when the project exists in the workspace (archived projects count), else the 422 on `field`: a body
 * field naming a project is the caller's input, not the route's, so its absence is not a 404.
 */
export const requireProjectIn = (
  projects: ProjectsRepo["Service"],
  orgId: OrgId,
  projectId: ProjectId,
  field: string
): Effect.Effect<void, ValidationFailed> =>
  Effect.flatMap(
    projects.findById(orgId, projectId),
    Option.match({
      onNone: () => Effect.fail(validationFailed({ [field]: ["names no project in this workspace"] })),
      onSome: () => Effect.void
    })
  )

/** The environment of the project, or a 404 carrying `details` (by default the environment id). */
export const findEnvironment = (
  environments: EnvironmentsRepo["Service"],
  orgId: OrgId,
  projectId: ProjectId,
  environmentId: EnvironmentId,
  details: { readonly projectId?: string; readonly environmentId: string } = { environmentId }
) =>
  Effect.flatMap(
    environments.findEnvironment(orgId, projectId, environmentId),
    Option.match({
      onNone: () => Effect.fail(environmentNotFound(details)),
      onSome: Effect.succeed
    })
  )
