/**
 * Job logs (run-state.md §3): appends are lease-fenced (the run is locked and the caller's lease checked, as a
 * heartbeat is) and retry-safe by `seq` (the same content again is accepted, other content is 409); an attempt's log
 * is capped at 64 MiB (413). Reads assemble the chunks in `seq` order from a byte offset.
 */
import {
  Conflict,
  type JobKey,
  type JobLog,
  type LeaseLost,
  type LogChunk,
  type LogChunkInput,
  MAX_LOG_BYTES,
  MAX_LOG_CHUNK_BYTES,
  NotFound,
  PayloadTooLarge,
  wireError
} from "@cp/domain"
import { JobLogsRepo, type RunKey, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { currentDate } from "../platform/serviceKit.ts"
import { RunsService } from "./service.ts"

export class JobLogsService extends Context.Service<JobLogsService, {
  readonly append: (
    key: RunKey,
    jobId: JobKey,
    input: LogChunkInput
  ) => Effect.Effect<{ readonly chunk: LogChunk }, NotFound | LeaseLost | Conflict | PayloadTooLarge>
  /** The attempt's log (default the latest) from byte `offset`, and its raw bytes for a `text/plain` answer. */
  readonly read: (
    key: RunKey,
    jobId: JobKey,
    query: { readonly attempt?: number; readonly offset?: number }
  ) => Effect.Effect<{ readonly log: JobLog; readonly bytes: Uint8Array }, NotFound>
}>()("@cp/server/JobLogsService") {
  static readonly layer = Layer.effect(
    JobLogsService,
    Effect.gen(function*() {
      const logs = yield* JobLogsRepo
      const runs = yield* RunsService
      const tx = yield* Transactor
      return JobLogsService.of({
        append: Effect.fn("JobLogs.append")(function*(key, jobId, input) {
          const bytes = Buffer.byteLength(input.content, "utf8")
          if (bytes > MAX_LOG_CHUNK_BYTES) {
            return yield* wireError(PayloadTooLarge, "A log chunk holds at most 1 MiB", {
              limit: MAX_LOG_CHUNK_BYTES,
              bytes
            })
          }
          const now = yield* currentDate
          return yield* tx.withTransaction(Effect.gen(function*() {
            const { job } = yield* runs.requireLease(key, jobId, input)
            const logKey = { runId: key.runId, jobId, attempt: job.attempt }
            const existing = yield* logs.find({ ...logKey, seq: input.seq })
            const totals = yield* logs.totals(logKey)
            const chunk = (totalBytes: number): LogChunk => ({
              jobId,
              attempt: job.attempt,
              seq: input.seq,
              bytes,
              totalBytes
            })
            if (Option.isSome(existing)) {
              if (existing.value.content === input.content) return { chunk: chunk(totals.bytes) }
              return yield* wireError(Conflict, "This seq was appended with other content", { seq: input.seq })
            }
            if (totals.bytes + bytes > MAX_LOG_BYTES) {
              return yield* wireError(PayloadTooLarge, "A job attempt's log holds at most 64 MiB", {
                limit: MAX_LOG_BYTES,
                bytes: totals.bytes
              })
            }
            yield* logs.insert({ ...logKey, seq: input.seq, bytes, content: input.content, createdAt: now })
            return { chunk: chunk(totals.bytes + bytes) }
          }))
        }),

        read: Effect.fn("JobLogs.read")(function*(key, jobId, query) {
          const { jobs } = yield* runs.jobs(key)
          const job = jobs.find((candidate) => candidate.jobId === jobId)
          if (job === undefined) return yield* wireError(NotFound, "Job not found", { runId: key.runId, jobId })
          const attempt = query.attempt ?? Math.max(job.attempt, 1)
          const chunks = yield* logs.chunks({ runId: key.runId, jobId, attempt })
          const whole = Buffer.concat(chunks.map((chunk) => Buffer.from(chunk.content, "utf8")))
          const bytes = whole.subarray(Math.min(query.offset ?? 0, whole.length))
          return {
            log: {
              jobId,
              attempt,
              bytes: whole.length,
              chunks: chunks.length,
              complete: attempt < job.attempt || (attempt === job.attempt && job.status !== "running"),
              content: bytes.toString("utf8")
            },
            bytes
          }
        })
      })
    })
  )
}
