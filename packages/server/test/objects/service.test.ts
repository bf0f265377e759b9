/**
 * The object store's background and racing behaviour on memory repositories with `TestClock`: the upload sweep (a
 * scoped fiber on a schedule) deletes an upload and its parts' chunks once it expires, not before; a GC collection
 * that a new reference races (between its report and its delete) keeps the object.
 */
import { Digest, type OrgId } from "@cp/domain"
import { ObjectsRepo } from "@cp/persistence"
import { assert, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import { createHash } from "node:crypto"
import { GcService } from "../../src/objects/gc.ts"
import { ObjectsService } from "../../src/objects/service.ts"
import { UploadSweep } from "../../src/objects/sweep.ts"
import { mint } from "../../src/platform/ids.ts"
import { areaServicesLayer, seedProject } from "../support/services.ts"

const digestOf = (bytes: Uint8Array) =>
  Schema.decodeSync(Digest)(`sha256:${createHash("sha256").update(bytes).digest("hex")}`)
const bytesOf = (text: string) => new TextEncoder().encode(text)
const body = (bytes: Uint8Array) => Stream.make(bytes)

/** A digest the next GC collection will see used by a racing writer, right after it read the objects. */
const race: { digest: Digest | undefined } = { digest: undefined }

/** The memory repository, except that reading GC's entries lets a "ref write" mark `race.digest` used. */
const RacingRepo = Layer.effect(
  ObjectsRepo,
  Effect.gen(function*() {
    const inner = yield* ObjectsRepo
    return ObjectsRepo.of({
      ...inner,
      gcEntries: (projectId) =>
        Effect.gen(function*() {
          const entries = yield* inner.gcEntries(projectId)
          const digest = race.digest
          race.digest = undefined
          if (digest !== undefined) {
            const now = new Date(yield* Effect.clockWith((clock) => clock.currentTimeMillis))
            assert.isTrue(yield* inner.use({ projectId, digest, at: now }))
          }
          return entries
        })
    })
  })
)

const Services = Layer.mergeAll(
  UploadSweep.layer.pipe(Layer.provideMerge(ObjectsService.layer)),
  GcService.layer.pipe(Layer.provide(RacingRepo))
).pipe(Layer.provideMerge(areaServicesLayer))

layer(Services)("objects service", (it) => {
  const scope = Effect.gen(function*() {
    const orgId: OrgId = mint.org(0)
    return { orgId, projectId: yield* seedProject(orgId) }
  })

  it.effect("the upload sweep fiber deletes an expired upload and its chunks, and not before it expires", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsService
      const repo = yield* ObjectsRepo
      const project = yield* scope
      const bytes = bytesOf("part one")
      const digest = digestOf(bytes)
      const started = yield* objects.startUpload(project, digest, { size: bytes.length })
      if (!("upload" in started)) return assert.fail("expected an upload")
      const uploadId = started.upload.id
      yield* objects.putPart(project, digest, uploadId, 1, body(bytes))
      const [part] = yield* repo.parts(uploadId)
      if (part === undefined) return assert.fail("expected a part")
      const key = { projectId: project.projectId, digest, uploadId }

      yield* Layer.build(UploadSweep.background)
      yield* TestClock.adjust(Duration.hours(23))
      assert.isTrue(Option.isSome(yield* repo.findUpload(key)))
      yield* TestClock.adjust(Duration.hours(1).pipe(Duration.sum(Duration.minutes(5))))
      assert.isTrue(Option.isNone(yield* repo.findUpload(key)))
      assert.deepStrictEqual(yield* repo.parts(uploadId), [])
      assert.deepStrictEqual(yield* repo.readChunks({ blobId: part.blobId, fromSeq: 0, count: 1 }), [])
      const late = yield* Effect.flip(objects.putPart(project, digest, uploadId, 2, body(bytes)))
      assert.strictEqual(late.error.code, "not_found")
    }).pipe(Effect.scoped))

  it.effect("a GC raced by a new reference to an object keeps it, and collects the rest", () =>
    Effect.gen(function*() {
      const objects = yield* ObjectsService
      const gc = yield* GcService
      const project = yield* scope
      const kept = bytesOf("kept by a racing ref")
      const lost = bytesOf("nobody wants me")
      for (const bytes of [kept, lost]) yield* objects.put(project, digestOf(bytes), body(bytes))
      // Past the grace period: both are collectable when the collection reads the objects.
      yield* TestClock.adjust(Duration.days(2))
      const report = yield* gc.report(project)
      assert.deepStrictEqual(report.report.collectable.count, 2)
      race.digest = digestOf(kept)
      const collected = yield* gc.collect(project, { dryRun: false })
      assert.deepStrictEqual(collected.digests, [digestOf(lost)])
      const opened = yield* objects.open(project, digestOf(kept))
      assert.strictEqual(opened.object.size, kept.length)
      const gone = yield* Effect.flip(objects.open(project, digestOf(lost)))
      assert.strictEqual(gone.error.code, "object_missing")
    }))
})
