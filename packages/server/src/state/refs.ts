/**
 * Refs and the catalog head (run-state.md §5): every write names a stored object (404 `object_missing`, checked and
 * the object marked used inside the write's transaction, so a collection racing it keeps the object), and a lost
 * compare-and-swap is 409 `ref_conflict` with what is there now. A published `{ "entities": [...] }` document
 * replaces the project's rows of the workspace catalog read model.
 */
import {
  type Actor,
  CatalogDocument,
  type CatalogEntitiesQuery,
  type CatalogEntity,
  type CatalogHead,
  type CatalogHeadInput,
  type Digest,
  NotFound,
  NotImplemented,
  ObjectMissing,
  type OrgId,
  type Paged,
  ProjectId,
  type Ref,
  RefConflict,
  type RefInput,
  type RepoFacet,
  type StateTrigger,
  type ValidationFailed,
  wireError
} from "@cp/domain"
import { Ref as RefSchema } from "@cp/domain/refs"
import {
  auditPosition,
  type CatalogEntityRow,
  type CatalogHeadRow,
  CliLinksRepo,
  EventLogRepo,
  headPosition,
  ObjectsRepo,
  ProjectsRepo,
  type RefRow,
  RefsRepo,
  RunsRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { actorRefOf, apiJson, eventActorOf, EventLog } from "../platform/events.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"

/** A published object larger than this is not read for entities (it stays a valid head). */
const MAX_CATALOG_DOCUMENT_BYTES = 16 * 1024 * 1024

const decodeCatalog = Schema.decodeUnknownOption(Schema.fromJsonString(CatalogDocument))
const isProjectId = Schema.is(ProjectId)

export interface ProjectAddress {
  readonly orgId: OrgId
  readonly projectId: ProjectId
}

const toRef = (row: RefRow): Ref => ({
  name: row.name,
  digest: row.digest,
  version: row.version,
  updatedAt: row.updatedAt,
  updatedBy: row.updatedBy
})

const toHead = (row: CatalogHeadRow): CatalogHead => ({
  digest: row.digest,
  version: row.version,
  publishedAt: row.publishedAt,
  publishedBy: row.publishedBy
})

const refNotFound = (name: string) => wireError(NotFound, "Ref not found", { name })
const objectMissing = (digest: string) => wireError(ObjectMissing, "The object is not stored", { digest })

export class RefsService extends Context.Service<RefsService, {
  readonly list: (at: ProjectAddress, prefix: string) => Effect.Effect<ReadonlyArray<Ref>, NotFound>
  readonly get: (at: ProjectAddress, name: string) => Effect.Effect<Ref, NotFound>
  readonly set: (
    actor: Actor,
    at: ProjectAddress,
    name: string,
    input: RefInput
  ) => Effect.Effect<Ref, NotFound | ObjectMissing | RefConflict>
  readonly remove: (
    actor: Actor,
    at: ProjectAddress,
    name: string,
    expectedVersion: number | undefined
  ) => Effect.Effect<void, NotFound | RefConflict>
  readonly publish: (
    actor: Actor,
    at: ProjectAddress,
    input: CatalogHeadInput
  ) => Effect.Effect<CatalogHead, NotFound | ObjectMissing | RefConflict>
  readonly head: (at: ProjectAddress) => Effect.Effect<CatalogHead, NotFound>
  readonly history: (
    at: ProjectAddress,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly heads: ReadonlyArray<CatalogHead> }>, NotFound | ValidationFailed>
  readonly entities: (
    orgId: OrgId,
    query: CatalogEntitiesQuery
  ) => Effect.Effect<ReadonlyArray<CatalogEntity>, NotFound>
  /** The `scm.*` events of the workspace log attributed to the project, newest first. */
  readonly triggers: (
    at: ProjectAddress,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly triggers: ReadonlyArray<StateTrigger> }>, NotFound | ValidationFailed>
  /** Repo facets: every project with an active link (or the one named), by project slug. */
  readonly repoFacets: (orgId: OrgId, projectId?: ProjectId) => Effect.Effect<ReadonlyArray<RepoFacet>, NotFound>
  /** The project-scoped entity route: 404 for a project not in the workspace, else 501 as the spec says. */
  readonly projectEntities: (orgId: OrgId, projectId: ProjectId) => Effect.Effect<never, NotFound | NotImplemented>
}>()("@cp/server/RefsService") {
  static readonly layer = Layer.effect(
    RefsService,
    Effect.gen(function*() {
      const refs = yield* RefsRepo
      const objects = yield* ObjectsRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors
      const eventLog = yield* EventLogRepo
      const cliLinks = yield* CliLinksRepo
      const runs = yield* RunsRepo

      /** Fails with 404 `object_missing` unless the project stores `digest`; marks it used at `now`. */
      const requireObject = (projectId: ProjectId, digest: Digest, now: Date) =>
        Effect.flatMap(
          objects.use({ projectId, digest, at: now }),
          (stored) => stored ? Effect.void : Effect.fail(objectMissing(digest))
        )

      /** The 409 of a lost ref swap: the ref's version and digest now (0 and null when it does not exist). */
      const refConflict = (projectId: ProjectId, name: string) =>
        Effect.flatMap(
          refs.find(projectId, name),
          (current) =>
            Effect.fail(wireError(RefConflict, "The ref changed since the expected version", {
              currentVersion: Option.match(current, { onNone: () => 0, onSome: (row) => row.version }),
              currentDigest: Option.match(current, { onNone: () => null, onSome: (row) => row.digest })
            }))
        )

      /** The object's bytes, when it is stored and small enough to read as a catalog document. */
      const documentBytes = Effect.fnUntraced(function*(projectId: ProjectId, digest: Digest) {
        const found = yield* objects.find({ projectId, digest })
        if (Option.isNone(found) || found.value.size > MAX_CATALOG_DOCUMENT_BYTES) return Option.none<Buffer>()
        const parts: Array<Uint8Array> = []
        for (const blob of found.value.blobs) {
          parts.push(...yield* objects.readChunks({ blobId: blob.id, fromSeq: 0, count: Number.MAX_SAFE_INTEGER }))
        }
        return Option.some(Buffer.concat(parts))
      })

      /** The entities of a catalog document, or None when the object is not one (the rows then stay as they were). */
      const entitiesOf = (at: ProjectAddress, bytes: Buffer): Option.Option<ReadonlyArray<CatalogEntityRow>> =>
        Option.map(
          decodeCatalog(bytes.toString("utf8")),
          (document) =>
            document.entities.map((entity, position): CatalogEntityRow => ({
              orgId: at.orgId,
              projectId: at.projectId,
              position,
              kind: entity.kind,
              name: entity.name,
              owner: entity.owner ?? null,
              environment: entity.environment ?? null,
              description: entity.description ?? null,
              metadata: entity.metadata ?? {}
            }))
        )

      return RefsService.of({
        list: Effect.fn("Refs.list")(function*(at, prefix) {
          yield* findProject(projects, at.orgId, at.projectId)
          return (yield* refs.list(at.projectId, prefix)).map(toRef)
        }),
        get: Effect.fn("Refs.get")(function*(at, name) {
          yield* findProject(projects, at.orgId, at.projectId)
          const row = yield* refs.find(at.projectId, name)
          return Option.isNone(row) ? yield* refNotFound(name) : toRef(row.value)
        }),
        set: Effect.fn("Refs.set")(function*(actor, at, name, input) {
          yield* findProject(projects, at.orgId, at.projectId)
          const now = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* requireObject(at.projectId, input.digest, now)
            const written = yield* refs.write({
              row: {
                orgId: at.orgId,
                projectId: at.projectId,
                name,
                digest: input.digest,
                version: 0,
                updatedAt: now,
                updatedBy: actorRefOf(actor)
              },
              expectedVersion: input.expectedVersion
            })
            if (Option.isNone(written)) return yield* refConflict(at.projectId, name)
            const ref = toRef(written.value)
            yield* events.record({
              orgId: at.orgId,
              type: "state.ref.updated",
              actor: eventActorOf(actor),
              subject: { kind: "ref", id: name, name },
              data: { ref: apiJson(RefSchema, ref) },
              projectId: at.projectId,
              description: `Ref ${name} set to ${input.digest} (version ${ref.version})`
            })
            return ref
          }))
        }),
        remove: Effect.fn("Refs.remove")(function*(actor, at, name, expectedVersion) {
          yield* findProject(projects, at.orgId, at.projectId)
          yield* tx.withTransaction(Effect.gen(function*() {
            const deleted = yield* refs.delete(at.projectId, name, expectedVersion)
            if (Option.isNone(deleted)) {
              if (expectedVersion === undefined) return yield* refNotFound(name)
              return yield* refConflict(at.projectId, name)
            }
            yield* events.record({
              orgId: at.orgId,
              type: "state.ref.deleted",
              actor: eventActorOf(actor),
              subject: { kind: "ref", id: name, name },
              data: { ref: apiJson(RefSchema, toRef(deleted.value)) },
              projectId: at.projectId,
              description: `Ref ${name} deleted`
            })
          }))
        }),
        publish: Effect.fn("Catalog.publish")(function*(actor, at, input) {
          yield* findProject(projects, at.orgId, at.projectId)
          const now = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* requireObject(at.projectId, input.digest, now)
            const published = yield* refs.publish({
              orgId: at.orgId,
              projectId: at.projectId,
              digest: input.digest,
              version: 0,
              publishedAt: now,
              publishedBy: actorRefOf(actor)
            }, input.expectedDigest)
            if (Option.isNone(published)) {
              const current = yield* refs.head(at.projectId)
              return yield* wireError(RefConflict, "The catalog head is not at the expected digest", {
                currentVersion: Option.match(current, { onNone: () => 0, onSome: (row) => row.version }),
                currentDigest: Option.match(current, { onNone: () => null, onSome: (row) => row.digest })
              })
            }
            const entities = Option.flatMap(
              yield* documentBytes(at.projectId, input.digest),
              (bytes) => entitiesOf(at, bytes)
            )
            if (Option.isSome(entities)) yield* refs.replaceEntities(at, entities.value)
            const head = toHead(published.value)
            yield* events.record({
              orgId: at.orgId,
              type: "catalog.head.published",
              actor: eventActorOf(actor),
              subject: { kind: "catalog_head", id: at.projectId, name: null },
              data: {
                head: { digest: head.digest, version: head.version, publishedAt: head.publishedAt.toISOString() },
                entityCount: Option.match(entities, { onNone: () => null, onSome: (rows) => rows.length })
              },
              projectId: at.projectId,
              description: `Catalog head published at ${head.digest} (version ${head.version})`
            })
            return head
          }))
        }),
        head: Effect.fn("Catalog.head")(function*(at) {
          yield* findProject(projects, at.orgId, at.projectId)
          const row = yield* refs.head(at.projectId)
          return Option.isNone(row)
            ? yield* wireError(NotFound, "The catalog has not been published", { projectId: at.projectId })
            : toHead(row.value)
        }),
        history: Effect.fn("Catalog.history")(function*(at, page) {
          yield* findProject(projects, at.orgId, at.projectId)
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "refs.history", scope: `${at.orgId}/${at.projectId}`, filters: {} },
            page,
            (window) => refs.history(at.projectId, window),
            headPosition
          )
          return { data: { heads: items.map(toHead) }, cursor }
        }),
        triggers: Effect.fn("Triggers.list")(function*(at, page) {
          yield* findProject(projects, at.orgId, at.projectId)
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "triggers.list", scope: `${at.orgId}/${at.projectId}`, filters: {} },
            page,
            (window) => eventLog.listProjectEvents({ ...at, typePrefix: "scm.", ...window }),
            auditPosition
          )
          const text = (value: unknown) => typeof value === "string" ? value : null
          return {
            data: {
              triggers: items.map((event): StateTrigger => ({
                id: event.id,
                eventType: event.type,
                occurredAt: event.occurredAt,
                repoFullName: text(event.data["repoFullName"]),
                ref: text(event.data["ref"]),
                sha: text(event.data["sha"]),
                data: event.data
              }))
            },
            cursor
          }
        }),
        repoFacets: Effect.fn("RepoFacets.list")(function*(orgId, only) {
          if (only !== undefined) yield* findProject(projects, orgId, only)
          const links = yield* cliLinks.listActive({ orgId, ...(only === undefined ? {} : { projectId: only }) })
          const projectIds = only === undefined ? [...new Set(links.map((link) => link.projectId))] : [only]
          const facets = yield* Effect.forEach(projectIds, (projectId) =>
            Effect.gen(function*() {
              const project = yield* findProject(projects, orgId, projectId)
              const link = links.find((candidate) => candidate.projectId === projectId)
              const [lastRun] = yield* runs.list({ orgId, projectId, limit: 1 })
              const head = yield* refs.head(projectId)
              const entities = yield* refs.entities({ orgId, projectId })
              const facet: RepoFacet = {
                projectId,
                projectSlug: project.slug,
                repoFullName: link === undefined ? null : new URL(link.remoteUrl).pathname.slice(1),
                defaultBranch: null,
                lastRunAt: lastRun?.createdAt ?? null,
                lastRunStatus: lastRun?.status ?? null,
                catalogHead: Option.match(head, { onNone: () => null, onSome: (row) => row.digest }),
                entityCount: entities.length
              }
              return facet
            }))
          return facets.sort((a, b) => (a.projectSlug < b.projectSlug ? -1 : 1))
        }),
        projectEntities: (orgId, projectId) =>
          Effect.andThen(
            findProject(projects, orgId, projectId),
            Effect.fail(
              wireError(NotImplemented, "The project-scoped catalog entity read model is not implemented", {
                use: "GET /v1/organizations/{orgId}/catalog/entities?project={projectId}"
              })
            )
          ),
        entities: Effect.fn("Catalog.entities")(function*(orgId, query) {
          let projectId: ProjectId | undefined
          if (query.project !== undefined) {
            const project = isProjectId(query.project)
              ? yield* projects.findById({ orgId, projectId: query.project })
              : yield* projects.findBySlug({ orgId, slug: query.project })
            if (Option.isNone(project)) return []
            projectId = project.value.id
          }
          const rows = yield* refs.entities({
            orgId,
            projectId,
            environment: query.environment,
            kind: query.kind,
            owner: query.owner,
            q: query.q
          })
          const slugs = new Map<string, string>()
          for (const row of rows) {
            if (!slugs.has(row.projectId)) {
              const project = yield* projects.findById({ orgId, projectId: row.projectId })
              slugs.set(row.projectId, Option.match(project, { onNone: () => row.projectId, onSome: (p) => p.slug }))
            }
          }
          return rows.map((row): CatalogEntity => ({
            projectId: row.projectId,
            projectSlug: slugs.get(row.projectId) ?? row.projectId,
            kind: row.kind,
            name: row.name,
            owner: row.owner,
            environment: row.environment,
            description: row.description,
            metadata: row.metadata
          }))
        })
      })
    })
  )
}
