/**
 * Garbage collection of a project's objects (run-state.md §7). Roots: current refs, the catalog head and its last 10
 * history entries, job outputs that are digests, of runs of the last 30 days, and every object used (written, read,
 * asked about, referenced) within `GC_GRACE_SECONDS`; reachability follows each object's top-level `references`
 * transitively. A report computes the split; a collection (a dry run unless `dryRun: false`) deletes the collectable
 * in batches, referrers before what they reference, each batch in one transaction whose delete re-checks every
 * object: one used since the collection started (a racing ref write or upload marks it used, holding its row) or
 * still referenced is kept.
 */
import {
  type Digest,
  type GcCollectInput,
  type GcCollection,
  type GcReport,
  type NotFound,
  type Tally
} from "@cp/domain"
import { type GcEntry, ObjectsRepo, ProjectsRepo, RefsRepo, RunsRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../platform/config.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"
import type { ProjectScope } from "./service.ts"

/** The catalog head's latest history entries that are roots (the head itself is one too). */
export const HEAD_HISTORY_ROOTS = 10
/** Job outputs of runs this recent are roots. */
export const OUTPUT_ROOT_DAYS = 30
/** Objects deleted per transaction. */
export const GC_BATCH = 500
/** Digests a report samples. */
export const GC_SAMPLE = 100

/** The reachable and the collectable objects of a project at `now`. */
export interface GcSplit {
  readonly entries: ReadonlyArray<GcEntry>
  readonly reachable: ReadonlySet<string>
  readonly collectable: ReadonlyArray<GcEntry>
}

const tally = (entries: ReadonlyArray<GcEntry>): Tally => ({
  count: entries.length,
  bytes: entries.reduce((sum, entry) => sum + entry.size, 0)
})

/** Everything reachable from `roots` through `references`, among the stored `entries`. */
export const reachableFrom = (entries: ReadonlyArray<GcEntry>, roots: Iterable<string>): Set<string> => {
  const byDigest = new Map(entries.map((entry) => [entry.digest as string, entry]))
  const reached = new Set<string>()
  const queue = Array.from(roots)
  while (queue.length > 0) {
    const digest = queue.pop()
    if (digest === undefined || reached.has(digest)) continue
    const entry = byDigest.get(digest)
    if (entry === undefined) continue
    reached.add(digest)
    queue.push(...entry.refersTo)
  }
  return reached
}

/**
 * The collectable objects in deletion order, as levels: no object of a level references another of the same or a
 * later level, so each level's referrers are gone before it is deleted.
 */
export const deletionLevels = (collectable: ReadonlyArray<GcEntry>): ReadonlyArray<ReadonlyArray<GcEntry>> => {
  const remaining = new Map(collectable.map((entry) => [entry.digest as string, entry]))
  const levels: Array<Array<GcEntry>> = []
  while (remaining.size > 0) {
    const referenced = new Set<string>()
    for (const entry of remaining.values()) for (const digest of entry.refersTo) referenced.add(digest)
    const level = Array.from(remaining.values()).filter((entry) => !referenced.has(entry.digest))
    // Content addressing admits no cycles; should one appear, the rest waits for another collection.
    if (level.length === 0) break
    for (const entry of level) remaining.delete(entry.digest)
    levels.push(level)
  }
  return levels
}

export class GcService extends Context.Service<GcService, {
  readonly report: (scope: ProjectScope) => Effect.Effect<{ readonly report: GcReport }, NotFound>
  readonly collect: (scope: ProjectScope, input: GcCollectInput) => Effect.Effect<GcCollection, NotFound>
}>()("@cp/server/GcService") {
  static readonly layer = Layer.effect(
    GcService,
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const runs = yield* RunsRepo
      const refs = yield* RefsRepo
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const config = yield* AppConfig
      const graceMs = config.gcGraceSeconds * 1000

      /**
       * The named roots: the project's current refs, its catalog head and the last `HEAD_HISTORY_ROOTS` entries of its
       * history, and job outputs of recent runs that name objects.
       */
      const namedRoots = (scope: ProjectScope, now: Date) =>
        Effect.gen(function*() {
          const [outputs, current, head, history] = yield* Effect.all([
            runs.outputDigests({
              projectId: scope.projectId,
              since: new Date(now.getTime() - OUTPUT_ROOT_DAYS * 24 * 60 * 60 * 1000)
            }),
            refs.list(scope.projectId, ""),
            refs.head(scope.projectId),
            refs.history(scope.projectId, { limit: HEAD_HISTORY_ROOTS })
          ])
          return [
            ...outputs,
            ...current.map((ref) => ref.digest),
            ...Option.toArray(head).map((row) => row.digest),
            ...history.map((row) => row.digest)
          ]
        })

      const split = (scope: ProjectScope, now: Date) =>
        Effect.gen(function*() {
          const entries = yield* objects.gcEntries(scope.projectId)
          const recent = entries.filter((entry) => entry.lastAccessedAt.getTime() >= now.getTime() - graceMs)
          const roots = [...(yield* namedRoots(scope, now)), ...recent.map((entry) => entry.digest)]
          const reachable = reachableFrom(entries, roots)
          const collectable = entries.filter((entry) => !reachable.has(entry.digest))
          return { entries, reachable, collectable } satisfies GcSplit
        })

      /** Deletes one batch, re-checking inside the transaction; the digests and bytes it deleted. */
      const deleteBatch = (scope: ProjectScope, batch: ReadonlyArray<GcEntry>, startedAt: Date) =>
        tx.withTransaction(Effect.gen(function*() {
          const roots = new Set(yield* namedRoots(scope, startedAt))
          const collected = yield* objects.deleteCollectable({
            projectId: scope.projectId,
            digests: batch.map((entry) => entry.digest).filter((digest) => !roots.has(digest)),
            startedAt
          })
          yield* objects.deleteBlobs(collected.flatMap((object) => object.blobs.map((blob) => blob.id)))
          return collected
        }))

      return GcService.of({
        report: Effect.fn("Gc.report")(function*(scope) {
          yield* findProject(projects, scope.orgId, scope.projectId)
          const now = yield* currentDate
          const { collectable, entries, reachable } = yield* split(scope, now)
          return {
            report: {
              objects: tally(entries),
              reachable: tally(entries.filter((entry) => reachable.has(entry.digest))),
              collectable: tally(collectable),
              sample: collectable.slice(0, GC_SAMPLE).map((entry) => entry.digest),
              graceSeconds: config.gcGraceSeconds,
              computedAt: now
            }
          }
        }),

        collect: Effect.fn("Gc.collect")(function*(scope, input) {
          yield* findProject(projects, scope.orgId, scope.projectId)
          const startedAt = yield* currentDate
          const dryRun = input.dryRun ?? true
          const { collectable } = yield* split(scope, startedAt)
          const chosen = input.limit === undefined ? collectable : collectable.slice(0, input.limit)
          if (dryRun) {
            return { dryRun, collected: tally(chosen), digests: chosen.map((entry) => entry.digest) }
          }
          const digests: Array<Digest> = []
          let bytes = 0
          for (const level of deletionLevels(chosen)) {
            for (let i = 0; i < level.length; i += GC_BATCH) {
              const collected = yield* deleteBatch(scope, level.slice(i, i + GC_BATCH), startedAt)
              for (const object of collected) {
                digests.push(object.digest)
                bytes += object.size
              }
            }
          }
          return { dryRun, collected: { count: digests.length, bytes }, digests }
        })
      })
    })
  )
}
