/**
 * The content-addressed object store of the run-state plane (run-state.md §4) and its garbage collection (§7):
 * immutable, project-scoped objects named by their SHA-256 digest, written by a single digest-verified PUT (≤ 64 MiB)
 * or by an upload of parts, read whole or by a single byte range. Bodies travel raw (`application/octet-stream`) and
 * are streamed in and out, never held whole.
 */
import { Context, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { NotFound, ObjectMissing, PayloadTooLarge, ValidationFailed } from "./errors.ts"
import { ProjectId, UploadId } from "./ids.ts"
import { doc } from "./reference.ts"
import { ContractVersionGate, StatePlaneRoute } from "./runs.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope, EnvelopeOf, maxBodyBytes, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** A single PUT, and each part of an upload, carries at most 64 MiB. */
export const MAX_OBJECT_PUT_BYTES = 64 * 1024 * 1024
/** An upload has at most 10,000 parts. */
export const MAX_UPLOAD_PARTS = 10_000
/** `objects/missing` asks about 1 to 1,000 digests. */
export const MAX_MISSING_DIGESTS = 1000

/** An object's name: `sha256:` and 64 lower-case hex digits of the SHA-256 of its bytes. */
export const Digest = Schema.String.annotate({ description: "`sha256:` and 64 lower-case hex digits" }).check(
  Schema.isPattern(/^sha256:[0-9a-f]{64}$/u, { message: "must be sha256: and 64 lower-case hex digits" })
).pipe(Schema.brand("Digest"))
export type Digest = typeof Digest.Type

/** The digest of the empty blob, which every project holds without storing it. */
export const EMPTY_DIGEST = Digest.make("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")

export const StoredObject = Schema.Struct({
  digest: Digest,
  size: Schema.Number,
  createdAt: Timestamp,
  lastAccessedAt: Timestamp
})
export type StoredObject = typeof StoredObject.Type

export const Upload = Schema.Struct({
  id: UploadId,
  digest: Digest,
  size: Schema.Number,
  expiresAt: Timestamp
})
export type Upload = typeof Upload.Type

export const UploadPart = Schema.Struct({ partNumber: Schema.Int, size: Schema.Number })
export type UploadPart = typeof UploadPart.Type

export const MissingInput = Schema.Struct({
  digests: Schema.Array(Digest).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_MISSING_DIGESTS))
})
export type MissingInput = typeof MissingInput.Type

export const UploadInput = Schema.Struct({
  size: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))
})
export type UploadInput = typeof UploadInput.Type

/** Starting an upload answers the upload, or the object when it is already stored. */
export const UploadStart = Schema.Union([
  Schema.Struct({ upload: Upload }),
  Schema.Struct({ object: StoredObject })
])
export type UploadStart = typeof UploadStart.Type

export const ObjectsQuery = Schema.Struct({
  ...PageQuery,
  prefix: Schema.optionalKey(
    Schema.String.check(
      Schema.isPattern(/^[0-9a-z:]{0,71}$/u, { message: "must be the start of a digest string (sha256:…)" })
    ).annotate({ description: "Only objects whose digest string (`sha256:…`) starts with this" })
  )
})

export const Tally = Schema.Struct({ count: Schema.Number, bytes: Schema.Number })
export type Tally = typeof Tally.Type

export const GcReport = Schema.Struct({
  objects: Tally,
  reachable: Tally,
  collectable: Tally,
  sample: Schema.Array(Digest),
  graceSeconds: Schema.Int,
  computedAt: Timestamp
})
export type GcReport = typeof GcReport.Type

export const GcCollectInput = Schema.Struct({
  dryRun: Schema.optionalKey(Schema.Boolean),
  limit: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100_000 })))
})
export type GcCollectInput = typeof GcCollectInput.Type

export const GcCollection = Schema.Struct({ dryRun: Schema.Boolean, collected: Tally, digests: Schema.Array(Digest) })
export type GcCollection = typeof GcCollection.Type

/**
 * A raw body of at most 64 MiB, read as it arrives. `application/octet-stream`; a body labelled JSON is taken as the
 * same bytes (the digest is of the bytes, whatever their label).
 */
const RawBody = HttpApiSchema.StreamUint8Array({
  contentType: ["application/octet-stream", "application/json"],
  maxBytes: MAX_OBJECT_PUT_BYTES
})

