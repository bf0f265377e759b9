/**
 * Job logs (run-state.md §3): a job attempt's output appended in chunks by the runner holding its lease (retry-safe by
 * `seq`), read back assembled in `seq` order from a byte offset, as JSON or, with `Accept: text/plain`, as the raw
 * bytes. An attempt's log is capped at 64 MiB.
 */
import { Context, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict, LeaseLost, NotFound, PayloadTooLarge } from "./errors.ts"
import { ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { ContractVersionGate, JobKey, LeaseFence, RunId, StatePlaneRoute } from "./runs.ts"
import { requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Text } from "./text.ts"
import { Envelope } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** One chunk's content: at most 1 MiB of UTF-8. */
export const MAX_LOG_CHUNK_BYTES = 1024 * 1024
/** A job attempt's whole log: at most 64 MiB. */
export const MAX_LOG_BYTES = 64 * 1024 * 1024

export const LogChunkInput = Schema.Struct({
  ...LeaseFence.fields,
  seq: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 2_147_483_647 })),
  // UTF-16 length bounds the UTF-8 size loosely; the service checks the byte size (413 past 1 MiB).
  content: Text.check(Schema.isMaxLength(MAX_LOG_CHUNK_BYTES))
})
export type LogChunkInput = typeof LogChunkInput.Type

export const LogChunk = Schema.Struct({
  jobId: JobKey,
  attempt: Schema.Int,
  seq: Schema.Int,
  bytes: Schema.Int,
  totalBytes: Schema.Int
})
export type LogChunk = typeof LogChunk.Type

export const JobLog = Schema.Struct({
  jobId: JobKey,
  attempt: Schema.Int,
  bytes: Schema.Int,
  chunks: Schema.Int,
  complete: Schema.Boolean,
  content: Schema.String
})
export type JobLog = typeof JobLog.Type

const intParam = (minimum: number, description: string) =>
  Schema.optionalKey(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(minimum)).pipe(
      Schema.annotateEncoded({ description })
    )
  )

export const JobLogQuery = Schema.Struct({
  attempt: intParam(1, "The attempt whose log to read; the latest when absent"),
  offset: intParam(0, "The byte offset to read from; 0 when absent")
})

const logParams = { orgId: OrgRef, projectId: ProjectId, runId: RunId, jobId: JobKey }
const LOG = "/v1/organizations/:orgId/projects/:projectId/state/runs/:runId/logs/:jobId"

export class JobLogsApi extends HttpApiGroup.make("jobLogs")
  .add(
    HttpApiEndpoint.post("append", LOG, {
      params: logParams,
      payload: LogChunkInput,
      success: Envelope({ chunk: LogChunk }),
      error: [NotFound, LeaseLost, Conflict, PayloadTooLarge]
    }).annotateMerge(
      doc(
        "Append a chunk to a job's log",
        "Lease-fenced. The same `seq` with the same content is accepted again; other content is 409 `conflict`. A" +
          " chunk holds at most 1 MiB, an attempt's log 64 MiB (413 past it)."
      )
    ).annotateMerge(requires.permission("state.run.write")),
    HttpApiEndpoint.get("read", LOG, {
      params: logParams,
      query: JobLogQuery,
      success: Envelope({ log: JobLog }),
      error: NotFound
    }).annotateMerge(
      doc("Read a job's log", "Assembled in `seq` order from `offset`; with `Accept: text/plain` the raw bytes.")
    ).annotateMerge(requires.permission("state.run.read"))
  )
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Job logs", description: "Chunked job logs, lease-fenced" }))
{}
