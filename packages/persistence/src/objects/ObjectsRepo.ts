/**
 * The object store (run-state.md §4): object rows, the chunk rows of their blobs, uploads and parts. Chunks are written
 * one autocommit statement at a time while a body streams in, and read back a few at a time while one streams out, so
 * no transfer holds a whole object or a long transaction. Whatever creates a use of an object (`use`, `touch`) moves
 * its `last_accessed_at` and so holds its row until the transaction ends: GC's delete re-checks that column, waits for
 * such a writer, and keeps the object.
 */
import { EMPTY_DIGEST } from "@cp/domain/objects"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import {
  type BlobRef,
  BlobRef as BlobRefSchema,
  type ChunkRow,
  type GcBatch,
  type GcEntry,
  type ObjectKey,
  type ObjectRow,
  ObjectRow as ObjectRowSchema,
  type ObjectsPage,
  type PartRow,
  PartRow as PartRowSchema,
  type UploadKey,
  type UploadRow,
  UploadRow as UploadRowSchema
} from "./rows.ts"

/** The most bytes one chunk row holds; every chunk of a blob but its last holds exactly this many. */
export const CHUNK_BYTES = 1024 * 1024

/** A count and a byte total. */
export interface Tally {
  readonly count: number
  readonly bytes: number
}

/** An object GC deleted: its blobs are deleted with it. */
export interface Collected {
  readonly digest: ObjectRow["digest"]
  readonly size: number
  readonly blobs: ReadonlyArray<BlobRef>
}

