/**
 * The object store's contract on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: an object stored once, `use`
 * and `touch` answering only stored digests (the empty blob always), chunks read back in order, parts replaced,
 * expired uploads and orphan blobs found, the list newest first by prefix, usage, and GC's delete that keeps an
 * object used since it started or named by another object's `references`.
 */
import { Digest, EMPTY_DIGEST, UploadId } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { ulid } from "ulid"
import { ObjectsRepo } from "../../src/objects/ObjectsRepo.ts"
import type { ObjectRow } from "../../src/objects/rows.ts"
import { ProjectsRepo } from "../../src/projects/ProjectsRepo.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { at, storedProjectScope } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const Repos = {
  memory: Layer.mergeAll(ObjectsRepo.memory, ProjectsRepo.memory, OrganizationsRepo.memory),
  sql: Layer.mergeAll(ObjectsRepo.sql, ProjectsRepo.sql, OrganizationsRepo.sql)
}

const scope = Effect.map(storedProjectScope("Root"), ({ org, projectId }) => ({ orgId: org.id, projectId }))
const digestOf = (text: string) =>
  Schema.decodeSync(Digest)(`sha256:${createHash("sha256").update(text).digest("hex")}`)
const uploadId = () => Schema.decodeSync(UploadId)(`upl_${ulid()}`)

const objectRow = (
  scope: { readonly orgId: ObjectRow["orgId"]; readonly projectId: ObjectRow["projectId"] },
  text: string,
  minutes: number,
  overrides: Partial<ObjectRow> = {}
): ObjectRow => ({
  ...scope,
  digest: digestOf(text),
  size: text.length,
  blobs: [{ id: randomUUID(), size: text.length }],
  refersTo: [],
  createdAt: at(minutes),
  lastAccessedAt: at(minutes),
  ...overrides
})

describeContract("ObjectsRepo", Repos, (it) => {
  it.effect("stores an object once; use and touch answer stored digests and move their last access", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const project = yield* scope
      const row = objectRow(project, "hello", 1)
      assert.isTrue(yield* objects.insert(row))
      assert.isFalse(yield* objects.insert({ ...row, size: 99 }))
      assert.deepStrictEqual(yield* objects.find(row), Option.some(row))
      assert.isTrue(yield* objects.use({ ...row, at: at(5) }))
      assert.isTrue(yield* objects.use({ projectId: row.projectId, digest: EMPTY_DIGEST, at: at(5) }))
      assert.isFalse(yield* objects.use({ projectId: row.projectId, digest: digestOf("absent"), at: at(5) }))
      const other = yield* scope
      assert.isFalse(yield* objects.use({ projectId: other.projectId, digest: row.digest, at: at(5) }))
      assert.deepStrictEqual(
        yield* objects.touch({ projectId: row.projectId, digests: [row.digest, digestOf("absent")] }, at(7)),
        [row.digest]
      )
      const found = yield* objects.find(row)
      assert.deepStrictEqual(Option.map(found, (object) => object.lastAccessedAt), Option.some(at(7)))
      assert.deepStrictEqual(yield* objects.usage(project.orgId), { count: 1, bytes: 5 })
    }))

  it.effect("reads chunks back in order and deletes blobs", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const blobId = randomUUID()
      for (const seq of [0, 1, 2]) {
        yield* objects.writeChunk({ blobId, seq, data: new Uint8Array([seq, seq + 1]), createdAt: at(1) })
      }
      const read = yield* objects.readChunks({ blobId, fromSeq: 1, count: 5 })
      assert.deepStrictEqual(read.map((data) => Array.from(data)), [[1, 2], [2, 3]])
      assert.deepStrictEqual(
        yield* objects.orphanBlobs({ before: at(2), limit: 1000 }).pipe(
          Effect.map((ids) => ids.includes(blobId))
        ),
        true
      )
      yield* objects.deleteBlobs([blobId])
      assert.deepStrictEqual(yield* objects.readChunks({ blobId, fromSeq: 0, count: 5 }), [])
    }))

  it.effect("lists newest first by digest prefix", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const project = yield* scope
      const rows = ["a", "b", "c"].map((text, index) => objectRow(project, text, index + 1))
      for (const row of rows) yield* objects.insert(row)
      const all = yield* objects.list({ projectId: project.projectId, limit: 10 })
      assert.deepStrictEqual(all.map((row) => row.digest), rows.map((row) => row.digest).reverse())
      const first = rows[0]
      if (first === undefined) return
      const some = yield* objects.list({ projectId: project.projectId, limit: 10, prefix: first.digest.slice(0, 12) })
      assert.deepStrictEqual(some.map((row) => row.digest), [first.digest])
    }))

  it.effect("replaces a part, answering the blob it replaced; an expired upload is claimed with its blobs", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const project = yield* scope
      const upload = {
        id: uploadId(),
        ...project,
        digest: digestOf("big"),
        size: 3,
        createdAt: at(1),
        expiresAt: at(60)
      }
      yield* objects.insertUpload(upload)
      const key = { projectId: project.projectId, digest: upload.digest, uploadId: upload.id }
      assert.deepStrictEqual(yield* objects.findUpload(key), Option.some(upload))
      assert.isTrue(Option.isNone(yield* objects.findUpload({ ...key, digest: digestOf("other") })))
      const part = { uploadId: upload.id, partNumber: 1, blobId: "blob-1", size: 3, createdAt: at(2) }
      assert.isTrue(Option.isNone(yield* objects.putPart(part)))
      assert.deepStrictEqual(yield* objects.putPart({ ...part, blobId: "blob-2" }), Option.some("blob-1"))
      assert.deepStrictEqual((yield* objects.parts(upload.id)).map((row) => row.blobId), ["blob-2"])
      const expired = yield* objects.claimExpiredUploads({ now: at(61), limit: 1000 })
      const mine = expired.find((entry) => entry.upload.id === upload.id)
      assert.deepStrictEqual(mine?.blobIds, ["blob-2"])
      yield* objects.deleteUpload(upload.id)
      assert.isTrue(Option.isNone(yield* objects.findUpload(key)))
      assert.deepStrictEqual(yield* objects.parts(upload.id), [])
    }))

  it.effect("GC deletes only objects unused since it started and named by no object's references", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const project = yield* scope
      const leaf = objectRow(project, "leaf", 1)
      const parent = objectRow(project, "parent", 1, { refersTo: [leaf.digest] })
      const used = objectRow(project, "used", 1, { lastAccessedAt: at(20) })
      const lone = objectRow(project, "lone", 1)
      for (const row of [leaf, parent, used, lone]) yield* objects.insert(row)
      const collected = yield* objects.deleteCollectable({
        projectId: project.projectId,
        digests: [leaf.digest, used.digest, lone.digest],
        startedAt: at(10)
      })
      assert.deepStrictEqual(collected.map((row) => row.digest), [lone.digest])
      assert.deepStrictEqual(collected[0]?.blobs, lone.blobs)
      assert.isTrue(Option.isNone(yield* objects.find(lone)))
      assert.isTrue(Option.isSome(yield* objects.find(leaf)))
      const entries = yield* objects.gcEntries(project.projectId)
      assert.strictEqual(entries.length, 3)
    }))
})
