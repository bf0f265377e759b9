/**
 * Refs and catalog heads (run-state.md §5): named pointers to stored objects with compare-and-swap versions (a lost
 * swap is 409 `ref_conflict` with the current version and digest), each project's catalog head with its publish
 * history, and the workspace's catalog entity read model that a published catalog document fills.
 */
import { Context, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { NotFound, NotImplemented, ObjectMissing, RefConflict, ValidationFailed } from "./errors.ts"
import { ProjectId } from "./ids.ts"
import { Digest } from "./objects.ts"
import { describedText, doc } from "./reference.ts"
import { ContractVersionGate, CreatedBy, StatePlaneRoute } from "./runs.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { JsonValue, Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** A ref's name: 1–255 of `A-Z a-z 0-9 . _ - /`, no `..`, no leading or trailing `/`. */
export const RefName = Schema.String.annotate({
  description: "The ref's name (`/` percent-encoded in a path): 1 to 255 of `A-Z a-z 0-9 . _ - /`, no `..`"
}).check(
  Schema.isPattern(/^(?!\/)(?!.*\/$)(?!.*\.\.)[A-Za-z0-9._\-/]{1,255}$/u, {
    message: "must be 1 to 255 of A-Z a-z 0-9 . _ - /, without '..' or a leading or trailing '/'"
  })
)

export const Ref = Schema.Struct({
  name: Schema.String,
  digest: Digest,
  version: Schema.Int,
  updatedAt: Timestamp,
  updatedBy: CreatedBy
})
export type Ref = typeof Ref.Type

const ExpectedVersion = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

export const RefInput = Schema.Struct({ digest: Digest, expectedVersion: Schema.optionalKey(ExpectedVersion) })
export type RefInput = typeof RefInput.Type

export const RefsQuery = Schema.Struct({
  prefix: Schema.optionalKey(describedText("Only refs whose name starts with this").check(Schema.isMaxLength(255)))
})

export const RefDeleteQuery = Schema.Struct({
  expectedVersion: Schema.optionalKey(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0)).pipe(
      Schema.annotateEncoded({ description: "The version the ref must have; 0 means it must not exist" })
    )
  )
})

export const CatalogHead = Schema.Struct({
  digest: Digest,
  version: Schema.Int,
  publishedAt: Timestamp,
  publishedBy: CreatedBy
})
export type CatalogHead = typeof CatalogHead.Type

export const CatalogHeadInput = Schema.Struct({ digest: Digest, expectedDigest: Schema.optionalKey(Digest) })
export type CatalogHeadInput = typeof CatalogHeadInput.Type

/** One entity of a published catalog document `{ "entities": [...] }`. */
export const CatalogEntityInput = Schema.Struct({
  kind: Text.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  name: Text.check(Schema.isMinLength(1), Schema.isMaxLength(255)),
  owner: Schema.optionalKey(Schema.NullOr(Text.check(Schema.isMaxLength(255)))),
  environment: Schema.optionalKey(Schema.NullOr(Text.check(Schema.isMaxLength(255)))),
  description: Schema.optionalKey(Schema.NullOr(Text.check(Schema.isMaxLength(4096)))),
  metadata: Schema.optionalKey(Schema.NullOr(Schema.Record(Schema.String, JsonValue)))
})
export const CatalogDocument = Schema.Struct({ entities: Schema.Array(CatalogEntityInput) })

export const CatalogEntity = Schema.Struct({
  projectId: ProjectId,
  projectSlug: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  owner: Schema.NullOr(Schema.String),
  environment: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  metadata: Schema.Record(Schema.String, JsonValue)
})
export type CatalogEntity = typeof CatalogEntity.Type

const filter = (description: string) => Schema.optionalKey(describedText(description).check(Schema.isMaxLength(255)))

export const CatalogEntitiesQuery = Schema.Struct({
  project: filter("A project's id or slug"),
  environment: filter("Only entities of this environment"),
  kind: filter("Only entities of this kind"),
  owner: filter("Only entities of this owner"),
  q: filter("A substring of the name or description")
})
export type CatalogEntitiesQuery = typeof CatalogEntitiesQuery.Type

const projectParams = { orgId: OrgRef, projectId: ProjectId }
const refParams = { ...projectParams, name: RefName }
const STATE = "/v1/organizations/:orgId/projects/:projectId/state"

