/** The stored shapes of the object store: objects, the blobs their bytes live in, uploads and their parts. */
import { OrgId, ProjectId, UploadId } from "@cp/domain/ids"
import { Digest, StoredObject, Upload } from "@cp/domain/objects"
import { Schema } from "effect"
import { PagePosition } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/** One run of chunk rows: a single PUT's body or one part of an upload. */
export const BlobRef = Schema.Struct({ id: Schema.String, size: Schema.Number })
export type BlobRef = typeof BlobRef.Type

/**
 * A row of `objects`: the API's object, whose workspace and project, the blobs holding its bytes in order, and the
 * digests its JSON names in a top-level `references` array (what GC follows).
 */
export const ObjectRow = Schema.Struct({
  ...storedFields(StoredObject.fields),
  orgId: OrgId,
  projectId: ProjectId,
  blobs: Schema.Array(BlobRef),
  refersTo: Schema.Array(Digest)
})
export type ObjectRow = typeof ObjectRow.Type

/** One object of one project. */
export const ObjectKey = Schema.Struct({ projectId: ProjectId, digest: Digest })
export type ObjectKey = typeof ObjectKey.Type

/** One chunk of a blob: at most `CHUNK_BYTES`, every chunk but a blob's last exactly that. */
export interface ChunkRow {
  readonly blobId: string
  readonly seq: number
  readonly data: Uint8Array
  readonly createdAt: Date
}

/** A row of `object_uploads`. */
export const UploadRow = Schema.Struct({
  ...storedFields(Upload.fields),
  orgId: OrgId,
  projectId: ProjectId,
  createdAt: Schema.Date
})
export type UploadRow = typeof UploadRow.Type

/** A row of `object_upload_parts`. */
export const PartRow = Schema.Struct({
  uploadId: UploadId,
  partNumber: Schema.Int,
  blobId: Schema.String,
  size: Schema.Number,
  createdAt: Schema.Date
})
export type PartRow = typeof PartRow.Type

/** One upload of one object of one project. */
export interface UploadKey extends ObjectKey {
  readonly uploadId: UploadId
}

/** A page of a project's objects, newest first, optionally only digests starting with `prefix`. */
export interface ObjectsPage {
  readonly projectId: ProjectId
  readonly prefix?: string | undefined
  readonly limit: number
  readonly after?: PagePosition | undefined
}

/** What GC needs of each object. */
export interface GcEntry {
  readonly digest: Digest
  readonly size: number
  readonly refersTo: ReadonlyArray<Digest>
  readonly lastAccessedAt: Date
}

/** A batch GC may delete: each unless used since `startedAt` or named by an object's `references`. */
export interface GcBatch {
  readonly projectId: ProjectId
  readonly digests: ReadonlyArray<Digest>
  readonly startedAt: Date
}
