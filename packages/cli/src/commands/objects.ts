/**
 * Object store and GC commands (run-state.md §4, §7): `objects put <project> <file>` (hashed first, then streamed; a
 * file over 64 MiB goes up as an upload of 64 MiB parts), `objects get <project> <digest> [--output]` (streamed to the
 * file or stdout), `objects missing <project> <digest…>`, and `gc report|collect <project>` (collect is a dry run
 * unless `--execute`, which asks unless `--yes`).
 */
import { Digest, type GcCollection, type GcReport, MAX_OBJECT_PUT_BYTES, type StoredObject } from "@cp/domain"
import { Console, Effect, Option, Stream } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { createHash } from "node:crypto"
import { createReadStream, createWriteStream, statSync } from "node:fs"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import { confirm, resolveProject, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

const projectArgument = Argument.String("project").pipe(Argument.withDescription("The project's id (prj_…) or slug"))
const digestArgument = Argument.String("digest").pipe(
  Argument.withSchema(Digest),
  Argument.withDescription("The object's digest (sha256:…)")
)

const objectColumns: Columns<StoredObject> = {
  digest: (object) => object.digest,
  size: (object) => String(object.size),
  created: (object) => object.createdAt,
  lastAccessed: (object) => object.lastAccessedAt
}

const fileFailure = (path: string) => (error: unknown) =>
  new CliFailure({ code: "usage", message: `${path}: ${error instanceof Error ? error.message : String(error)}` })

/** Bytes `[start, end)` of a file as a stream, read as it is sent. */
const fileStream = (path: string, start = 0, end?: number) =>
  Stream.fromAsyncIterable(
    createReadStream(path, { start, ...(end === undefined ? {} : { end: end - 1 }) }) as AsyncIterable<Uint8Array>,
    fileFailure(path)
  )

/** The file's size and digest, read once. */
const hashFile = (path: string) =>
  Effect.gen(function*() {
    const size = yield* Effect.try({ try: () => statSync(path).size, catch: fileFailure(path) })
    const hash = createHash("sha256")
    yield* Stream.runForEach(fileStream(path), (bytes) => Effect.sync(() => hash.update(bytes)))
    return { size, digest: Digest.make(`sha256:${hash.digest("hex")}`) }
  })

const objectsPut = Command.make(
  "put",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    file: Argument.String("file").pipe(Argument.withDescription("The file to store"))
  },
  Effect.fn("cpctl.objects.put")(function*({ file, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const { digest, size } = yield* hashFile(file)
    const params = { orgId: workspace, projectId, digest }
    if (size <= MAX_OBJECT_PUT_BYTES) {
      const { object } = yield* api.objects.put({ params, payload: fileStream(file) })
      return yield* printResult(object, (object) => renderTable(objectColumns, [object]))
    }
    const started = yield* api.objects.startUpload({ params, payload: { size } })
    if ("object" in started) return yield* printResult(started.object, (o) => renderTable(objectColumns, [o]))
    const uploadId = started.upload.id
    for (let start = 0, partNumber = 1; start < size; start += MAX_OBJECT_PUT_BYTES, partNumber++) {
      yield* api.objects.putPart({
        params: { ...params, uploadId, partNumber },
        payload: fileStream(file, start, Math.min(size, start + MAX_OBJECT_PUT_BYTES))
      })
    }
    const { object } = yield* api.objects.completeUpload({ params: { ...params, uploadId } })
    yield* printResult(object, (object) => renderTable(objectColumns, [object]))
  })
).pipe(
  Command.withDescription("Store a file as an object (hashed, then streamed; uploads in parts past 64 MiB)"),
  withClient
)

const objectsGet = Command.make(
  "get",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    digest: digestArgument,
    output: Flag.String("output").pipe(
      Flag.withAlias("o"),
      Flag.withDescription("Write the bytes to this file (default: stdout)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.objects.get")(function*({ digest, output, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const body = yield* api.objects.get({ params: { orgId: workspace, projectId, digest } })
    const sink = Option.isSome(output) ? createWriteStream(output.value) : process.stdout
    const hash = createHash("sha256")
    yield* Stream.runForEach(body, (bytes) =>
      Effect.callback<void>((resume) => {
        hash.update(bytes)
        if (sink.write(bytes)) resume(Effect.void)
        else sink.once("drain", () => resume(Effect.void))
      })).pipe(Effect.mapError(() => new CliFailure({ code: "transfer_failed", message: "The download broke off" })))
    if (Option.isSome(output)) {
      yield* Effect.callback<void>((resume) => {
        sink.end(() => resume(Effect.void))
      })
    }
    // The bytes are checked against their name, as the server checked them on the way in.
    const actual = `sha256:${hash.digest("hex")}`
    if (actual !== digest) {
      return yield* new CliFailure({ code: "digest_mismatch", message: `Received ${actual}, not ${digest}` })
    }
  })
).pipe(Command.withDescription("Write an object's bytes to a file or stdout (verified against its digest)"), withClient)

const objectsMissing = Command.make(
  "missing",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    digests: digestArgument.pipe(Argument.atLeast(1))
  },
  Effect.fn("cpctl.objects.missing")(function*({ digests, project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const { missing } = yield* api.objects.missing({ params: { orgId: workspace, projectId }, payload: { digests } })
    yield* printResult(missing, (missing) => missing.length === 0 ? "None missing." : missing.join("\n"))
  })
).pipe(Command.withDescription("Print which of these digests the project does not store"), withClient)

/** `cpctl objects`. */
export const objects = Command.make("objects").pipe(
  Command.withDescription("Content-addressed objects of a project"),
  Command.withSubcommands([objectsPut, objectsGet, objectsMissing])
)

const tallyText = (tally: { readonly count: number; readonly bytes: number }) => `${tally.count} (${tally.bytes} B)`

const reportText = (report: GcReport) =>
  renderTable({
    objects: (r: GcReport) => tallyText(r.objects),
    reachable: (r) => tallyText(r.reachable),
    collectable: (r) => tallyText(r.collectable),
    graceSeconds: (r) => String(r.graceSeconds),
    computedAt: (r) => r.computedAt
  }, [report])

const gcReport = Command.make(
  "report",
  { workspace: workspaceFlag, project: projectArgument },
  Effect.fn("cpctl.gc.report")(function*({ project, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const { report } = yield* api.objects.gcReport({ params: { orgId: workspace, projectId } })
    yield* printResult(report, reportText)
  })
).pipe(Command.withDescription("What garbage collection would collect in a project"), withClient)

const gcCollect = Command.make(
  "collect",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    execute: Flag.Boolean("execute").pipe(
      Flag.withDescription("Delete for real (default: a dry run that deletes nothing)"),
      Flag.withDefault(false)
    ),
    limit: Flag.Int("limit").pipe(Flag.withDescription("Collect at most this many objects"), Flag.optional),
    yes: yesFlag
  },
  Effect.fn("cpctl.gc.collect")(function*({ execute, limit, project, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    if (execute) yield* confirm(yes, `Delete the unreachable objects of ${project}?`)
    const result = yield* api.objects.gcCollect({
      params: { orgId: workspace, projectId },
      payload: { dryRun: !execute, ...(Option.isSome(limit) ? { limit: limit.value } : {}) }
    })
    yield* printResult(result, (collection: GcCollection) =>
      [
        `${collection.dryRun ? "Would collect" : "Collected"} ${tallyText(collection.collected)}`,
        ...collection.digests
      ].join("\n"))
    if (!execute) yield* Console.error("Dry run: nothing was deleted (--execute deletes).")
  })
).pipe(Command.withDescription("Collect unreachable objects (a dry run unless --execute)"), withClient)

/** `cpctl gc`. */
export const gc = Command.make("gc").pipe(
  Command.withDescription("Garbage collection of a project's objects"),
  Command.withSubcommands([gcReport, gcCollect])
)