export class RefsApi extends HttpApiGroup.make("refs")
  .add(
    HttpApiEndpoint.get("list", `${STATE}/refs`, {
      params: projectParams,
      query: RefsQuery,
      success: Envelope({ refs: Schema.Array(Ref) }),
      error: NotFound
    }).annotateMerge(doc("List a project's refs", "In name order; `prefix` keeps names that start with it."))
      .annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.get("get", `${STATE}/refs/:name`, {
      params: refParams,
      success: Envelope({ ref: Ref }),
      error: NotFound
    }).annotateMerge(doc("Get a ref")).annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.put("set", `${STATE}/refs/:name`, {
      params: refParams,
      payload: RefInput,
      success: Envelope({ ref: Ref }),
      error: [NotFound, ObjectMissing, RefConflict]
    }).annotateMerge(
      doc(
        "Set a ref",
        "The digest must be stored (404 `object_missing`). With `expectedVersion` the write is a compare-and-swap (0:" +
          " the ref must not exist); a lost swap is 409 `ref_conflict` with `currentVersion` and `currentDigest`."
      )
    ).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.delete("delete", `${STATE}/refs/:name`, {
      params: refParams,
      query: RefDeleteQuery,
      success: Envelope({ deleted: Schema.Boolean }),
      error: [NotFound, RefConflict]
    }).annotateMerge(doc("Delete a ref", "`?expectedVersion=` makes it a compare-and-swap, as on set."))
      .annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.put("publish", `${STATE}/catalog/head`, {
      params: projectParams,
      payload: CatalogHeadInput,
      success: Envelope({ head: CatalogHead }),
      error: [NotFound, ObjectMissing, RefConflict]
    }).annotateMerge(
      doc(
        "Publish the catalog head",
        "The digest must be stored; with `expectedDigest` a lost compare-and-swap is 409 `ref_conflict`. A published " +
          "`{ entities: [...] }` JSON document replaces the project's entities in the workspace catalog."
      )
    ).annotateMerge(requires.permission("catalog.publish")),
    HttpApiEndpoint.get("head", `${STATE}/catalog/head`, {
      params: projectParams,
      success: Envelope({ head: CatalogHead }),
      error: NotFound
    }).annotateMerge(doc("Get the catalog head", "404 before the first publish."))
      .annotateMerge(requires.permission("catalog.read")),
    HttpApiEndpoint.get("history", `${STATE}/catalog/heads/history`, {
      params: projectParams,
      query: Schema.Struct(PageQuery),
      success: Page({ heads: Schema.Array(CatalogHead) }),
      error: [NotFound, ValidationFailed]
    }).annotateMerge(doc("List the catalog head's history", "Every publish, newest first."))
      .annotateMerge(requires.permission("catalog.read"))
  )
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Refs and catalog", description: "Refs and the catalog head" }))
{}

/** The workspace's catalog read model (no contract-version gate) and the project-scoped route the spec leaves 501. */
export class CatalogApi extends HttpApiGroup.make("catalog")
  .add(
    HttpApiEndpoint.get("entities", "/v1/organizations/:orgId/catalog/entities", {
      params: { orgId: OrgRef },
      query: CatalogEntitiesQuery,
      success: Envelope({ entities: Schema.Array(CatalogEntity) }),
      error: NotFound
    }).annotateMerge(
      doc(
        "List the workspace's catalog entities",
        "From each project's published catalog head; filter by `project`, `environment`, `kind`, `owner`, `q`."
      )
    ).annotateMerge(requires.permission("catalog.read")),
    HttpApiEndpoint.get("projectEntities", "/v1/organizations/:orgId/projects/:projectId/catalog/entities", {
      params: projectParams,
      success: Envelope({ entities: Schema.Array(CatalogEntity) }),
      error: [NotFound, NotImplemented]
    }).annotateMerge(doc("List a project's catalog entities", "Not implemented (501), as the spec says."))
      .annotateMerge(requires.permission("catalog.read"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Catalog", description: "The workspace's catalog entities" }))
{}

/** One inbound source-control event attributed to the project (run-state.md §5). */
export const StateTrigger = Schema.Struct({
  id: Schema.String,
  eventType: Schema.String,
  occurredAt: Timestamp,
  repoFullName: Schema.NullOr(Schema.String),
  ref: Schema.NullOr(Schema.String),
  sha: Schema.NullOr(Schema.String),
  data: Schema.Record(Schema.String, JsonValue)
})
export type StateTrigger = typeof StateTrigger.Type

export class TriggersApi extends HttpApiGroup.make("triggers")
  .add(
    HttpApiEndpoint.get("list", `${STATE}/triggers`, {
      params: projectParams,
      query: Schema.Struct(PageQuery),
      success: Page({ triggers: Schema.Array(StateTrigger) }),
      error: [NotFound, ValidationFailed]
    }).annotateMerge(
      doc(
        "List a project's triggers",
        "The `scm.*` events of the workspace log attributed to the project, newest first."
      )
    ).annotateMerge(requires.permission("state.run.read"))
  )
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Triggers", description: "Inbound source-control activity" }))
{}

/** A project's repository at a glance (run-state.md §5): its link, last run and catalog. */
export const RepoFacet = Schema.Struct({
  projectId: ProjectId,
  projectSlug: Schema.String,
  repoFullName: Schema.NullOr(Schema.String),
  defaultBranch: Schema.NullOr(Schema.String),
  lastRunAt: Schema.NullOr(Timestamp),
  lastRunStatus: Schema.NullOr(Schema.String),
  catalogHead: Schema.NullOr(Digest),
  entityCount: Schema.Int
})
export type RepoFacet = typeof RepoFacet.Type

export class RepoFacetsApi extends HttpApiGroup.make("repoFacets")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/repo-facets", {
      params: { orgId: OrgRef },
      success: Envelope({ repoFacets: Schema.Array(RepoFacet) }),
      error: NotFound
    }).annotateMerge(
      doc("List the workspace's repo facets", "One per project with an active command-line link, by project slug.")
    ).annotateMerge(requires.permission("state.run.read")),
    HttpApiEndpoint.get("get", "/v1/organizations/:orgId/repo-facets/:projectId", {
      params: projectParams,
      success: Envelope({ repoFacet: RepoFacet }),
      error: NotFound
    }).annotateMerge(doc("Get a project's repo facet")).annotateMerge(requires.permission("state.run.read"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Repo facets", description: "Each project's repository at a glance" }))
{}
