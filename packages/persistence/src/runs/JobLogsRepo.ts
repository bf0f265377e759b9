/**
 * Job logs: each attempt's chunks keyed by `seq`, their content kept as text. Appends happen with the run row locked
 * (the lease check), so the size check and the insert of one attempt never race.
 */
import type { OrgId } from "@cp/domain/ids"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { atomically } from "../Memory.ts"
import { JobLogChunkRow, type JobLogKey } from "./rows.ts"
import { RunsRepo } from "./RunsRepo.ts"

const Totals = Schema.Struct({ bytes: Schema.NumberFromString, chunks: Schema.NumberFromString })

export class JobLogsRepo extends Context.Service<JobLogsRepo, {
  /** The chunk of this attempt with this `seq`, if stored. */
  readonly find: (key: JobLogKey & { readonly seq: number }) => Effect.Effect<Option.Option<JobLogChunkRow>>
  /** Stores a chunk (the caller checked that its `seq` is free). */
  readonly insert: (chunk: JobLogChunkRow) => Effect.Effect<void>
  /** The attempt's stored size in bytes and its number of chunks. */
  readonly totals: (key: JobLogKey) => Effect.Effect<{ readonly bytes: number; readonly chunks: number }>
  /** The attempt's chunks in `seq` order. */
  readonly chunks: (key: JobLogKey) => Effect.Effect<ReadonlyArray<JobLogChunkRow>>
  /** The workspace's job log chunks: how many, and their bytes. */
  readonly usage: (orgId: OrgId) => Effect.Effect<{ readonly count: number; readonly bytes: number }>
}>()("@cp/persistence/runs/JobLogsRepo") {
  /** Memory chunks do not know their workspace: usage asks the runs repository for the workspace's runs. */
  static readonly memory = Layer.effect(
    JobLogsRepo,
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const chunks = new Map<string, JobLogChunkRow>()
      const keyOf = (key: JobLogKey, seq: number) => JSON.stringify([key.runId, key.jobId, key.attempt, seq])
      const of = (key: JobLogKey) =>
        Array.from(chunks.values()).filter((row) =>
          row.runId === key.runId && row.jobId === key.jobId && row.attempt === key.attempt
        ).sort((a, b) => a.seq - b.seq)
      return JobLogsRepo.of({
        find: (key) => Effect.sync(() => Option.fromUndefinedOr(chunks.get(keyOf(key, key.seq)))),
        insert: (chunk) =>
          atomically((changes) => Effect.sync(() => changes.set(chunks, keyOf(chunk, chunk.seq), chunk))),
        totals: (key) =>
          Effect.sync(() => {
            const rows = of(key)
            return { bytes: rows.reduce((sum, row) => sum + row.bytes, 0), chunks: rows.length }
          }),
        chunks: (key) => Effect.sync(() => of(key)),
        usage: (orgId) =>
          Effect.map(runs.list({ orgId, limit: Number.MAX_SAFE_INTEGER }), (rows) => {
            const ids = new Set(rows.map((row) => row.id))
            const mine = Array.from(chunks.values()).filter((row) => ids.has(row.runId))
            return { count: mine.length, bytes: mine.reduce((sum, row) => sum + row.bytes, 0) }
          })
      })
    })
  )

  static readonly sql = Layer.effect(
    JobLogsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const decodeChunks = Schema.decodeUnknownEffect(Schema.Array(JobLogChunkRow))
      const decodeTotals = Schema.decodeUnknownEffect(Schema.Array(Totals))
      const where = (key: JobLogKey) =>
        sql`run_id = ${key.runId} and job_id = ${key.jobId} and attempt = ${key.attempt}`
      return JobLogsRepo.of({
        find: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`select * from job_log_chunks where ${where(key)} and seq = ${key.seq}`,
            decodeChunks
          )).pipe(Effect.map((rows) => Option.fromUndefinedOr(rows[0]))),
        insert: (chunk) => Effect.orDie(sql`insert into job_log_chunks ${sql.insert(chunk)}`.pipe(Effect.asVoid)),
        totals: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select coalesce(sum(bytes), 0)::text as bytes, count(*)::text as chunks
              from job_log_chunks where ${where(key)}`,
            decodeTotals
          )).pipe(Effect.map((rows) => rows[0] ?? { bytes: 0, chunks: 0 })),
        chunks: (key) =>
          Effect.orDie(Effect.flatMap(
            sql`select * from job_log_chunks where ${where(key)} order by seq`,
            decodeChunks
          )),
        usage: (orgId) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select coalesce(sum(c.bytes), 0)::text as bytes, count(*)::text as chunks
              from job_log_chunks c join runs r on r.id = c.run_id where r.org_id = ${orgId}`,
            decodeTotals
          )).pipe(Effect.map((rows) => ({ count: rows[0]?.chunks ?? 0, bytes: rows[0]?.bytes ?? 0 })))
      })
    })
  )
}
