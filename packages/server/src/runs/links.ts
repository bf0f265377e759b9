/**
 * Command-line links (run-state.md §1): a canonical remote URL bound to a project, which is created (counting against
 * `limit.projects`) when the slug names none. Creating a link that is already active answers it as it is; resolve
 * lists the caller's visible active links for a URL across workspaces and marks them seen; unlink keeps the project.
 */
import {
  type Actor,
  type CiSettings,
  type CiSettingsInput,
  type CliLink,
  Conflict,
  defaultCiSettings,
  type LinkInput,
  NotFound,
  PreconditionFailed,
  type ProjectId,
  type ResolvedWorkspace,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import { type CliLinkRow, CliLinksRepo, type LinkKey, ProjectsRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option, Result } from "effect"
import { IntegrationsService } from "../integrations/service.ts"
import { AppConfig } from "../platform/config.ts"
import { eventActorOf, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { slugify } from "../platform/slugs.ts"
import { WorkspaceResolver } from "../platform/workspaceResolver.ts"
import { findProject } from "../projects/scope.ts"
import { ProjectsService } from "../projects/service.ts"
import { type CanonicalRemote, canonicalRemote } from "./remoteUrl.ts"

const linkNotFound = (linkId: string) => wireError(NotFound, "Link not found", { linkId })

/** The canonical remote, or the 422 on `remoteUrl`. */
export const requireCanonicalRemote = (input: string): Effect.Effect<CanonicalRemote, ValidationFailed> => {
  const canonical = canonicalRemote(input)
  if (canonical === "password") {
    return Effect.fail(validationFailed({ remoteUrl: ["must not carry a password"] }))
  }
  if (canonical === "form") {
    return Effect.fail(
      validationFailed({
        remoteUrl: ["must be https://host/owner/repo, ssh://git@host/owner/repo.git or git@host:owner/repo.git"]
      })
    )
  }
  return Effect.succeed(canonical)
}

const noIdentity = { providerRepoId: null, providerOwnerId: null, providerOwnerLogin: null }

const mergeSettings = (current: CiSettings, change: CiSettingsInput | undefined): CiSettings => ({
  oidcEnabled: change?.oidcEnabled ?? current.oidcEnabled,
  apiKeyEnabled: change?.apiKeyEnabled ?? current.apiKeyEnabled,
  allowedRefPattern: change?.allowedRefPattern ?? current.allowedRefPattern,
  allowedEnvironments: change?.allowedEnvironments ?? current.allowedEnvironments
})

export class CliLinksService extends Context.Service<CliLinksService, {
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: LinkInput
  ) => Effect.Effect<{ readonly link: CliLink }, Conflict | PreconditionFailed | ValidationFailed>
  readonly list: (workspace: ResolvedWorkspace) => Effect.Effect<{ readonly links: ReadonlyArray<CliLink> }>
  readonly listForProject: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId
  ) => Effect.Effect<{ readonly links: ReadonlyArray<CliLink> }, NotFound>
  readonly update: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    key: LinkKey,
    ciSettings: CiSettingsInput
  ) => Effect.Effect<{ readonly link: CliLink }, NotFound>
  readonly unlink: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    key: LinkKey
  ) => Effect.Effect<{ readonly link: CliLink }, NotFound>
  readonly resolve: (
    actor: Actor,
    remoteUrl: string
  ) => Effect.Effect<
    { readonly candidates: ReadonlyArray<CliLink>; readonly links: ReadonlyArray<CliLink> },
    ValidationFailed
  >
  /** Moves `lastSeenAt` of a link a workflow used (inside the caller's transaction). */
  readonly touch: (row: CliLinkRow) => Effect.Effect<void>
}>()("@cp/server/CliLinksService") {
  static readonly layer = Layer.effect(
    CliLinksService,
    Effect.gen(function*() {
      const links = yield* CliLinksRepo
      const projects = yield* ProjectsRepo
      const projectsService = yield* ProjectsService
      const workspaces = yield* WorkspaceResolver
      const tx = yield* Transactor
      const events = yield* EventLog
      const { scmhostWebHost } = yield* AppConfig
      const integrations = yield* IntegrationsService

      /**
       * The scmhost identity of the repository, from an active connection the workspace sees that reaches it; null
       * fields when none does or the provider cannot be asked (the link is made either way; decisions.md).
       */
      const providerIdentity = Effect.fnUntraced(function*(workspace: ResolvedWorkspace, remote: CanonicalRemote) {
        const found = yield* integrations.findRepository(workspace, remote.path).pipe(
          Effect.catch((unavailable) =>
            Effect.as(
              Effect.logWarning(
                "scmhost unavailable: the link is made without its provider identity",
                unavailable.error.details
              ),
              Option.none()
            )
          )
        )
        return Option.isSome(found)
          ? {
            providerRepoId: String(found.value.id),
            providerOwnerId: String(found.value.owner.id),
            providerOwnerLogin: found.value.owner.login
          }
          : noIdentity
      })

      const toLink = Effect.fnUntraced(function*(row: CliLinkRow, orgSlug: string) {
        const project = yield* projects.findById({ orgId: row.orgId, projectId: row.projectId })
        const link: CliLink = {
          ...row,
          orgSlug,
          projectSlug: Option.match(project, { onNone: () => "", onSome: (found) => found.slug })
        }
        return link
      })

      const recordLink = (actor: Actor, row: CliLinkRow, type: string) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "cli_link", id: row.id, name: row.remoteUrl },
          data: { linkId: row.id, projectId: row.projectId, remoteUrl: row.remoteUrl },
          projectId: row.projectId,
          description: `Command-line link ${row.remoteUrl} ${type.endsWith("deleted") ? "removed" : "changed"}`
        })

      const findLink = (key: LinkKey) => links.find(key).pipe(orFail(() => linkNotFound(key.linkId)))

      const touch = Effect.fnUntraced(function*(row: CliLinkRow) {
        yield* links.save({ ...row, lastSeenAt: yield* currentDate })
      })

      return CliLinksService.of({
        create: Effect.fn("CliLinks.create")(function*(actor, workspace, input) {
          const remote = yield* requireCanonicalRemote(input.remoteUrl)
          const orgId = workspace.organization.id
          const slug = input.projectSlug ?? slugify(remote.name, "project")
          const scmhost = remote.host === scmhostWebHost
          // The provider is asked outside the transaction.
          const identity = scmhost
            ? yield* providerIdentity(workspace, remote)
            : noIdentity
          const now = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const existing = yield* projects.findBySlug({ orgId, slug })
            const project = Option.isSome(existing)
              ? existing.value
              : (yield* projectsService.create(actor, workspace, { name: remote.name, slug })).project
            if (project.status !== "active") {
              return yield* wireError(Conflict, "The project is archived: restore it before linking", {
                projectId: project.id
              })
            }
            const [active] = yield* links.listActive({ orgId, projectId: project.id, remoteUrl: remote.url })
            if (active !== undefined) return { link: yield* toLink(active, workspace.organization.slug) }
            const row: CliLinkRow = {
              id: mint.cliLink(now.getTime()),
              orgId,
              projectId: project.id,
              remoteUrl: remote.url,
              provider: scmhost ? "scmhost" : "git",
              ...identity,
              ciSettings: mergeSettings(defaultCiSettings, input.ciSettings),
              createdBy: { id: eventActorOf(actor).actorId, kind: eventActorOf(actor).actorType },
              createdAt: now,
              lastSeenAt: null,
              deletedAt: null
            }
            const inserted = yield* Effect.result(links.insert(row))
            if (Result.isFailure(inserted)) {
              return yield* wireError(Conflict, "The link was created concurrently; retry", { remoteUrl: remote.url })
            }
            yield* recordLink(actor, row, "cli_link.created")
            return { link: yield* toLink(row, workspace.organization.slug) }
          }))
        }),

        list: Effect.fn("CliLinks.list")(function*(workspace) {
          const rows = yield* links.listActive({ orgId: workspace.organization.id })
          return { links: yield* Effect.forEach(rows, (row) => toLink(row, workspace.organization.slug)) }
        }),

        listForProject: Effect.fn("CliLinks.listForProject")(function*(workspace, projectId) {
          const orgId = workspace.organization.id
          yield* findProject(projects, orgId, projectId)
          const rows = yield* links.listActive({ orgId, projectId })
          return { links: yield* Effect.forEach(rows, (row) => toLink(row, workspace.organization.slug)) }
        }),

        update: Effect.fn("CliLinks.update")(function*(actor, workspace, key, ciSettings) {
          return yield* tx.withTransaction(Effect.gen(function*() {
            const row = yield* findLink(key)
            if (row.deletedAt !== null) return yield* linkNotFound(key.linkId)
            const next = { ...row, ciSettings: mergeSettings(row.ciSettings, ciSettings) }
            yield* links.save(next)
            yield* recordLink(actor, next, "cli_link.updated")
            return { link: yield* toLink(next, workspace.organization.slug) }
          }))
        }),

        unlink: Effect.fn("CliLinks.unlink")(function*(actor, workspace, key) {
          const now = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const row = yield* findLink(key)
            if (row.deletedAt !== null) return { link: yield* toLink(row, workspace.organization.slug) }
            const next = { ...row, deletedAt: now }
            yield* links.save(next)
            yield* recordLink(actor, next, "cli_link.deleted")
            return { link: yield* toLink(next, workspace.organization.slug) }
          }))
        }),

        resolve: Effect.fn("CliLinks.resolve")(function*(actor, remoteUrl) {
          const remote = yield* requireCanonicalRemote(remoteUrl)
          const found = yield* links.listByUrl(remote.url)
          const visible: Array<CliLink> = []
          for (const row of found) {
            const workspace = yield* workspaces.resolve(row.orgId, actor)
            if (Option.isNone(workspace)) continue
            yield* touch(row)
            visible.push(yield* toLink({ ...row, lastSeenAt: yield* currentDate }, workspace.value.organization.slug))
          }
          return { candidates: visible, links: visible }
        }),

        touch
      })
    })
  )
}