export class ObjectsRepo extends Context.Service<ObjectsRepo, {
  /** The object, if this project stores it. */
  readonly find: (key: ObjectKey) => Effect.Effect<Option.Option<ObjectRow>>
  /**
   * Whether the project stores this digest (the empty blob always counts as stored), marking a stored object used at
   * `at` and so holding its row until the transaction ends: refs and catalog heads call it inside their write
   * transaction, so a GC racing them keeps the object.
   */
  readonly use: (key: ObjectKey & { readonly at: Date }) => Effect.Effect<boolean>
  /** Marks the stored ones of `digests` used at `at` and answers them (the empty blob is not among them). */
  readonly touch: (
    request: { readonly projectId: ObjectKey["projectId"]; readonly digests: ReadonlyArray<ObjectKey["digest"]> },
    at: Date
  ) => Effect.Effect<ReadonlyArray<ObjectKey["digest"]>>
  /** Stores the object; false (and nothing changes) when the project already has it. */
  readonly insert: (row: ObjectRow) => Effect.Effect<boolean>
  /** Up to `limit` of the project's objects strictly after `after`, newest first. */
  readonly list: (page: ObjectsPage) => Effect.Effect<ReadonlyArray<ObjectRow>>
  /** Writes one chunk of a blob. */
  readonly writeChunk: (chunk: ChunkRow) => Effect.Effect<void>
  /** Up to `count` chunks of the blob from `fromSeq`, in order. */
  readonly readChunks: (
    request: { readonly blobId: string; readonly fromSeq: number; readonly count: number }
  ) => Effect.Effect<ReadonlyArray<Uint8Array>>
  /** Deletes these blobs' chunks. */
  readonly deleteBlobs: (blobIds: ReadonlyArray<string>) => Effect.Effect<void>
  readonly insertUpload: (upload: UploadRow) => Effect.Effect<void>
  /** The upload of this object of this project. */
  readonly findUpload: (key: UploadKey) => Effect.Effect<Option.Option<UploadRow>>
  /** `findUpload`, holding the upload row locked until the transaction ends. */
  readonly lockUpload: (key: UploadKey) => Effect.Effect<Option.Option<UploadRow>>
  /** Stores a part, answering the blob of the part it replaced, if any. */
  readonly putPart: (part: PartRow) => Effect.Effect<Option.Option<string>>
  /** The upload's parts by part number. */
  readonly parts: (uploadId: UploadRow["id"]) => Effect.Effect<ReadonlyArray<PartRow>>
  /** Deletes the upload and its part rows (not their blobs). */
  readonly deleteUpload: (uploadId: UploadRow["id"]) => Effect.Effect<void>
  /**
   * Up to `limit` uploads that expired by `now`, locked until the transaction ends (others' are skipped), each with
   * its parts' blobs.
   */
  readonly claimExpiredUploads: (
    request: { readonly now: Date; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<{ readonly upload: UploadRow; readonly blobIds: ReadonlyArray<string> }>>
  /** Up to `limit` blobs begun before `before` that no object and no upload part holds (a transfer that died). */
  readonly orphanBlobs: (request: { readonly before: Date; readonly limit: number }) => Effect.Effect<
    ReadonlyArray<string>
  >
  /** The workspace's stored objects. */
  readonly usage: (orgId: ObjectRow["orgId"]) => Effect.Effect<Tally>
  /** Every object of the project, as GC sees it. */
  readonly gcEntries: (projectId: ObjectKey["projectId"]) => Effect.Effect<ReadonlyArray<GcEntry>>
  /**
   * Deletes those of the batch not used since `startedAt` and not named in any object's `references`, answering them
   * (call inside a transaction, then delete their blobs).
   */
  readonly deleteCollectable: (batch: GcBatch) => Effect.Effect<ReadonlyArray<Collected>>
}>()("@cp/persistence/objects/ObjectsRepo") {
  static readonly memory = Layer.sync(ObjectsRepo, () => {
    const objects = new Map<string, ObjectRow>()
    const chunks = new Map<string, ChunkRow>()
    const uploads = new Map<string, UploadRow>()
    const parts = new Map<string, PartRow>()
    const objectKey = (key: ObjectKey) => `${key.projectId}/${key.digest}`
    const chunkKey = (blobId: string, seq: number) => `${blobId}/${seq}`
    const partKey = (uploadId: string, partNumber: number) => `${uploadId}/${partNumber}`
    const partsOf = (uploadId: string) =>
      Array.from(parts.values()).filter((part) => part.uploadId === uploadId).sort((a, b) =>
        a.partNumber - b.partNumber
      )
    const uploadIn = (key: UploadKey) =>
      Option.filter(
        Option.fromUndefinedOr(uploads.get(key.uploadId)),
        (row) => row.projectId === key.projectId && row.digest === key.digest
      )
    const deleteBlobs = (blobIds: ReadonlyArray<string>) =>
      atomically((changes) =>
        Effect.sync(() => {
          const doomed = new Set(blobIds)
          for (const [key, chunk] of chunks) if (doomed.has(chunk.blobId)) changes.delete(chunks, key)
        })
      )
    const touchOne = (key: ObjectKey, at: Date) =>
      atomically((changes) =>
        Effect.sync(() => {
          const row = objects.get(objectKey(key))
          if (row === undefined) return false
          changes.set(objects, objectKey(key), { ...row, lastAccessedAt: at })
          return true
        })
      )
    return ObjectsRepo.of({
      find: (key) => Effect.sync(() => Option.fromUndefinedOr(objects.get(objectKey(key)))),
      use: (key) => key.digest === EMPTY_DIGEST ? Effect.succeed(true) : touchOne(key, key.at),
      touch: (request, at) =>
        Effect.map(
          Effect.forEach(request.digests, (digest) =>
            Effect.map(touchOne({ projectId: request.projectId, digest }, at), (found) =>
              found ? [digest] : [])),
          (found) =>
            found.flat()
        ),
      insert: (row) =>
        atomically((changes) =>
          Effect.sync(() => {
            if (objects.has(objectKey(row))) return false
            changes.set(objects, objectKey(row), row)
            return true
          })
        ),
      list: ({ after, limit, prefix, projectId }) =>
        Effect.sync(() =>
          windowOf(
            Array.from(objects.values()).filter((row) =>
              row.projectId === projectId && (prefix === undefined || row.digest.startsWith(prefix))
            ),
            (row) => ({ at: row.createdAt, key: row.digest }),
            { limit, after }
          )
        ),
      writeChunk: (chunk) =>
        atomically((changes) => Effect.sync(() => changes.set(chunks, chunkKey(chunk.blobId, chunk.seq), chunk))),
      readChunks: ({ blobId, count, fromSeq }) =>
        Effect.sync(() => {
          const found: Array<Uint8Array> = []
          for (let seq = fromSeq; seq < fromSeq + count; seq++) {
            const chunk = chunks.get(chunkKey(blobId, seq))
            if (chunk === undefined) break
            found.push(chunk.data)
          }
          return found
        }),
      deleteBlobs,
      insertUpload: (upload) => atomically((changes) => Effect.sync(() => changes.set(uploads, upload.id, upload))),
      findUpload: (key) => Effect.sync(() => uploadIn(key)),
      lockUpload: (key) => Effect.sync(() => uploadIn(key)),
      putPart: (part) =>
        atomically((changes) =>
          Effect.sync(() => {
            const previous = parts.get(partKey(part.uploadId, part.partNumber))
            changes.set(parts, partKey(part.uploadId, part.partNumber), part)
            return Option.map(Option.fromUndefinedOr(previous), (row) => row.blobId)
          })
        ),
      parts: (uploadId) => Effect.sync(() => partsOf(uploadId)),
      deleteUpload: (uploadId) =>
        atomically((changes) =>
          Effect.sync(() => {
            for (const part of partsOf(uploadId)) changes.delete(parts, partKey(uploadId, part.partNumber))
            changes.delete(uploads, uploadId)
          })
        ),
      claimExpiredUploads: ({ limit, now }) =>
        Effect.sync(() =>
          Array.from(uploads.values()).filter((upload) => upload.expiresAt <= now)
            .sort((a, b) => a.expiresAt.getTime() - b.expiresAt.getTime())
            .slice(0, limit)
            .map((upload) => ({ upload, blobIds: partsOf(upload.id).map((part) => part.blobId) }))
        ),
      orphanBlobs: ({ before, limit }) =>
        Effect.sync(() => {
          const held = new Set<string>()
          for (const part of parts.values()) held.add(part.blobId)
          for (const row of objects.values()) for (const blob of row.blobs) held.add(blob.id)
          return Array.from(chunks.values()).filter((chunk) =>
            chunk.seq === 0 && chunk.createdAt < before && !held.has(chunk.blobId)
          ).slice(0, limit).map((chunk) => chunk.blobId)
        }),
      usage: (orgId) =>
        Effect.sync(() => {
          const rows = Array.from(objects.values()).filter((row) => row.orgId === orgId)
          return { count: rows.length, bytes: rows.reduce((sum, row) => sum + row.size, 0) }
        }),
      gcEntries: (projectId) =>
        Effect.sync(() => Array.from(objects.values()).filter((row) => row.projectId === projectId)),
      deleteCollectable: ({ digests, projectId, startedAt }) =>
        atomically((changes) =>
          Effect.sync(() => {
            const referred = new Set<string>()
            for (const row of objects.values()) {
              if (row.projectId === projectId) { for (const digest of row.refersTo) referred.add(digest) }
            }
            const collected: Array<Collected> = []
            for (const digest of digests) {
              const row = objects.get(objectKey({ projectId, digest }))
              if (row === undefined || row.lastAccessedAt >= startedAt || referred.has(digest)) continue
              changes.delete(objects, objectKey(row))
              collected.push({ digest, size: row.size, blobs: row.blobs })
            }
            return collected
          })
        )
    })
  })

  static readonly sql = Layer.effect(
    ObjectsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      // bigint columns read as float8: JSON numbers, exact up to 2^53 − 1.
      const objectColumns = sql.literal(
        "project_id, digest, org_id, size::float8 as size, blobs, refers_to, created_at, last_accessed_at"
      )
      const uploadColumns = sql.literal(
        "id, org_id, project_id, digest, size::float8 as size, created_at, expires_at"
      )
      const decodeObjects = Schema.decodeUnknownEffect(Schema.Array(ObjectRowSchema))
      const decodeUploads = Schema.decodeUnknownEffect(Schema.Array(UploadRowSchema))
      const decodeParts = Schema.decodeUnknownEffect(Schema.Array(PartRowSchema))
      const decodeData = Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({ data: Schema.Uint8Array })))
      const decodeDigests = Schema.decodeUnknownEffect(
        Schema.Array(Schema.Struct({ digest: ObjectRowSchema.fields.digest }))
      )
      const decodeBlobIds = Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({ blobId: Schema.String })))
      const decodeTally = Schema.decodeUnknownEffect(
        Schema.Array(Schema.Struct({ count: Schema.Number, bytes: Schema.Number }))
      )
      const decodeCollected = Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({
        digest: ObjectRowSchema.fields.digest,
        size: Schema.Number,
        blobs: Schema.Array(BlobRefSchema)
      })))
      const decodeGc = Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({
        digest: ObjectRowSchema.fields.digest,
        size: Schema.Number,
        refersTo: ObjectRowSchema.fields.refersTo,
        lastAccessedAt: Schema.Date
      })))
      const objectsWhere = (key: ObjectKey) => sql`project_id = ${key.projectId} and digest = ${key.digest}`
      const touch = (projectId: ObjectKey["projectId"], digests: ReadonlyArray<string>, at: Date) =>
        Effect.orDie(Effect.flatMap(
          sql`
            update objects set last_accessed_at = greatest(last_accessed_at, ${at})
            where project_id = ${projectId} and digest in ${sql.in(digests)}
            returning digest`,
          decodeDigests
        )).pipe(Effect.map((rows) => rows.map((row) => row.digest)))
      return ObjectsRepo.of({
        find: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`select ${objectColumns} from objects where ${objectsWhere(key)}`,
            decodeObjects
          )).pipe(Effect.map((rows) => Option.fromUndefinedOr(rows[0]))),
        use: (key) =>
          key.digest === EMPTY_DIGEST
            ? Effect.succeed(true)
            : Effect.map(touch(key.projectId, [key.digest], key.at), (found) => found.length > 0),
        touch: (request, at) =>
          request.digests.length === 0 ? Effect.succeed([]) : touch(request.projectId, request.digests, at),
        insert: (row) =>
          Effect.orDie(Effect.flatMap(
            sql`
              insert into objects ${
              sql.insert({
                ...row,
                blobs: sql.json(row.blobs),
                refersTo: sql.json(row.refersTo)
              })
            }
              on conflict (project_id, digest) do nothing
              returning digest`,
            decodeDigests
          )).pipe(Effect.map((rows) => rows.length > 0)),
        list: ({ projectId, prefix, ...window }) =>
          Effect.orDie(Effect.flatMap(
            keysetQuery(
              sql,
              sql`select ${objectColumns} from objects`,
              [
                sql`project_id = ${projectId}`,
                ...(prefix === undefined || prefix === "" ? [] : [sql`starts_with(digest, ${prefix})`])
              ],
              window,
              { key: "digest" }
            ),
            decodeObjects
          )),
        writeChunk: (chunk) =>
          Effect.orDie(
            sql`
              insert into object_chunks (blob_id, seq, data, created_at)
              values (${chunk.blobId}, ${chunk.seq}, ${chunk.data}, ${chunk.createdAt})
              on conflict (blob_id, seq) do update set data = excluded.data`.pipe(Effect.asVoid)
          ),
        readChunks: ({ blobId, count, fromSeq }) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select data from object_chunks
              where blob_id = ${blobId} and seq >= ${fromSeq} and seq < ${fromSeq + count}
              order by seq`,
            decodeData
          )).pipe(Effect.map((rows) => rows.map((row) => row.data))),
        deleteBlobs: (blobIds) =>
          blobIds.length === 0
            ? Effect.void
            : Effect.orDie(sql`delete from object_chunks where blob_id in ${sql.in(blobIds)}`.pipe(Effect.asVoid)),
        insertUpload: (upload) =>
          Effect.orDie(sql`insert into object_uploads ${sql.insert(upload)}`.pipe(Effect.asVoid)),
        findUpload: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`select ${uploadColumns} from object_uploads where id = ${key.uploadId} and ${objectsWhere(key)}`,
            decodeUploads
          )).pipe(Effect.map((rows) => Option.fromUndefinedOr(rows[0]))),
        lockUpload: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select ${uploadColumns} from object_uploads where id = ${key.uploadId} and ${objectsWhere(key)}
              for update`,
            decodeUploads
          )).pipe(Effect.map((rows) => Option.fromUndefinedOr(rows[0]))),
        putPart: (part) =>
          Effect.orDie(Effect.flatMap(
            sql`
              with previous as (
                select blob_id from object_upload_parts
                where upload_id = ${part.uploadId} and part_number = ${part.partNumber}
                for update
              ), stored as (
                insert into object_upload_parts ${sql.insert(part)}
                on conflict (upload_id, part_number)
                do update set blob_id = excluded.blob_id, size = excluded.size, created_at = excluded.created_at
              )
              select blob_id from previous`,
            decodeBlobIds
          )).pipe(Effect.map((rows) => Option.map(Option.fromUndefinedOr(rows[0]), (row) => row.blobId))),
        parts: (uploadId) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select upload_id, part_number, blob_id, size::float8 as size, created_at from object_upload_parts
              where upload_id = ${uploadId} order by part_number`,
            decodeParts
          )),
        deleteUpload: (uploadId) =>
          Effect.orDie(sql`delete from object_uploads where id = ${uploadId}`.pipe(Effect.asVoid)),
        claimExpiredUploads: ({ limit, now }) =>
          Effect.gen(function*() {
            const expired = yield* Effect.orDie(Effect.flatMap(
              sql`
                select ${uploadColumns} from object_uploads where expires_at <= ${now}
                order by expires_at limit ${limit} for update skip locked`,
              decodeUploads
            ))
            if (expired.length === 0) return []
            const blobs = yield* Effect.orDie(Effect.flatMap(
              sql`
                select upload_id, part_number, blob_id, size::float8 as size, created_at from object_upload_parts
                where upload_id in ${sql.in(expired.map((upload) => upload.id))}`,
              decodeParts
            ))
            return expired.map((upload) => ({
              upload,
              blobIds: blobs.filter((part) => part.uploadId === upload.id).map((part) => part.blobId)
            }))
          }),
        orphanBlobs: ({ before, limit }) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select c.blob_id from object_chunks c
              where c.seq = 0 and c.created_at < ${before}
                and not exists (select 1 from object_upload_parts p where p.blob_id = c.blob_id)
                and not exists (
                  select 1 from objects o where o.blobs @> jsonb_build_array(jsonb_build_object('id', c.blob_id))
                )
              limit ${limit}`,
            decodeBlobIds
          )).pipe(Effect.map((rows) => rows.map((row) => row.blobId))),
        usage: (orgId) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select count(*)::float8 as count, coalesce(sum(size), 0)::float8 as bytes
              from objects where org_id = ${orgId}`,
            decodeTally
          )).pipe(Effect.map((rows) => rows[0] ?? { count: 0, bytes: 0 })),
        gcEntries: (projectId) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select digest, size::float8 as size, refers_to, last_accessed_at from objects
              where project_id = ${projectId}`,
            decodeGc
          )),
        deleteCollectable: ({ digests, projectId, startedAt }) =>
          digests.length === 0 ? Effect.succeed([]) : Effect.orDie(Effect.flatMap(
            sql`
              delete from objects o
              where o.project_id = ${projectId} and o.digest in ${sql.in(digests)}
                and o.last_accessed_at < ${startedAt}
                and not exists (
                  select 1 from objects r
                  where r.project_id = o.project_id and r.refers_to @> jsonb_build_array(o.digest)
                )
              returning o.digest, o.size::float8 as size, o.blobs`,
            decodeCollected
          ))
      })
    })
  )
}
