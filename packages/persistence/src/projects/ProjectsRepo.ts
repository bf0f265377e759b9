/**
 * Projects. A project is never deleted: archiving sets `status` and `archivedAt`, and restoring clears them. Their
 * environments are `EnvironmentsRepo`'s.
 */
import { OrgId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, isSlugOfFamily, keysetQuery, slugFamilyQuery, SlugRow, slugsOf, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { ProjectTables } from "./ProjectTables.ts"
import { ProjectKey, ProjectRow, ProjectSlugFamily, ProjectSlugKey, ProjectsPage, ProjectTransition } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a project slug already taken in the workspace. */
export const projectsSlugConstraint = "projects_org_slug_key"

const uniques: ReadonlyArray<UniqueKey<ProjectRow>> = [
  primaryKey("projects_pkey"),
  { constraint: projectsSlugConstraint, key: (row) => `${row.orgId} ${row.slug}` }
]

const CountRow = Schema.Struct({ count: Schema.NumberFromString })

export class ProjectsRepo extends Context.Service<ProjectsRepo, {
  /** `UniqueViolation` on `projects_org_slug_key` when the workspace already has a project with that slug. */
  readonly insert: (project: ProjectRow) => Effect.Effect<void, UniqueViolation>
  /** The project with this id in this workspace, active or archived (a project of another workspace is None). */
  readonly findById: (key: ProjectKey) => Effect.Effect<Option.Option<ProjectRow>>
  /** The workspace's project with this slug, active or archived. */
  readonly findBySlug: (key: ProjectSlugKey) => Effect.Effect<Option.Option<ProjectRow>>
  /** Up to `limit` of the workspace's projects (active and archived) strictly after `after`, newest first. */
  readonly list: (page: ProjectsPage) => Effect.Effect<ReadonlyArray<ProjectRow>>
  /** The workspace's taken slugs among `base` and `base-<n>`. */
  readonly slugsStartingWith: (family: ProjectSlugFamily) => Effect.Effect<ReadonlyArray<string>>
  /** How many active projects the workspace has (what `limit.projects` bounds). */
  readonly countActive: (orgId: OrgId) => Effect.Effect<number>
  /** Archives the project if active; the archived row, or None when it is not active (or not there). */
  readonly archive: (change: ProjectTransition) => Effect.Effect<Option.Option<ProjectRow>>
  /** Restores the project if archived; the active row, or None when it is not archived (or not there). */
  readonly restore: (change: ProjectTransition) => Effect.Effect<Option.Option<ProjectRow>>
}>()("@cp/persistence/projects/ProjectsRepo") {
  static readonly memory = Layer.effect(
    ProjectsRepo,
    Effect.gen(function*() {
      const { projects } = yield* ProjectTables
      const projectIn = ({ orgId, projectId }: ProjectKey) =>
        Option.filter(Option.fromUndefinedOr(projects.get(projectId)), (row) => row.orgId === orgId)
      const inWorkspace = (orgId: OrgId) => Array.from(projects.values()).filter((row) => row.orgId === orgId)
      /** The conditional `update … where status = from returning *` of archive and restore. */
      const transition = (key: ProjectKey, from: ProjectRow["status"], change: (row: ProjectRow) => ProjectRow) =>
        atomically((changes) => {
          const current = Option.filter(projectIn(key), (row) => row.status === from)
          if (Option.isNone(current)) return Effect.succeed(Option.none<ProjectRow>())
          const next = change(current.value)
          changes.set(projects, next.id, next)
          return Effect.succeed(Option.some(next))
        })
      return ProjectsRepo.of({
        insert: (row) => insertUnique(projects, row.id, row, uniques),
        findById: (key) => Effect.sync(() => projectIn(key)),
        findBySlug: ({ orgId, slug }) =>
          Effect.sync(() => Option.fromUndefinedOr(inWorkspace(orgId).find((row) => row.slug === slug))),
        list: (page) => Effect.sync(() => windowOf(inWorkspace(page.orgId), idPosition, page)),
        slugsStartingWith: ({ orgId, base }) =>
          Effect.sync(() => inWorkspace(orgId).filter((row) => isSlugOfFamily(base)(row.slug)).map((row) => row.slug)),
        countActive: (orgId) => Effect.sync(() => inWorkspace(orgId).filter((row) => row.status === "active").length),
        archive: (change) =>
          transition(change, "active", (row) => ({
            ...row,
            status: "archived",
            archivedAt: change.at,
            updatedAt: change.at
          })),
        restore: (change) =>
          transition(
            change,
            "archived",
            (row) => ({ ...row, status: "active", archivedAt: null, updatedAt: change.at })
          )
      })
    })
  ).pipe(Layer.provide(ProjectTables.layer))

  static readonly sql = Layer.effect(
    ProjectsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return ProjectsRepo.of({
        insert: insertRow(sql, "projects", ProjectRow),
        findById: flow(
          SqlSchema.findOneOption({
            Request: ProjectKey,
            Result: ProjectRow,
            execute: ({ orgId, projectId }) => sql`select * from projects where id = ${projectId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        findBySlug: flow(
          SqlSchema.findOneOption({
            Request: ProjectSlugKey,
            Result: ProjectRow,
            execute: ({ orgId, slug }) => sql`select * from projects where org_id = ${orgId} and slug = ${slug}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: ProjectsPage,
            Result: ProjectRow,
            execute: ({ orgId, ...window }) =>
              keysetQuery(sql, sql`select * from projects`, [sql`org_id = ${orgId}`], window)
          }),
          Effect.orDie
        ),
        slugsStartingWith: flow(
          SqlSchema.findAll({
            Request: ProjectSlugFamily,
            Result: SlugRow,
            execute: ({ orgId, base }) => slugFamilyQuery(sql, "projects", [sql`org_id = ${orgId}`], base)
          }),
          slugsOf,
          Effect.orDie
        ),
        countActive: flow(
          SqlSchema.findOne({
            Request: OrgId,
            Result: CountRow,
            execute: (orgId) =>
              sql`select count(*)::text as count from projects where org_id = ${orgId} and status = 'active'`
          }),
          Effect.map((row) => row.count),
          Effect.orDie
        ),
        archive: flow(
          SqlSchema.findOneOption({
            Request: ProjectTransition,
            Result: ProjectRow,
            execute: ({ orgId, projectId, at }) =>
              sql`
                update projects set status = 'archived', archived_at = ${at}, updated_at = ${at}
                where id = ${projectId} and org_id = ${orgId} and status = 'active'
                returning *`
          }),
          Effect.orDie
        ),
        restore: flow(
          SqlSchema.findOneOption({
            Request: ProjectTransition,
            Result: ProjectRow,
            execute: ({ orgId, projectId, at }) =>
              sql`
                update projects set status = 'active', archived_at = null, updated_at = ${at}
                where id = ${projectId} and org_id = ${orgId} and status = 'archived'
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
