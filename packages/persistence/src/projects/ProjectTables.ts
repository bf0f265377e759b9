/** The in-memory tables of the projects area, shared by `ProjectsRepo.memory` and `EnvironmentsRepo.memory`. */
import type { EnvironmentId, ProjectId } from "@cp/domain/ids"
import { Context, Layer } from "effect"
import type { EnvironmentRow, ProjectRow } from "./rows.ts"

export class ProjectTables extends Context.Service<ProjectTables, {
  readonly projects: Map<ProjectId, ProjectRow>
  readonly environments: Map<EnvironmentId, EnvironmentRow>
}>()("@cp/persistence/projects/ProjectTables") {
  static readonly layer = Layer.sync(
    ProjectTables,
    () => ProjectTables.of({ projects: new Map(), environments: new Map() })
  )
}