const projectParams = { orgId: OrgRef, projectId: ProjectId }
const objectParams = {
  ...projectParams,
  digest: Digest.annotate({ description: "The object's digest, `sha256:` and 64 lower-case hex digits" })
}
const uploadParams = { ...objectParams, uploadId: UploadId }
const partParams = {
  ...uploadParams,
  partNumber: Schema.NumberFromString.check(
    Schema.isInt(),
    Schema.isBetween({ minimum: 1, maximum: MAX_UPLOAD_PARTS })
  ).pipe(Schema.annotateEncoded({ description: "The part's number, 1 to 10000; parts are assembled in this order" }))
}
const STATE = "/v1/organizations/:orgId/projects/:projectId/state"

export class ObjectsApi extends HttpApiGroup.make("objects")
  .add(
    HttpApiEndpoint.post("missing", `${STATE}/objects/missing`, {
      params: projectParams,
      payload: MissingInput,
      success: Envelope({ missing: Schema.Array(Digest) }),
      error: NotFound
    }).annotateMerge(
      doc(
        "Find which objects are missing",
        "Answers the digests asked about that are not stored; each present one counts as a use. The empty blob is " +
          "always present."
      )
    ).annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.get("list", `${STATE}/objects`, {
      params: projectParams,
      query: ObjectsQuery,
      success: Page({ objects: Schema.Array(StoredObject) }),
      error: NotFound
    }).annotateMerge(doc("List objects", "Metadata only, newest first; `prefix` matches the digest string."))
      .annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.put("put", `${STATE}/objects/:digest`, {
      params: objectParams,
      payload: RawBody,
      success: Envelope({ object: StoredObject }),
      error: [NotFound, ValidationFailed, PayloadTooLarge]
    }).annotateMerge(
      doc(
        "Store an object",
        "The raw body (`application/octet-stream`, at most 64 MiB) is hashed as it arrives: another digest is 422 " +
          "with `details: { expected, actual }` and nothing is stored. An object already stored answers at once."
      )
    ).annotateMerge(maxBodyBytes(MAX_OBJECT_PUT_BYTES)).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.get("get", `${STATE}/objects/:digest`, {
      params: objectParams,
      success: HttpApiSchema.StreamUint8Array(),
      error: [NotFound, ObjectMissing]
    }).annotateMerge(
      doc(
        "Read an object",
        "The raw bytes with `ETag`; a single `Range` is answered 206. `HEAD` answers the headers alone. Unknown is " +
          "404 `object_missing`."
      )
    ).annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.post("startUpload", `${STATE}/objects/:digest/uploads`, {
      params: objectParams,
      payload: UploadInput,
      success: EnvelopeOf(UploadStart),
      error: NotFound
    }).annotateMerge(
      doc(
        "Start an upload",
        "For objects too large for one PUT: answers `{ upload }` (expiring in 24 h), or `{ object }` when it is " +
          "already stored."
      )
    ).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.put("putPart", `${STATE}/objects/:digest/uploads/:uploadId/parts/:partNumber`, {
      params: partParams,
      payload: RawBody,
      success: Envelope({ part: UploadPart }),
      error: [NotFound, PayloadTooLarge]
    }).annotateMerge(
      doc("Upload a part", "The raw body, at most 64 MiB; sending a part number again replaces that part.")
    ).annotateMerge(maxBodyBytes(MAX_OBJECT_PUT_BYTES)).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.post("completeUpload", `${STATE}/objects/:digest/uploads/:uploadId/complete`, {
      params: uploadParams,
      success: Envelope({ object: StoredObject }),
      error: [NotFound, ValidationFailed]
    }).annotateMerge(
      doc(
        "Complete an upload",
        "Assembles the parts in order and checks size and digest: a mismatch is 422 and the upload stays for " +
          "another try."
      )
    ).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.get("gcReport", `${STATE}/gc/report`, {
      params: projectParams,
      success: Envelope({ report: GcReport }),
      error: NotFound
    }).annotateMerge(
      doc(
        "Report what garbage collection would collect",
        "Objects reachable from refs, the catalog head and its recent history, recent runs' job outputs and " +
          "recent use (transitively through `references`), and the rest."
      )
    ).annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.post("gcCollect", `${STATE}/gc/collect`, {
      params: projectParams,
      payload: GcCollectInput,
      success: Envelope(GcCollection.fields),
      error: NotFound
    }).annotateMerge(
      doc(
        "Collect unreachable objects",
        "A dry run unless `dryRun: false`; a real one deletes in batches and never an object that became " +
          "reachable or was used after it started."
      )
    ).annotateMerge(requires.permission("state.object.write"))
  )
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Objects", description: "Content-addressed objects and their GC" }))
{}
