/**
 * Projects and their environments. Neither is ever deleted: archiving sets `status` and `archivedAt`. The idle sweep
 * claims environments with `for update skip locked`, so replicas sweeping together never archive one twice.
 */
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { idPosition, isSlugOfFamily, keyAfter, slugOfFamily, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { EnvironmentRow, type ProjectPageWindow, ProjectRow } from "./rows.ts"

/** The constraint behind the `UniqueViolation` of a project slug already taken in the workspace. */
export const projectsSlugConstraint = "projects_org_slug_key"
/** The constraint behind the `UniqueViolation` of an environment slug already taken in the project. */
export const environmentsSlugConstraint = "environments_project_slug_key"

/** The in-memory tables of the projects area, shared by both memory repositories. */
export class ProjectTables extends Context.Service<ProjectTables, {
  readonly projects: Map<ProjectId, ProjectRow>
  readonly environments: Map<EnvironmentId, EnvironmentRow>
}>()("@cp/persistence/projects/ProjectTables") {
  static readonly layer = Layer.sync(
    ProjectTables,
    () => ProjectTables.of({ projects: new Map(), environments: new Map() })
  )
}

const projectUniques: ReadonlyArray<UniqueKey<ProjectRow>> = [
  primaryKey("projects_pkey"),
  { constraint: projectsSlugConstraint, key: (row) => `${row.orgId} ${row.slug}` }
]
const environmentUniques: ReadonlyArray<UniqueKey<EnvironmentRow>> = [
  primaryKey("environments_pkey"),
  { constraint: environmentsSlugConstraint, key: (row) => `${row.projectId} ${row.slug}` }
]

/** When an environment was last used for the idle sweep: its last push, or its creation when never used. */
export const idleSince = (row: EnvironmentRow): Date => row.lastActiveAt ?? row.createdAt

const AfterSchema = Schema.optionalKey(Schema.UndefinedOr(Schema.Struct({ at: Schema.Date, key: Schema.String })))
const ProjectKey = Schema.Struct({ orgId: OrgId, projectId: ProjectId })
const ProjectPage = Schema.Struct({ orgId: OrgId, limit: Schema.Int, after: AfterSchema })
const SlugFamily = Schema.Struct({ scope: Schema.String, base: Schema.String })
const SlugResult = Schema.Struct({ slug: Schema.String })
const CountResult = Schema.Struct({ count: Schema.NumberFromString })
const StatusChange = Schema.Struct({ orgId: OrgId, projectId: ProjectId, at: Schema.Date })
const EnvironmentKey = Schema.Struct({ orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId })
const EnvironmentChange = Schema.Struct({
  orgId: OrgId,
  projectId: ProjectId,
  environmentId: EnvironmentId,
  at: Schema.Date
})
const EnvironmentPage = Schema.Struct({ orgId: OrgId, projectId: ProjectId, limit: Schema.Int, after: AfterSchema })
const IdleClaim = Schema.Struct({ cutoff: Schema.Date, now: Schema.Date, limit: Schema.Int })

export class ProjectsRepo extends Context.Service<ProjectsRepo, {
  /** `UniqueViolation` on `projects_org_slug_key` when the workspace already has a project with that slug. */
  readonly insert: (project: ProjectRow) => Effect.Effect<void, UniqueViolation>
  /** The project with this id in this workspace, active or archived (a project of another workspace is None). */
  readonly findById: (orgId: OrgId, projectId: ProjectId) => Effect.Effect<Option.Option<ProjectRow>>
  /** Up to `limit` of the workspace's projects (active and archived) strictly after `after`, newest first. */
  readonly list: (orgId: OrgId, window: ProjectPageWindow) => Effect.Effect<ReadonlyArray<ProjectRow>>
  /** The workspace's taken slugs among `base` and `base-<n>`. */
  readonly slugsStartingWith: (orgId: OrgId, base: string) => Effect.Effect<ReadonlyArray<string>>
  /** How many active projects the workspace has (what `limit.projects` bounds). */
  readonly countActive: (orgId: OrgId) => Effect.Effect<number>
  /**
   * Serializes the workspace's limit checks until the surrounding transaction ends (SQL: a row lock on the
   * workspace), so two replicas cannot both create the last project the plan allows.
   */
  readonly lockWorkspace: (orgId: OrgId) => Effect.Effect<void>
  /** Archives the project if active; the archived row, or None when it is not active (or not there). */
  readonly archive: (orgId: OrgId, projectId: ProjectId, at: Date) => Effect.Effect<Option.Option<ProjectRow>>
  /** Restores the project if archived; the active row, or None when it is not archived (or not there). */
  readonly restore: (orgId: OrgId, projectId: ProjectId, at: Date) => Effect.Effect<Option.Option<ProjectRow>>
}>()("@cp/persistence/projects/ProjectsRepo") {
  static readonly memory = Layer.effect(
    ProjectsRepo,
    Effect.gen(function*() {
      const { projects } = yield* ProjectTables
      const projectIn = (orgId: OrgId, projectId: ProjectId) =>
        Option.filter(Option.fromUndefinedOr(projects.get(projectId)), (row) => row.orgId === orgId)
      const transition = (
        orgId: OrgId,
        projectId: ProjectId,
        from: ProjectRow["status"],
        change: (row: ProjectRow) => ProjectRow
      ) =>
        atomically((changes) => {
          const current = Option.filter(projectIn(orgId, projectId), (row) => row.status === from)
          if (Option.isNone(current)) return Effect.succeed(Option.none<ProjectRow>())
          const next = change(current.value)
          changes.set(projects, projectId, next)
          return Effect.succeed(Option.some(next))
        })
      return ProjectsRepo.of({
        insert: Effect.fn("ProjectsRepo.insert")((row: ProjectRow) =>
          insertUnique(projects, row.id, row, projectUniques)
        ),
        findById: Effect.fn("ProjectsRepo.findById")(function*(orgId: OrgId, projectId: ProjectId) {
          return projectIn(orgId, projectId)
        }),
        list: Effect.fn("ProjectsRepo.list")(function*(orgId: OrgId, window: ProjectPageWindow) {
          return windowOf(Array.from(projects.values()).filter((row) => row.orgId === orgId), idPosition, window)
        }),
        slugsStartingWith: Effect.fn("ProjectsRepo.slugsStartingWith")(function*(orgId: OrgId, base: string) {
          return Array.from(projects.values()).filter((row) => row.orgId === orgId && isSlugOfFamily(base)(row.slug))
            .map((row) => row.slug)
        }),
        countActive: Effect.fn("ProjectsRepo.countActive")(function*(orgId: OrgId) {
          return Array.from(projects.values()).filter((row) => row.orgId === orgId && row.status === "active").length
        }),
        lockWorkspace: Effect.fn("ProjectsRepo.lockWorkspace")(function*(_orgId: OrgId) {}),
        archive: Effect.fn("ProjectsRepo.archive")((orgId: OrgId, projectId: ProjectId, at: Date) =>
          transition(
            orgId,
            projectId,
            "active",
            (row) => ({ ...row, status: "archived", archivedAt: at, updatedAt: at })
          )
        ),
        restore: Effect.fn("ProjectsRepo.restore")((orgId: OrgId, projectId: ProjectId, at: Date) =>
          transition(
            orgId,
            projectId,
            "archived",
            (row) => ({ ...row, status: "active", archivedAt: null, updatedAt: at })
          )
        )
      })
    })
  ).pipe(Layer.provide(ProjectTables.layer))

  static readonly sql = Layer.effect(
    ProjectsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: ProjectRow,
        execute: (row) => sql`insert into projects ${sql.insert(row)}`
      })
      const findById = SqlSchema.findOneOption({
        Request: ProjectKey,
        Result: ProjectRow,
        execute: ({ orgId, projectId }) => sql`select * from projects where id = ${projectId} and org_id = ${orgId}`
      })
      const list = SqlSchema.findAll({
        Request: ProjectPage,
        Result: ProjectRow,
        execute: ({ orgId, limit, after }) =>
          sql`
            select * from projects
            where ${
            sql.and([
              sql`org_id = ${orgId}`,
              ...keyAfter(sql, after)
            ])
          }
            order by created_at desc, id desc
            limit ${limit}`
      })
      const slugFamily = SqlSchema.findAll({
        Request: SlugFamily,
        Result: SlugResult,
        execute: ({ scope, base }) =>
          sql`
            select slug from projects where org_id = ${scope} and ${slugOfFamily(sql, base)}`
      })
      const countActive = SqlSchema.findOne({
        Request: OrgId,
        Result: CountResult,
        execute: (orgId) =>
          sql`select count(*)::text as count from projects where org_id = ${orgId} and status = 'active'`
      })
      const archive = SqlSchema.findOneOption({
        Request: StatusChange,
        Result: ProjectRow,
        execute: ({ orgId, projectId, at }) =>
          sql`
            update projects set status = 'archived', archived_at = ${at}, updated_at = ${at}
            where id = ${projectId} and org_id = ${orgId} and status = 'active'
            returning *`
      })
      const restore = SqlSchema.findOneOption({
        Request: StatusChange,
        Result: ProjectRow,
        execute: ({ orgId, projectId, at }) =>
          sql`
            update projects set status = 'active', archived_at = null, updated_at = ${at}
            where id = ${projectId} and org_id = ${orgId} and status = 'archived'
            returning *`
      })
      return ProjectsRepo.of({
        insert: Effect.fn("ProjectsRepo.insert")((row: ProjectRow) => uniqueViolationOrDie(insert(row))),
        findById: Effect.fn("ProjectsRepo.findById")((orgId: OrgId, projectId: ProjectId) =>
          Effect.orDie(findById({ orgId, projectId }))
        ),
        list: Effect.fn("ProjectsRepo.list")((orgId: OrgId, window: ProjectPageWindow) =>
          Effect.orDie(list({ orgId, limit: window.limit, after: window.after }))
        ),
        slugsStartingWith: Effect.fn("ProjectsRepo.slugsStartingWith")((orgId: OrgId, base: string) =>
          slugFamily({ scope: orgId, base }).pipe(Effect.map((rows) => rows.map((row) => row.slug)), Effect.orDie)
        ),
        countActive: Effect.fn("ProjectsRepo.countActive")((orgId: OrgId) =>
          countActive(orgId).pipe(Effect.map((row) => row.count), Effect.orDie)
        ),
        // `for no key update` blocks the same lock from another transaction, not readers or foreign-key checks.
        lockWorkspace: Effect.fn("ProjectsRepo.lockWorkspace")((orgId: OrgId) =>
          Effect.orDie(sql`select id from organizations where id = ${orgId} for no key update`.pipe(Effect.asVoid))
        ),
        archive: Effect.fn("ProjectsRepo.archive")((orgId: OrgId, projectId: ProjectId, at: Date) =>
          Effect.orDie(archive({ orgId, projectId, at }))
        ),
        restore: Effect.fn("ProjectsRepo.restore")((orgId: OrgId, projectId: ProjectId, at: Date) =>
          Effect.orDie(restore({ orgId, projectId, at }))
        )
      })
    })
  )
}

