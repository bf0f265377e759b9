/** The stored shapes of the projects area (projects and their environments) and its requests. */
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { Environment, Project } from "@cp/domain/projects"
import { Schema } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/** A row of `projects`: the API's project; its slug is unique within its workspace (archived projects keep theirs). */
export const ProjectRow = Schema.Struct(storedFields(Project.fields))
export type ProjectRow = typeof ProjectRow.Type

/** A row of `environments`: the API's environment; its slug is unique within its project. */
export const EnvironmentRow = Schema.Struct(storedFields(Environment.fields))
export type EnvironmentRow = typeof EnvironmentRow.Type

/** One project of one workspace, active or archived (a project of another workspace is not found). */
export const ProjectKey = Schema.Struct({ orgId: OrgId, projectId: ProjectId })
export type ProjectKey = typeof ProjectKey.Type

/** One project of one workspace, by its slug. */
export const ProjectSlugKey = Schema.Struct({ orgId: OrgId, slug: Schema.String })
export type ProjectSlugKey = typeof ProjectSlugKey.Type

/** A page of the workspace's projects (active and archived). */
export const ProjectsPage = Schema.Struct({ orgId: OrgId, ...pageFields })
export type ProjectsPage = typeof ProjectsPage.Type

/** The taken slugs of the `base` family in a workspace. */
export const ProjectSlugFamily = Schema.Struct({ orgId: OrgId, base: Schema.String })
export type ProjectSlugFamily = typeof ProjectSlugFamily.Type

/** A project's archive or restore at `at`. */
export const ProjectTransition = Schema.Struct({ ...ProjectKey.fields, at: Schema.Date })
export type ProjectTransition = typeof ProjectTransition.Type

/** One environment of one project of one workspace. */
export const EnvironmentKey = Schema.Struct({ ...ProjectKey.fields, environmentId: EnvironmentId })
export type EnvironmentKey = typeof EnvironmentKey.Type

/** One environment of one project of one workspace, by its slug. */
export const EnvironmentSlugKey = Schema.Struct({ ...ProjectKey.fields, slug: Schema.String })
export type EnvironmentSlugKey = typeof EnvironmentSlugKey.Type

/** A page of a project's environments. */
export const EnvironmentsPage = Schema.Struct({ ...ProjectKey.fields, ...pageFields })
export type EnvironmentsPage = typeof EnvironmentsPage.Type

/** The taken slugs of the `base` family in a project. */
export const EnvironmentSlugFamily = Schema.Struct({ projectId: ProjectId, base: Schema.String })
export type EnvironmentSlugFamily = typeof EnvironmentSlugFamily.Type

/** A change to one environment at `at`: archiving it, or a push referencing it. */
export const EnvironmentTransition = Schema.Struct({ ...EnvironmentKey.fields, at: Schema.Date })
export type EnvironmentTransition = typeof EnvironmentTransition.Type

/** The idle sweep's claim: up to `limit` active environments idle since before `cutoff`, archived at `now`. */
export const IdleEnvironments = Schema.Struct({ cutoff: Schema.Date, now: Schema.Date, limit: Schema.Int })
export type IdleEnvironments = typeof IdleEnvironments.Type
