/**
 * Runs, their jobs and each run's event log (run-state.md §2). A change locks the job rows it changes first
 * (`lockJob`, `select … for update`), so claims racing for one job from many runners and replicas see exactly one
 * winner while claims of other jobs go on in parallel; then, as its last step, it `advance`s the run row (counts and
 * event numbers moved in one update, which holds the run row only until the commit that follows). Locks are always
 * taken jobs first, run last, so no two changes wait on each other in a cycle. The lease sweep claims lapsed jobs with
 * `for update skip locked`, so replicas sweeping together never expire one lease twice.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { Statement } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import {
  type ExpiredLeases,
  type JobOfRun,
  type JobRow,
  JobRow as JobRowSchema,
  type JobsOfRun,
  type MemoKey,
  type OutputsSince,
  type RunAdvance,
  type RunEventRow,
  RunEventRow as RunEventRowSchema,
  type RunEventsWindow,
  type RunKey,
  type RunRow,
  RunRow as RunRowSchema,
  type RunsPage
} from "./rows.ts"

/** An object digest, as job outputs name objects. */
const DIGEST = /^sha256:[0-9a-f]{64}$/

export class RunsRepo extends Context.Service<RunsRepo, {
  /** The run and its jobs; `UniqueViolation` on `runs_pkey` when the run id is taken. */
  readonly insert: (run: RunRow, jobs: ReadonlyArray<JobRow>) => Effect.Effect<void, UniqueViolation>
  /** The run of this project (a run of another project or workspace is None). */
  readonly find: (key: RunKey) => Effect.Effect<Option.Option<RunRow>>
  /** `find`, holding the run row locked until the transaction ends: call inside `withTransaction`. */
  readonly lock: (key: RunKey) => Effect.Effect<Option.Option<RunRow>>
  /** Up to `limit` of the project's runs strictly after `after`, newest first. */
  readonly list: (page: RunsPage) => Effect.Effect<ReadonlyArray<RunRow>>
  /** The job of the run, locked until the transaction ends (`select … for update`). */
  readonly lockJob: (key: JobOfRun) => Effect.Effect<Option.Option<JobRow>>
  /** Every job of the run, in declared order, locked (in that order) until the transaction ends. */
  readonly lockJobs: (runId: RunRow["id"]) => Effect.Effect<ReadonlyArray<JobRow>>
  /**
   * In one statement: moves the run's job counts by `delta`, appends `events` to its log under the next sequence
   * numbers, sets `startedAt`/`canceledAt` where not set yet, on the run row as the last committed change left it;
   * the run as it now is (its `nextSeq` past the appended events), locked until the transaction ends. None (nothing
   * appended) when the run does not exist.
   */
  readonly advance: (request: RunAdvance) => Effect.Effect<Option.Option<RunRow>>
  /** Stores the run's status, counts, times and next event number. */
  readonly save: (run: RunRow) => Effect.Effect<void>
  /** Every job of the run, in declared order. */
  readonly jobs: (runId: RunRow["id"]) => Effect.Effect<ReadonlyArray<JobRow>>
  /** Pending jobs of the run whose dependencies all succeeded or were memoized, in declared order. */
  readonly runnable: (runId: RunRow["id"]) => Effect.Effect<ReadonlyArray<JobRow>>
  /** The named jobs of the run that exist, in declared order. */
  readonly jobsNamed: (request: JobsOfRun) => Effect.Effect<ReadonlyArray<JobRow>>
  /** Stores each job's state. */
  readonly saveJobs: (jobs: ReadonlyArray<JobRow>) => Effect.Effect<void>
  /** A succeeded hermetic job of the project with this id and input hash, if any (the oldest). */
  readonly findMemo: (key: MemoKey) => Effect.Effect<Option.Option<JobRow>>
  /** Appends entries to runs' event logs. */
  readonly appendEvents: (events: ReadonlyArray<RunEventRow>) => Effect.Effect<void>
  /** Up to `limit` entries of the run's log after sequence number `after`, oldest first. */
  readonly events: (window: RunEventsWindow) => Effect.Effect<ReadonlyArray<RunEventRow>>
  /**
   * Up to `limit` running jobs whose lease expired or whose timeout passed by `now`, by run and declared order, locked
   * until the transaction ends; jobs another transaction holds are skipped (`for update skip locked`).
   */
  readonly claimExpired: (request: ExpiredLeases) => Effect.Effect<ReadonlyArray<JobRow>>
  /** The output values of the project's jobs, of runs created since `since`, that are object digests (GC roots). */
  readonly outputDigests: (request: OutputsSince) => Effect.Effect<ReadonlyArray<string>>
}>()("@cp/persistence/runs/RunsRepo") {
  static readonly memory = Layer.sync(RunsRepo, () => {
    const runs = new Map<string, RunRow>()
    const jobs = new Map<string, JobRow>()
    const events = new Map<string, RunEventRow>()
    const jobKey = (runId: string, jobId: string) => `${runId}/${jobId}`
    const runIn = ({ orgId, projectId, runId }: RunKey) =>
      Option.filter(
        Option.fromUndefinedOr(runs.get(runId)),
        (row) => row.orgId === orgId && row.projectId === projectId
      )
    const jobsOf = (runId: string) =>
      Array.from(jobs.values()).filter((row) => row.runId === runId).sort((a, b) => a.position - b.position)
    const isExpired = (job: JobRow, now: Date) =>
      job.status === "running" &&
      ((job.leaseExpiresAt !== null && job.leaseExpiresAt <= now) ||
        (job.timeoutSeconds !== null && job.startedAt !== null &&
          job.startedAt.getTime() + job.timeoutSeconds * 1000 <= now.getTime()))
    return RunsRepo.of({
      insert: (run, rows) =>
        atomically((changes) => {
          if (runs.has(run.id)) return Effect.fail(new UniqueViolation({ constraint: "runs_pkey" }))
          changes.set(runs, run.id, run)
          for (const row of rows) changes.set(jobs, jobKey(row.runId, row.jobId), row)
          return Effect.void
        }),
      find: (key) => Effect.sync(() => runIn(key)),
      lock: (key) => Effect.sync(() => runIn(key)),
      list: (page) =>
        Effect.sync(() =>
          windowOf(
            Array.from(runs.values()).filter((row) =>
              row.orgId === page.orgId && (page.projectId === undefined || row.projectId === page.projectId) &&
              (page.status === undefined || row.status === page.status) &&
              (page.environmentId === undefined || row.environmentId === page.environmentId)
            ),
            idPosition,
            page
          )
        ),
      lockJob: ({ jobId, runId }) => Effect.sync(() => Option.fromUndefinedOr(jobs.get(jobKey(runId, jobId)))),
      lockJobs: (runId) => Effect.sync(() => jobsOf(runId)),
      advance: ({ canceledAt, delta, events: entries, runId, startedAt }) =>
        atomically((changes) =>
          Effect.sync(() =>
            Option.map(Option.fromUndefinedOr(runs.get(runId)), (run) => {
              entries.forEach((entry, i) => {
                changes.set(events, `${runId}/${run.nextSeq + i}`, { ...entry, runId, seq: run.nextSeq + i })
              })
              const moved = (status: keyof RunRow["jobCounts"]) => run.jobCounts[status] + delta[status]
              const jobCounts = {
                pending: moved("pending"),
                running: moved("running"),
                succeeded: moved("succeeded"),
                failed: moved("failed"),
                timed_out: moved("timed_out"),
                memoized: moved("memoized"),
                canceled: moved("canceled")
              }
              const next: RunRow = {
                ...run,
                jobCounts,
                nextSeq: run.nextSeq + entries.length,
                startedAt: run.startedAt ?? startedAt,
                canceledAt: run.canceledAt ?? canceledAt
              }
              changes.set(runs, run.id, next)
              return next
            })
          )
        ),
      save: (run) => atomically((changes) => Effect.sync(() => changes.set(runs, run.id, run))),
      jobs: (runId) => Effect.sync(() => jobsOf(runId)),
      jobsNamed: ({ jobIds, runId }) => Effect.sync(() => jobsOf(runId).filter((row) => jobIds.includes(row.jobId))),
      runnable: (runId) =>
        Effect.sync(() => {
          const all = jobsOf(runId)
          const done = new Set(
            all.filter((row) => row.status === "succeeded" || row.status === "memoized").map((row) => row.jobId)
          )
          return all.filter((row) => row.status === "pending" && row.dependsOn.every((dep) => done.has(dep)))
        }),
      saveJobs: (rows) =>
        atomically((changes) =>
          Effect.sync(() => {
            for (const row of rows) changes.set(jobs, jobKey(row.runId, row.jobId), row)
          })
        ),
      findMemo: ({ jobId, jobInputHash, projectId }) =>
        Effect.sync(() =>
          Option.fromUndefinedOr(
            Array.from(jobs.values()).find((row) =>
              row.projectId === projectId && row.jobId === jobId && row.jobInputHash === jobInputHash &&
              row.hermetic && row.status === "succeeded"
            )
          )
        ),
      appendEvents: (rows) =>
        atomically((changes) =>
          Effect.sync(() => {
            for (const row of rows) changes.set(events, `${row.runId}/${row.seq}`, row)
          })
        ),
      events: ({ after, limit, runId }) =>
        Effect.sync(() =>
          Array.from(events.values()).filter((row) => row.runId === runId && row.seq > after)
            .sort((a, b) => a.seq - b.seq).slice(0, limit)
        ),
      claimExpired: ({ limit, now }) =>
        Effect.sync(() =>
          Array.from(jobs.values()).filter((job) => isExpired(job, now))
            .sort((a, b) => a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : a.position - b.position)
            .slice(0, limit)
        ),
      outputDigests: ({ projectId, since }) =>
        Effect.sync(() => {
          const found = new Set<string>()
          for (const run of runs.values()) {
            if (run.projectId !== projectId || run.createdAt < since) continue
            for (const job of jobsOf(run.id)) {
              for (const value of Object.values(job.outputs)) if (DIGEST.test(value)) found.add(value)
            }
          }
          return Array.from(found)
        })
    })
  })

  static readonly sql = Layer.effect(
    RunsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const decodeRuns = Schema.decodeUnknownEffect(Schema.Array(RunRowSchema))
      const decodeJobs = Schema.decodeUnknownEffect(Schema.Array(JobRowSchema))
      const decodeDigests = Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({ digest: Schema.String })))
      const decodeEvents = Schema.decodeUnknownEffect(Schema.Array(RunEventRowSchema))
      const runs = (statement: Statement.Statement<unknown>) => Effect.orDie(Effect.flatMap(statement, decodeRuns))
      const firstRun = (statement: Statement.Statement<unknown>) =>
        Effect.map(runs(statement), (rows) => Option.fromUndefinedOr(rows[0]))
      const jobRows = (statement: Statement.Statement<unknown>) => Effect.orDie(Effect.flatMap(statement, decodeJobs))
      const jobColumns = (row: JobRow) => ({
        ...row,
        dependsOn: sql.json(row.dependsOn),
        outputs: sql.json(row.outputs)
      })
      const runIs = ({ orgId, projectId, runId }: RunKey) =>
        sql`id = ${runId} and org_id = ${orgId} and project_id = ${projectId}`
      return RunsRepo.of({
        insert: (run, rows) =>
          Effect.gen(function*() {
            yield* sql`insert into runs ${
              sql.insert({
                ...run,
                trigger: sql.json(run.trigger),
                metadata: sql.json(run.metadata),
                createdBy: sql.json(run.createdBy),
                jobCounts: sql.json(run.jobCounts)
              })
            }`
            // Bounded batches: PostgreSQL takes at most 65535 parameters in one statement.
            for (let i = 0; i < rows.length; i += 200) {
              const [first, ...rest] = rows.slice(i, i + 200).map(jobColumns)
              if (first !== undefined) yield* sql`insert into jobs ${sql.insert([first, ...rest])}`
            }
          }).pipe(uniqueViolationOrDie),
        find: (key) => firstRun(sql`select * from runs where ${runIs(key)}`),
        lock: (key) => firstRun(sql`select * from runs where ${runIs(key)} for update`),
        list: ({ environmentId, orgId, projectId, status, ...window }) =>
          runs(keysetQuery(sql, sql`select * from runs`, [
            sql`org_id = ${orgId}`,
            ...(projectId === undefined ? [] : [sql`project_id = ${projectId}`]),
            ...(status === undefined ? [] : [sql`status = ${status}`]),
            ...(environmentId === undefined ? [] : [sql`environment_id = ${environmentId}`])
          ], window)),
        lockJob: ({ jobId, runId }) =>
          Effect.map(
            jobRows(sql`select * from jobs where run_id = ${runId} and job_id = ${jobId} for update`),
            (rows) => Option.fromUndefinedOr(rows[0])
          ),
        lockJobs: (runId) => jobRows(sql`select * from jobs where run_id = ${runId} order by position for update`),
        // Each count moves by its delta on the row as it is when the lock is granted (an update re-reads a row another
        // transaction changed meanwhile), so changes of different jobs committing in any order add up; the entries are
        // numbered from that row in the same statement, so the run row is held only from here to the commit.
        advance: ({ canceledAt, delta, events: entries, runId, startedAt }) =>
          firstRun(sql`
            with advanced as (
              update runs set
              job_counts = jsonb_build_object(
                'pending', (job_counts ->> 'pending')::int + ${delta.pending},
                'running', (job_counts ->> 'running')::int + ${delta.running},
                'succeeded', (job_counts ->> 'succeeded')::int + ${delta.succeeded},
                'failed', (job_counts ->> 'failed')::int + ${delta.failed},
                'timed_out', (job_counts ->> 'timed_out')::int + ${delta.timed_out},
                'memoized', (job_counts ->> 'memoized')::int + ${delta.memoized},
                'canceled', (job_counts ->> 'canceled')::int + ${delta.canceled}),
              next_seq = next_seq + ${entries.length},
              started_at = coalesce(started_at, ${startedAt}),
              canceled_at = coalesce(canceled_at, ${canceledAt})
              where id = ${runId}
              returning *
            ), logged as (
              insert into run_events (run_id, seq, type, job_id, attempt, runner_id, at, data)
              select a.id, a.next_seq - ${entries.length} + e.i, e.type, e.job_id, e.attempt, e.runner_id, e.at, e.data
              from advanced a, jsonb_to_recordset(${
            sql.json(entries.map((entry, i) => ({
              i,
              type: entry.type,
              job_id: entry.jobId,
              attempt: entry.attempt,
              runner_id: entry.runnerId,
              at: entry.at.toISOString(),
              data: entry.data
            })))
          }) as e(i integer, type text, job_id text, attempt integer, runner_id text, at timestamptz, data jsonb)
            )
            select * from advanced`),
        save: (run) =>
          Effect.orDie(sql`
            update runs set status = ${run.status}, job_counts = ${sql.json(run.jobCounts)}, next_seq = ${run.nextSeq},
              started_at = ${run.startedAt}, finished_at = ${run.finishedAt}, canceled_at = ${run.canceledAt}
            where id = ${run.id}`.pipe(Effect.asVoid)),
        jobs: (runId) => jobRows(sql`select * from jobs where run_id = ${runId} order by position`),
        runnable: (runId) =>
          jobRows(sql`
            select j.* from jobs j
            where j.run_id = ${runId} and j.status = 'pending' and not exists (
              select 1 from jobs d
              where d.run_id = j.run_id and d.job_id in (select jsonb_array_elements_text(j.depends_on))
                and d.status not in ('succeeded', 'memoized'))
            order by j.position`),
        jobsNamed: ({ jobIds, runId }) =>
          jobIds.length === 0 ? Effect.succeed([]) : jobRows(
            sql`select * from jobs where run_id = ${runId} and job_id in ${sql.in(jobIds)} order by position`
          ),
        saveJobs: (rows) =>
          Effect.orDie(Effect.forEach(rows, (row) =>
            sql`
              update jobs set status = ${row.status}, attempt = ${row.attempt}, lease_epoch = ${row.leaseEpoch},
                runner_id = ${row.runnerId}, lease_expires_at = ${row.leaseExpiresAt},
                lease_seconds = ${row.leaseSeconds}, hermetic = ${row.hermetic},
                job_input_hash = ${row.jobInputHash}, exit_code = ${row.exitCode}, outputs = ${sql.json(row.outputs)},
                error_message = ${row.errorMessage}, started_at = ${row.startedAt}, finished_at = ${row.finishedAt},
                updated_at = ${row.updatedAt}
              where run_id = ${row.runId} and job_id = ${row.jobId}`, { discard: true })),
        findMemo: ({ jobId, jobInputHash, projectId }) =>
          Effect.map(
            jobRows(sql`
              select * from jobs
              where project_id = ${projectId} and job_id = ${jobId} and job_input_hash = ${jobInputHash}
                and status = 'succeeded' and hermetic
              order by finished_at limit 1`),
            (rows) => Option.fromUndefinedOr(rows[0])
          ),
        appendEvents: (rows) => {
          const [first, ...rest] = rows.map((row) => ({ ...row, data: sql.json(row.data) }))
          return first === undefined
            ? Effect.void
            : Effect.orDie(sql`insert into run_events ${sql.insert([first, ...rest])}`.pipe(Effect.asVoid))
        },
        events: ({ after, limit, runId }) =>
          Effect.orDie(Effect.flatMap(
            sql`select * from run_events where run_id = ${runId} and seq > ${after} order by seq limit ${limit}`,
            decodeEvents
          )),
        claimExpired: ({ limit, now }) =>
          jobRows(sql`
            select * from jobs
            where status = 'running' and (lease_expires_at <= ${now}
              or (timeout_seconds is not null and started_at + timeout_seconds * interval '1 second' <= ${now}))
            order by run_id, position
            limit ${limit}
            for update skip locked`),
        outputDigests: ({ projectId, since }) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select distinct output.value as digest
              from jobs j join runs r on r.id = j.run_id, jsonb_each_text(j.outputs) output
              where j.project_id = ${projectId} and r.created_at >= ${since}
                and output.value ~ '^sha256:[0-9a-f]{64}$'`,
            decodeDigests
          )).pipe(Effect.map((rows) => rows.map((row) => row.digest)))
      })
    })
  )
}
