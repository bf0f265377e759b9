/** The stored shapes of the projects area: projects and their environments. */
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { Schema } from "effect"

const Status = Schema.Literals(["active", "archived"])

/** A row of `projects`; its slug is unique within its workspace (archived projects keep theirs). */
export const ProjectRow = Schema.Struct({
  id: ProjectId,
  orgId: OrgId,
  name: Schema.String,
  slug: Schema.String,
  status: Status,
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  archivedAt: Schema.NullOr(Schema.Date)
})
export type ProjectRow = typeof ProjectRow.Type

/** A row of `environments`; its slug is unique within its project. */
export const EnvironmentRow = Schema.Struct({
  id: EnvironmentId,
  orgId: OrgId,
  projectId: ProjectId,
  name: Schema.String,
  slug: Schema.String,
  status: Status,
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  archivedAt: Schema.NullOr(Schema.Date),
  lastActiveAt: Schema.NullOr(Schema.Date)
})
export type EnvironmentRow = typeof EnvironmentRow.Type

/** A keyset position in a newest-first list: the last row's time and its id. */
export interface ProjectPagePosition {
  readonly at: Date
  readonly key: string
}

export interface ProjectPageWindow {
  readonly after?: ProjectPagePosition | undefined
  readonly limit: number
}