export class EnvironmentsRepo extends Context.Service<EnvironmentsRepo, {
  /** `UniqueViolation` on `environments_project_slug_key` when the project already has an environment with that slug. */
  readonly insert: (environment: EnvironmentRow) => Effect.Effect<void, UniqueViolation>
  /** The environment with this id in this project of this workspace, active or archived; None otherwise. */
  readonly findEnvironment: (
    orgId: OrgId,
    projectId: ProjectId,
    environmentId: EnvironmentId
  ) => Effect.Effect<Option.Option<EnvironmentRow>>
  /** Up to `limit` of the project's environments strictly after `after`, newest first. */
  readonly list: (
    orgId: OrgId,
    projectId: ProjectId,
    window: ProjectPageWindow
  ) => Effect.Effect<ReadonlyArray<EnvironmentRow>>
  /** The project's taken slugs among `base` and `base-<n>`. */
  readonly slugsStartingWith: (projectId: ProjectId, base: string) => Effect.Effect<ReadonlyArray<string>>
  /** Archives the environment if active; the archived row, or None when it is not active (or not there). */
  readonly archive: (
    orgId: OrgId,
    projectId: ProjectId,
    environmentId: EnvironmentId,
    at: Date
  ) => Effect.Effect<Option.Option<EnvironmentRow>>
  /** Records a push referencing the environment (run, plan, catalog push); None when it is not there. */
  readonly markActive: (
    orgId: OrgId,
    projectId: ProjectId,
    environmentId: EnvironmentId,
    at: Date
  ) => Effect.Effect<Option.Option<EnvironmentRow>>
  /**
   * Archives up to `limit` active environments idle since before `cutoff` and returns them. SQL claims them with
   * `for update skip locked`: rows another transaction holds are skipped, so concurrent sweeps never share one.
   */
  readonly archiveIdle: (cutoff: Date, now: Date, limit: number) => Effect.Effect<ReadonlyArray<EnvironmentRow>>
}>()("@cp/persistence/projects/EnvironmentsRepo") {
  static readonly memory = Layer.effect(
    EnvironmentsRepo,
    Effect.gen(function*() {
      const { environments } = yield* ProjectTables
      const environmentIn = (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId) =>
        Option.filter(
          Option.fromUndefinedOr(environments.get(environmentId)),
          (row) => row.orgId === orgId && row.projectId === projectId
        )
      const change = (
        orgId: OrgId,
        projectId: ProjectId,
        environmentId: EnvironmentId,
        next: (row: EnvironmentRow) => Option.Option<EnvironmentRow>
      ) =>
        atomically((changes) => {
          const current = Option.flatMap(environmentIn(orgId, projectId, environmentId), next)
          if (Option.isSome(current)) changes.set(environments, environmentId, current.value)
          return Effect.succeed(current)
        })
      return EnvironmentsRepo.of({
        insert: Effect.fn("EnvironmentsRepo.insert")((row: EnvironmentRow) =>
          insertUnique(environments, row.id, row, environmentUniques)
        ),
        findEnvironment: Effect.fn("EnvironmentsRepo.findEnvironment")(
          function*(orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId) {
            return environmentIn(orgId, projectId, environmentId)
          }
        ),
        list: Effect.fn("EnvironmentsRepo.list")(
          function*(orgId: OrgId, projectId: ProjectId, window: ProjectPageWindow) {
            const rows = Array.from(environments.values()).filter((row) =>
              row.orgId === orgId && row.projectId === projectId
            )
            return windowOf(rows, idPosition, window)
          }
        ),
        slugsStartingWith: Effect.fn("EnvironmentsRepo.slugsStartingWith")(
          function*(projectId: ProjectId, base: string) {
            return Array.from(environments.values())
              .filter((row) => row.projectId === projectId && isSlugOfFamily(base)(row.slug))
              .map((row) => row.slug)
          }
        ),
        archive: Effect.fn("EnvironmentsRepo.archive")(
          (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId, at: Date) =>
            change(orgId, projectId, environmentId, (row) =>
              row.status === "active"
                ? Option.some({ ...row, status: "archived", archivedAt: at, updatedAt: at })
                : Option.none())
        ),
        markActive: Effect.fn("EnvironmentsRepo.markActive")(
          (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId, at: Date) =>
            change(orgId, projectId, environmentId, (row) => Option.some({ ...row, lastActiveAt: at }))
        ),
        archiveIdle: Effect.fn("EnvironmentsRepo.archiveIdle")((cutoff: Date, now: Date, limit: number) =>
          atomically((changes) => {
            const claimed = Array.from(environments.values())
              .filter((row) => row.status === "active" && idleSince(row) < cutoff)
              .sort((a, b) => idleSince(a).getTime() - idleSince(b).getTime() || (a.id < b.id ? -1 : 1))
              .slice(0, limit)
              .map((row): EnvironmentRow => ({ ...row, status: "archived", archivedAt: now, updatedAt: now }))
            for (const row of claimed) changes.set(environments, row.id, row)
            return Effect.succeed(claimed)
          })
        )
      })
    })
  ).pipe(Layer.provide(ProjectTables.layer))

  static readonly sql = Layer.effect(
    EnvironmentsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: EnvironmentRow,
        execute: (row) => sql`insert into environments ${sql.insert(row)}`
      })
      const find = SqlSchema.findOneOption({
        Request: EnvironmentKey,
        Result: EnvironmentRow,
        execute: ({ orgId, projectId, environmentId }) =>
          sql`
            select * from environments
            where id = ${environmentId} and project_id = ${projectId} and org_id = ${orgId}`
      })
      const list = SqlSchema.findAll({
        Request: EnvironmentPage,
        Result: EnvironmentRow,
        execute: ({ orgId, projectId, limit, after }) =>
          sql`
            select * from environments
            where ${
            sql.and([
              sql`project_id = ${projectId}`,
              sql`org_id = ${orgId}`,
              ...keyAfter(sql, after)
            ])
          }
            order by created_at desc, id desc
            limit ${limit}`
      })
      const slugFamily = SqlSchema.findAll({
        Request: SlugFamily,
        Result: SlugResult,
        execute: ({ scope, base }) =>
          sql`
            select slug from environments where project_id = ${scope} and ${slugOfFamily(sql, base)}`
      })
      const archive = SqlSchema.findOneOption({
        Request: EnvironmentChange,
        Result: EnvironmentRow,
        execute: ({ orgId, projectId, environmentId, at }) =>
          sql`
            update environments set status = 'archived', archived_at = ${at}, updated_at = ${at}
            where id = ${environmentId} and project_id = ${projectId} and org_id = ${orgId} and status = 'active'
            returning *`
      })
      const markActive = SqlSchema.findOneOption({
        Request: EnvironmentChange,
        Result: EnvironmentRow,
        execute: ({ orgId, projectId, environmentId, at }) =>
          sql`
            update environments set last_active_at = greatest(last_active_at, ${at})
            where id = ${environmentId} and project_id = ${projectId} and org_id = ${orgId}
            returning *`
      })
      const archiveIdle = SqlSchema.findAll({
        Request: IdleClaim,
        Result: EnvironmentRow,
        execute: ({ cutoff, now, limit }) =>
          sql`
            update environments set status = 'archived', archived_at = ${now}, updated_at = ${now}
            where id in (
              select id from environments
              where status = 'active' and coalesce(last_active_at, created_at) < ${cutoff}
              order by coalesce(last_active_at, created_at), id
              limit ${limit}
              for update skip locked)
            and status = 'active'
            returning *`
      })
      return EnvironmentsRepo.of({
        insert: Effect.fn("EnvironmentsRepo.insert")((row: EnvironmentRow) => uniqueViolationOrDie(insert(row))),
        findEnvironment: Effect.fn("EnvironmentsRepo.findEnvironment")(
          (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId) =>
            Effect.orDie(find({ orgId, projectId, environmentId }))
        ),
        list: Effect.fn("EnvironmentsRepo.list")((orgId: OrgId, projectId: ProjectId, window: ProjectPageWindow) =>
          Effect.orDie(list({ orgId, projectId, limit: window.limit, after: window.after }))
        ),
        slugsStartingWith: Effect.fn("EnvironmentsRepo.slugsStartingWith")((projectId: ProjectId, base: string) =>
          slugFamily({ scope: projectId, base }).pipe(Effect.map((rows) => rows.map((row) => row.slug)), Effect.orDie)
        ),
        archive: Effect.fn("EnvironmentsRepo.archive")(
          (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId, at: Date) =>
            Effect.orDie(archive({ orgId, projectId, environmentId, at }))
        ),
        markActive: Effect.fn("EnvironmentsRepo.markActive")(
          (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId, at: Date) =>
            Effect.orDie(markActive({ orgId, projectId, environmentId, at }))
        ),
        archiveIdle: Effect.fn("EnvironmentsRepo.archiveIdle")((cutoff: Date, now: Date, limit: number) =>
          Effect.orDie(archiveIdle({ cutoff, now, limit }))
        )
      })
    })
  )
}
