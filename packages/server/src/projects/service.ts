/**
 * Projects and environments: create, read, archive (never delete), restore. Project create and restore count
 * against `limit.projects` (active projects), read through `Entitlements`; the check and the write share a
 * transaction that first locks the workspace row, so replicas cannot both take the last slot.
 */
import {
  type Actor,
  Conflict,
  Environment,
  type EnvironmentId,
  NotFound,
  type OrgId,
  type Paged,
  PreconditionFailed,
  Project,
  type ProjectId,
  type ResolvedWorkspace,
  type ValidationFailed,
  wireError
} from "@cp/domain"
import {
  type EnvironmentRow,
  EnvironmentsRepo,
  idPosition,
  type JsonObject,
  OrganizationsRepo,
  type ProjectRow,
  ProjectsRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { Entitlements } from "../platform/entitlements.ts"
import { apiJson, type EventActor, eventActorOf, EventLog, previousJson } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { insertWithSlug, slugify } from "../platform/slugs.ts"
import { findEnvironment as findEnvironmentIn, findProject as findProjectIn } from "./scope.ts"

const slugTaken = (where: string) => (slug: string) =>
  wireError(Conflict, `The slug '${slug}' is taken in this ${where}`, { field: "slug" })

export const PROJECTS_LIMIT = "limit.projects"

interface NameInput {
  readonly name: string
  readonly slug?: string
}

export class ProjectsService extends Context.Service<ProjectsService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly projects: ReadonlyArray<Project> }>, ValidationFailed>
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: NameInput
  ) => Effect.Effect<{ readonly project: Project }, Conflict | PreconditionFailed>
  readonly get: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId
  ) => Effect.Effect<{ readonly project: Project }, NotFound>
  readonly archive: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId
  ) => Effect.Effect<{ readonly project: Project }, NotFound>
  readonly restore: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId
  ) => Effect.Effect<{ readonly project: Project }, NotFound | PreconditionFailed>
  readonly listEnvironments: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly environments: ReadonlyArray<Environment> }>, NotFound | ValidationFailed>
  readonly createEnvironment: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    input: NameInput
  ) => Effect.Effect<{ readonly environment: Environment }, NotFound | Conflict>
  readonly getEnvironment: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    environmentId: EnvironmentId
  ) => Effect.Effect<{ readonly environment: Environment }, NotFound>
  readonly archiveEnvironment: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    environmentId: EnvironmentId
  ) => Effect.Effect<{ readonly environment: Environment }, NotFound>
}>()("@cp/server/ProjectsService") {
  static readonly layer = Layer.effect(
    ProjectsService,
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const organizations = yield* OrganizationsRepo
      const entitlements = yield* Entitlements
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors

      // Rows are stored as the API shows them (`ProjectRow` is a `Project`, `EnvironmentRow` an `Environment`).
      const findProject = (orgId: OrgId, projectId: ProjectId) => findProjectIn(projects, orgId, projectId)

      const findEnvironment = (orgId: OrgId, projectId: ProjectId, environmentId: EnvironmentId) =>
        findEnvironmentIn(environments, { orgId, projectId, environmentId })

      /** webhooks.md §1: the project as the API returns it; archive and restore add `previous`. */
      const recordProject = (
        actor: EventActor,
        row: ProjectRow,
        type: string,
        description: string,
        previous?: JsonObject
      ) =>
        events.record({
          orgId: row.orgId,
          type,
          actor,
          subject: { kind: "project", id: row.id, name: row.name },
          data: { project: apiJson(Project, row), ...(previous === undefined ? {} : { previous }) },
          projectId: row.id,
          description
        })

      /** At the ceiling of `limit.projects` (active projects) the operation is refused with 412. */
      const requireProjectSlot = Effect.fnUntraced(function*(orgId: OrgId, what: string) {
        yield* organizations.lockWorkspace(orgId)
        const limit = yield* entitlements.limitOf(orgId, PROJECTS_LIMIT)
        if (Option.isNone(limit)) return
        const active = yield* projects.countActive(orgId)
        if (active >= limit.value) {
          return yield* wireError(
            PreconditionFailed,
            `Cannot ${what}: the workspace has reached its limit of ${limit.value} active projects`,
            { entitlement: PROJECTS_LIMIT, limit: limit.value, current: active }
          )
        }
      })

      /** The caller's slug, or the first free `-N` of the name's (`fallback` when the name has none). */
      const slugChoice = (input: NameInput, fallback: string) => ({
        requested: input.slug,
        base: slugify(input.name.trim(), fallback)
      })

      return ProjectsService.of({
        list: Effect.fn("Projects.list")(function*(workspace, page) {
          const orgId = workspace.organization.id
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "projects.list", scope: orgId },
            page,
            (window) => projects.list({ orgId, ...window }),
            idPosition
          )
          return { data: { projects: items }, cursor }
        }),

        create: Effect.fn("Projects.create")(function*(actor, workspace, input) {
          const at = yield* currentDate
          const orgId = workspace.organization.id
          const base = {
            id: mint.project(at.getTime()),
            orgId,
            name: input.name.trim(),
            status: "active" as const,
            createdAt: at,
            updatedAt: at,
            archivedAt: null
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* requireProjectSlot(orgId, "create a project")
            const row = yield* insertWithSlug(tx, slugChoice(input, "project"), {
              namespace: `projects:${orgId}`,
              taken: (base) => projects.slugsStartingWith({ orgId, base }),
              withSlug: (slug): ProjectRow => ({ ...base, slug }),
              insert: projects.insert,
              slugTaken: slugTaken("workspace")
            })
            yield* recordProject(eventActorOf(actor), row, "project.created", `Project ${row.name} created`)
            return { project: row }
          }))
        }),

        get: Effect.fn("Projects.get")(function*(workspace, projectId) {
          return { project: yield* findProject(workspace.organization.id, projectId) }
        }),

        archive: Effect.fn("Projects.archive")(function*(actor, workspace, projectId) {
          const at = yield* currentDate
          const orgId = workspace.organization.id
          return yield* tx.withTransaction(Effect.gen(function*() {
            const archived = yield* projects.archive({ orgId, projectId, at })
            // Archiving an archived project is a no-op that answers the project as it is.
            if (Option.isNone(archived)) return { project: yield* findProject(orgId, projectId) }
            yield* recordProject(
              eventActorOf(actor),
              archived.value,
              "project.archived",
              `Project ${archived.value.name} archived`,
              // Only an active project is archived.
              { status: "active", archivedAt: null }
            )
            return { project: archived.value }
          }))
        }),

        restore: Effect.fn("Projects.restore")(function*(actor, workspace, projectId) {
          const at = yield* currentDate
          const orgId = workspace.organization.id
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* findProject(orgId, projectId)
            if (current.status === "active") return { project: current }
            yield* requireProjectSlot(orgId, "restore the project")
            const restored = yield* projects.restore({ orgId, projectId, at })
            if (Option.isNone(restored)) return { project: yield* findProject(orgId, projectId) }
            yield* recordProject(
              eventActorOf(actor),
              restored.value,
              "project.restored",
              `Project ${restored.value.name} restored`,
              previousJson(Project, current, restored.value)
            )
            return { project: restored.value }
          }))
        }),

        listEnvironments: Effect.fn("Projects.listEnvironments")(function*(workspace, projectId, page) {
          const orgId = workspace.organization.id
          yield* findProject(orgId, projectId)
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "environments.list", scope: `${orgId}/${projectId}` },
            page,
            (window) => environments.list({ orgId, projectId, ...window }),
            idPosition
          )
          return { data: { environments: items }, cursor }
        }),

        createEnvironment: Effect.fn("Projects.createEnvironment")(function*(actor, workspace, projectId, input) {
          const at = yield* currentDate
          const orgId = workspace.organization.id
          return yield* tx.withTransaction(Effect.gen(function*() {
            const project = yield* findProject(orgId, projectId)
            if (project.status !== "active") {
              return yield* wireError(Conflict, "The project is archived: restore it before adding environments", {
                projectId,
                status: project.status
              })
            }
            const base = {
              id: mint.environment(at.getTime()),
              orgId,
              projectId,
              name: input.name.trim(),
              status: "active" as const,
              createdAt: at,
              updatedAt: at,
              archivedAt: null,
              lastActiveAt: null
            }
            const row = yield* insertWithSlug(tx, slugChoice(input, "environment"), {
              namespace: `environments:${projectId}`,
              taken: (base) => environments.slugsStartingWith({ projectId, base }),
              withSlug: (slug): EnvironmentRow => ({ ...base, slug }),
              insert: environments.insert,
              slugTaken: slugTaken("project")
            })
            yield* events.record({
              orgId,
              type: "environment.created",
              actor: eventActorOf(actor),
              subject: { kind: "environment", id: row.id, name: row.name },
              data: { environment: apiJson(Environment, row) },
              projectId,
              environmentId: row.id,
              description: `Environment ${row.name} created in project ${project.name}`
            })
            return { environment: row }
          }))
        }),

        getEnvironment: Effect.fn("Projects.getEnvironment")(function*(workspace, projectId, environmentId) {
          return { environment: yield* findEnvironment(workspace.organization.id, projectId, environmentId) }
        }),

        archiveEnvironment: Effect.fn("Projects.archiveEnvironment")(
          function*(actor, workspace, projectId, environmentId) {
            const at = yield* currentDate
            const orgId = workspace.organization.id
            return yield* tx.withTransaction(Effect.gen(function*() {
              const archived = yield* environments.archive({ orgId, projectId, environmentId, at })
              if (Option.isNone(archived)) {
                return { environment: yield* findEnvironment(orgId, projectId, environmentId) }
              }
              yield* recordEnvironmentArchived(events, eventActorOf(actor), archived.value, "api")
              return { environment: archived.value }
            }))
          }
        )
      })
    })
  )
}

/** `environment.archived`, from a DELETE (`api`) or the idle sweep (`sweep`, actor system). */
export const recordEnvironmentArchived = (
  events: EventLog["Service"],
  actor: EventActor,
  row: EnvironmentRow,
  reason: "api" | "idle"
) =>
  events.record({
    orgId: row.orgId,
    type: "environment.archived",
    actor,
    subject: { kind: "environment", id: row.id, name: row.name },
    // Only an active environment is archived.
    data: { environment: apiJson(Environment, row), previous: { status: "active", archivedAt: null }, reason },
    projectId: row.projectId,
    environmentId: row.id,
    description: reason === "idle"
      ? `Environment ${row.name} archived after being idle past the retention window`
      : `Environment ${row.name} archived`
  })
