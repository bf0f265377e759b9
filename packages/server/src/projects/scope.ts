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
import { Effect } from "effect"
import { orFail } from "../platform/serviceKit.ts"

/** The 404 for a project missing from the workspace. */
export const projectNotFound = (projectId: string) => wireError(NotFound, "Project not found", { projectId })

/** The 404 for a missing environment, with the details the caller reports. */
export const environmentNotFound = (details: { readonly projectId?: string; readonly environmentId: string }) =>
  wireError(NotFound, "Environment not found", details)

/** The project in the workspace, or its 404 (archived projects are found). */
export const findProject = (projects: ProjectsRepo["Service"], orgId: OrgId, projectId: ProjectId) =>
  projects.findById({ orgId, projectId }).pipe(orFail(() => projectNotFound(projectId)))

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
  projects.findById({ orgId, projectId }).pipe(
    orFail(() => validationFailed({ [field]: ["names no project in this workspace"] })),
    Effect.asVoid
  )

/** The environment of the project, or a 404 carrying `details` (by default the environment id). */
export const findEnvironment = (
  environments: EnvironmentsRepo["Service"],
  key: { readonly orgId: OrgId; readonly projectId: ProjectId; readonly environmentId: EnvironmentId },
  details: { readonly projectId?: string; readonly environmentId: string } = { environmentId: key.environmentId }
) => environments.findById(key).pipe(orFail(() => environmentNotFound(details)))
