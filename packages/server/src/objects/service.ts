/**
 * The object store (run-state.md §4): digest-verified PUTs streamed into chunk rows, reads of the whole object or one
 * byte range streamed out of them, `missing` (each present digest asked about counts as a use), uploads of parts
 * assembled on complete, and the sweep of expired uploads and orphan blobs. Nothing is stored under a digest its bytes
 * do not have: a body is written into a fresh blob first, and only a matching one becomes an object.
 */
import {
  BadRequest,
  type Digest,
  EMPTY_DIGEST,
  type MissingInput,
  NotFound,
  ObjectMissing,
  type OrgId,
  type Paged,
  PayloadTooLarge,
  type ProjectId,
  type StoredObject,
  type UploadId,
  type UploadInput,
  type UploadPart,
  type UploadStart,
  ValidationFailed,
  wireError
} from "@cp/domain"
import { type BlobRef, type ObjectRow, ObjectsRepo, ProjectsRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import { HttpApiError } from "effect/http-api"
import { createHash } from "node:crypto"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"
import { type BlobTruncated, readRange, writeBlob } from "./blobs.ts"
import { referencesIn } from "./rules.ts"

/** One project of one workspace. */
export interface ProjectScope {
  readonly orgId: OrgId
  readonly projectId: ProjectId
}

/** A raw request body as the typed API hands it over. */
export type RawBody = Stream.Stream<Uint8Array, unknown>

/** An object to read: its metadata and its bytes `[start, end)` on demand. */
export interface OpenedObject {
  readonly object: StoredObject
  readonly read: (start: number, end: number) => Stream.Stream<Uint8Array, BlobTruncated>
}

/** Uploads expire this long after they start. */
export const UPLOAD_TTL_MS = 24 * 60 * 60 * 1000
/** A blob no object or part holds is an orphan (a transfer that died) once it is this old. */
export const ORPHAN_AGE_MS = 60 * 60 * 1000

const toObject = (row: ObjectRow): StoredObject => ({
  digest: row.digest,
  size: row.size,
  createdAt: row.createdAt,
  lastAccessedAt: row.lastAccessedAt
})

const objectMissing = (digest: Digest) => wireError(ObjectMissing, "Object not found", { digest })
const uploadNotFound = (uploadId: UploadId) => wireError(NotFound, "Upload not found", { uploadId })

/** The body's failures: over its cap is 413, anything else a body that could not be read. */
const bodyFailure = (error: unknown): PayloadTooLarge | BadRequest =>
  error instanceof HttpApiError.HttpApiPayloadTooLarge
    ? wireError(PayloadTooLarge, "The body exceeds the limit of 64 MiB", { limitBytes: 64 * 1024 * 1024 })
    : wireError(BadRequest, "The request body could not be read")

const decodeDigest = Schema.decodeSync(Schema.String)
const digestOfHex = (hex: string): string => decodeDigest(`sha256:${hex}`)

export class ObjectsService extends Context.Service<ObjectsService, {
  readonly missing: (
    scope: ProjectScope,
    input: MissingInput
  ) => Effect.Effect<{ readonly missing: ReadonlyArray<Digest> }, NotFound>
  readonly list: (
    scope: ProjectScope,
    query: PageRequest & { readonly prefix?: string }
  ) => Effect.Effect<Paged<{ readonly objects: ReadonlyArray<StoredObject> }>, NotFound | ValidationFailed>
  readonly put: (
    scope: ProjectScope,
    digest: Digest,
    body: RawBody
  ) => Effect.Effect<{ readonly object: StoredObject }, NotFound | ValidationFailed | PayloadTooLarge | BadRequest>
  /** The object to read (a use of it), or 404 `object_missing`. */
  readonly open: (scope: ProjectScope, digest: Digest) => Effect.Effect<OpenedObject, NotFound | ObjectMissing>
  readonly startUpload: (
    scope: ProjectScope,
    digest: Digest,
    input: UploadInput
  ) => Effect.Effect<UploadStart, NotFound>
  readonly putPart: (
    scope: ProjectScope,
    digest: Digest,
    uploadId: UploadId,
    partNumber: number,
    body: RawBody
  ) => Effect.Effect<{ readonly part: UploadPart }, NotFound | PayloadTooLarge | BadRequest>
  readonly completeUpload: (
    scope: ProjectScope,
    digest: Digest,
    uploadId: UploadId
  ) => Effect.Effect<{ readonly object: StoredObject }, NotFound | ValidationFailed>
  /** Deletes up to `limit` expired uploads and orphan blobs; how many it deleted. */
  readonly sweepExpired: (limit: number) => Effect.Effect<number>
}>()("@cp/server/ObjectsService") {
  static readonly layer = Layer.effect(
    ObjectsService,
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const cursors = yield* Cursors

      const requireProject = (scope: ProjectScope) => findProject(projects, scope.orgId, scope.projectId)

      const emptyObject = (now: Date): StoredObject => ({
        digest: EMPTY_DIGEST,
        size: 0,
        createdAt: now,
        lastAccessedAt: now
      })

      /**
       * Stores the object whose bytes are `blobs` (verified), marking what it references used in the same transaction;
       * when another writer stored it first, the blobs are dropped and the stored object answers.
       */
      const storeObject = (
        scope: ProjectScope,
        digest: Digest,
        blobs: ReadonlyArray<BlobRef>,
        scanned: Uint8Array | undefined,
        now: Date
      ) =>
        Effect.gen(function*() {
          const row: ObjectRow = {
            ...scope,
            digest,
            size: blobs.reduce((sum, blob) => sum + blob.size, 0),
            blobs,
            refersTo: scanned === undefined ? [] : referencesIn(scanned),
            createdAt: now,
            lastAccessedAt: now
          }
          const inserted = yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* objects.insert(row)
            if (stored) yield* objects.touch({ projectId: scope.projectId, digests: row.refersTo }, now)
            return stored
          }))
          if (inserted) return toObject(row)
          yield* objects.deleteBlobs(blobs.map((blob) => blob.id))
          const existing = yield* objects.find({ projectId: scope.projectId, digest })
          return Option.match(existing, { onNone: () => toObject(row), onSome: toObject })
        })

      /** The stored object, marked used now. */
      const findUsed = (scope: ProjectScope, digest: Digest, now: Date) =>
        Effect.gen(function*() {
          const used = yield* objects.use({ projectId: scope.projectId, digest, at: now })
          if (!used) return Option.none<ObjectRow>()
          return yield* objects.find({ projectId: scope.projectId, digest })
        })

      return ObjectsService.of({
        missing: Effect.fn("Objects.missing")(function*(scope, input) {
          yield* requireProject(scope)
          const now = yield* currentDate
          const asked = Array.from(new Set(input.digests)).filter((digest) => digest !== EMPTY_DIGEST)
          const present = new Set(yield* objects.touch({ projectId: scope.projectId, digests: asked }, now))
          return { missing: asked.filter((digest) => !present.has(digest)) }
        }),

        list: Effect.fn("Objects.list")(function*(scope, query) {
          yield* requireProject(scope)
          const prefix = query.prefix === undefined || query.prefix === "" ? undefined : query.prefix
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "objects.list", scope: `${scope.orgId}/${scope.projectId}`, filters: { prefix } },
            query,
            (window) => objects.list({ projectId: scope.projectId, prefix, ...window }),
            (row) => ({ at: row.createdAt, key: row.digest })
          )
          return { data: { objects: items.map(toObject) }, cursor }
        }),

        put: Effect.fn("Objects.put")(function*(scope, digest, body) {
          yield* requireProject(scope)
          const now = yield* currentDate
          if (digest === EMPTY_DIGEST) return { object: emptyObject(now) }
          const existing = yield* findUsed(scope, digest, now)
          if (Option.isSome(existing)) return { object: toObject(existing.value) }
          const blobId = mint.blob(now.getTime())
          const written = yield* writeBlob(objects, blobId, Stream.mapError(body, bodyFailure), now)
          const actual = digestOfHex(written.sha256)
          if (actual !== digest) {
            yield* objects.deleteBlobs([blobId])
            return yield* wireError(ValidationFailed, "The body's digest does not match the path", {
              expected: digest,
              actual
            })
          }
          return { object: yield* storeObject(scope, digest, [written.blob], written.scanned, now) }
        }),

        open: Effect.fn("Objects.open")(function*(scope, digest) {
          yield* requireProject(scope)
          const now = yield* currentDate
          if (digest === EMPTY_DIGEST) return { object: emptyObject(now), read: () => Stream.empty }
          const row = yield* findUsed(scope, digest, now).pipe(Effect.flatMap(Option.match({
            onNone: () => Effect.fail(objectMissing(digest)),
            onSome: Effect.succeed
          })))
          return { object: toObject(row), read: (start, end) => readRange(objects, row.blobs, start, end) }
        }),

        startUpload: Effect.fn("Objects.startUpload")(function*(scope, digest, input) {
          yield* requireProject(scope)
          const now = yield* currentDate
          if (digest === EMPTY_DIGEST) return { object: emptyObject(now) }
          const existing = yield* findUsed(scope, digest, now)
          if (Option.isSome(existing)) return { object: toObject(existing.value) }
          const upload = {
            id: mint.objectUpload(now.getTime()),
            ...scope,
            digest,
            size: input.size,
            createdAt: now,
            expiresAt: new Date(now.getTime() + UPLOAD_TTL_MS)
          }
          yield* objects.insertUpload(upload)
          return { upload: { id: upload.id, digest, size: upload.size, expiresAt: upload.expiresAt } }
        }),

        putPart: Effect.fn("Objects.putPart")(function*(scope, digest, uploadId, partNumber, body) {
          yield* requireProject(scope)
          const key = { projectId: scope.projectId, digest, uploadId }
          const now = yield* currentDate
          const upload = yield* objects.findUpload(key)
          if (Option.isNone(upload) || upload.value.expiresAt <= now) return yield* uploadNotFound(uploadId)
          const blobId = mint.blob(now.getTime())
          const written = yield* writeBlob(objects, blobId, Stream.mapError(body, bodyFailure), now)
          const stored = yield* tx.withTransaction(Effect.gen(function*() {
            // The upload may have been completed or swept while the part streamed in.
            if (Option.isNone(yield* objects.lockUpload(key))) return Option.none<Option.Option<string>>()
            return Option.some(
              yield* objects.putPart({ uploadId, partNumber, blobId, size: written.blob.size, createdAt: now })
            )
          }))
          if (Option.isNone(stored)) {
            yield* objects.deleteBlobs([blobId])
            return yield* uploadNotFound(uploadId)
          }
          if (Option.isSome(stored.value)) yield* objects.deleteBlobs([stored.value.value])
          return { part: { partNumber, size: written.blob.size } }
        }),

        completeUpload: Effect.fn("Objects.completeUpload")(function*(scope, digest, uploadId) {
          yield* requireProject(scope)
          const key = { projectId: scope.projectId, digest, uploadId }
          const now = yield* currentDate
          const upload = yield* objects.findUpload(key)
          if (Option.isNone(upload)) {
            // Completed before (the upload is gone, the object stored): the same answer again.
            const stored = yield* findUsed(scope, digest, now)
            if (Option.isSome(stored)) return { object: toObject(stored.value) }
            return yield* uploadNotFound(uploadId)
          }
          const parts = yield* objects.parts(uploadId)
          const blobs = parts.map((part): BlobRef => ({ id: part.blobId, size: part.size }))
          const size = blobs.reduce((sum, blob) => sum + blob.size, 0)
          const numbers = parts.map((part) => part.partNumber)
          if (parts.length === 0 || numbers.some((number, index) => number !== index + 1)) {
            return yield* wireError(ValidationFailed, "The upload's parts must be numbered 1 to n without gaps", {
              parts: numbers
            })
          }
          if (size !== upload.value.size) {
            return yield* wireError(ValidationFailed, "The parts do not add up to the upload's size", {
              expected: upload.value.size,
              actual: size
            })
          }
          // Hash the assembled bytes as they stream back out of the store; keep the head to scan for references.
          const hash = createHash("sha256")
          const head: Array<Uint8Array> = []
          let kept = 0
          yield* Stream.runForEach(readRange(objects, blobs, 0, size), (bytes) =>
            Effect.sync(() => {
              hash.update(bytes)
              if (size <= 4 * 1024 * 1024) {
                head.push(bytes)
                kept += bytes.length
              }
            })).pipe(Effect.orDie)
          const actual = digestOfHex(hash.digest("hex"))
          if (actual !== digest) {
            return yield* wireError(ValidationFailed, "The assembled parts' digest does not match the path", {
              expected: digest,
              actual
            })
          }
          const scanned = kept === size ? Buffer.concat(head) : undefined
          const object = yield* tx.withTransaction(Effect.gen(function*() {
            if (Option.isNone(yield* objects.lockUpload(key))) return Option.none<StoredObject>()
            yield* objects.deleteUpload(uploadId)
            return Option.some(yield* storeObject(scope, digest, blobs, scanned, now))
          }))
          if (Option.isNone(object)) return yield* uploadNotFound(uploadId)
          return { object: object.value }
        }),

        sweepExpired: Effect.fn("Objects.sweepExpired")(function*(limit) {
          const now = yield* currentDate
          const expired = yield* tx.withTransaction(Effect.gen(function*() {
            const claimed = yield* objects.claimExpiredUploads({ now, limit })
            for (const { upload } of claimed) yield* objects.deleteUpload(upload.id)
            return claimed
          }))
          yield* objects.deleteBlobs(expired.flatMap((entry) => entry.blobIds))
          const orphans = yield* objects.orphanBlobs({ before: new Date(now.getTime() - ORPHAN_AGE_MS), limit })
          yield* objects.deleteBlobs(orphans)
          return expired.length + orphans.length
        })
      })
    })
  )
}
