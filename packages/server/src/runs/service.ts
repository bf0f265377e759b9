/**
 * Runs and jobs (run-state.md §2): idempotent create by the client's run ULID, reads, claims with every answer in the
 * spec's order, epoch-fenced heartbeats and completes, cancel, and the run's own event log. Every change happens in one
 * transaction that first locks the job rows it changes (one job for a lease call, every job for a cancel), settles
 * lapsed leases among them (a request that meets an expired lease treats it as the sweep would), checks, writes the
 * jobs and, last, advances the run row (counts and event numbers, then its status from them). Runners racing for one
 * job from any replica see exactly one winner; runners on different jobs of one run wait on each other only for that
 * last update and the commit. Run creation, cancellation and finish also go to the workspace event log.
 */
import {
  type Actor,
  AlreadyClaimed,
  type CancelInput,
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  Conflict,
  DepsNotReady,
  type EnvironmentId,
  type Frontier,
  type HeartbeatInput,
  type Job,
  type JobCounts,
  type JobKey,
  type Lease,
  type LeaseFence,
  LeaseLost,
  NotFound,
  type Paged,
  type ProjectId,
  type ResolvedWorkspace,
  type Run,
  type RunEvent,
  type RunEventType,
  type RunInput,
  type RunStatus,
  RunTerminal,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  EnvironmentsRepo,
  idPosition,
  type JobRow,
  ProjectsRepo,
  type RunEventEntry,
  type RunEventRow,
  type RunKey,
  type RunRow,
  RunsRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option, Result, Schema } from "effect"
import { sha256Hex } from "../platform/crypto.ts"
import { type EventActor, eventActorOf, EventLog } from "../platform/events.ts"
import { canonicalJson } from "../platform/idempotency.ts"
import { Cursors, DEFAULT_PAGE_SIZE, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"
import {
  blockedJobs,
  countJobs,
  emptyCounts,
  graphProblems,
  hasLapsed,
  lapseReason,
  runnableJobs,
  runStatusOf,
  waitingOn
} from "./rules.ts"

export const DEFAULT_LEASE_SECONDS = 60

const runNotFound = (runId: string) => wireError(NotFound, "Run not found", { runId })
const jobNotFound = (runId: string, jobId: string) => wireError(NotFound, "Job not found", { runId, jobId })

/** The API's run from its row. */
export const toRun = (row: RunRow): Run => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  environmentId: row.environmentId,
  status: row.status,
  trigger: row.trigger,
  metadata: row.metadata,
  createdBy: row.createdBy,
  jobCounts: row.jobCounts,
  createdAt: row.createdAt,
  startedAt: row.startedAt,
  finishedAt: row.finishedAt,
  canceledAt: row.canceledAt
})

/** The API's job from its row. */
export const toJob = (row: JobRow): Job => ({
  jobId: row.jobId,
  runId: row.runId,
  name: row.name,
  dependsOn: row.dependsOn,
  status: row.status,
  attempt: row.attempt,
  leaseEpoch: row.leaseEpoch,
  runnerId: row.runnerId,
  leaseExpiresAt: row.leaseExpiresAt,
  timeoutSeconds: row.timeoutSeconds,
  hermetic: row.hermetic,
  jobInputHash: row.jobInputHash,
  exitCode: row.exitCode,
  outputs: row.outputs,
  errorMessage: row.errorMessage,
  startedAt: row.startedAt,
  finishedAt: row.finishedAt,
  updatedAt: row.updatedAt
})

const toEvent = (row: RunEventRow): RunEvent => ({
  seq: row.seq,
  type: row.type,
  jobId: row.jobId,
  attempt: row.attempt,
  runnerId: row.runnerId,
  at: row.at,
  data: row.data
})

const createdByOf = (actor: Actor) => {
  const { actorId, actorType } = eventActorOf(actor)
  return { id: actorId, kind: actorType }
}

/**
 * One change to a run: the run as read when it began (not locked; after `commit`, the run as stored), the jobs it
 * locked (and, for a claim, that job's dependencies as read), how the job counts moved, the jobs changed, the events
 * to append, and whether it starts or cancels the run.
 */
interface Working {
  run: RunRow
  readonly jobs: Map<string, JobRow>
  readonly delta: { -readonly [K in keyof JobCounts]: number }
  readonly changed: Set<string>
  readonly events: Array<RunEventEntry>
  started: boolean
  canceled: boolean
  readonly now: Date
}

const workingOn = (run: RunRow, now: Date, locked: ReadonlyArray<JobRow>): Working => ({
  run,
  jobs: new Map(locked.map((job) => [job.jobId, job])),
  delta: emptyCounts(),
  changed: new Set(),
  events: [],
  started: false,
  canceled: false,
  now
})

const jobsOf = (working: Working): ReadonlyArray<JobRow> => Array.from(working.jobs.values())

const setJob = (working: Working, job: JobRow) => {
  const previous = working.jobs.get(job.jobId)
  if (previous !== undefined) working.delta[previous.status]--
  working.delta[job.status]++
  working.jobs.set(job.jobId, job)
  working.changed.add(job.jobId)
}

const logEvent = (
  working: Working,
  type: RunEventType,
  job: JobRow | null,
  data: Record<string, Schema.Json> = {}
) => {
  working.events.push({
    type,
    jobId: job?.jobId ?? null,
    attempt: job?.attempt ?? null,
    runnerId: job?.runnerId ?? null,
    at: working.now,
    data
  })
}

/** Whether the change touches the run row: counts moved, events to log, or the run starts or is canceled. */
const movesRun = (working: Working): boolean =>
  working.events.length > 0 || working.started || working.canceled ||
  Object.values(working.delta).some((moved) => moved !== 0)

/**
 * Lapsed leases and timeouts become `timed_out` (what the sweep does, and any request meeting one first). Call it
 * while `working.jobs` holds only locked jobs.
 */
const settleLapsed = (working: Working) => {
  for (const job of jobsOf(working)) {
    if (!hasLapsed(job, working.now)) continue
    const reason = lapseReason(job, working.now)
    const next: JobRow = {
      ...job,
      status: "timed_out",
      leaseExpiresAt: null,
      finishedAt: working.now,
      updatedAt: working.now,
      errorMessage: reason === "timeout" ? `ran past its timeout of ${job.timeoutSeconds} seconds` : "lease expired"
    }
    setJob(working, next)
    logEvent(working, "state.job.timed_out", next, { reason })
  }
}

export class RunsService extends Context.Service<RunsService, {
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    input: RunInput
  ) => Effect.Effect<{ readonly run: Run }, NotFound | Conflict | ValidationFailed>
  readonly list: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    query: PageRequest & { readonly status?: RunStatus; readonly environmentId?: EnvironmentId }
  ) => Effect.Effect<Paged<{ readonly runs: ReadonlyArray<Run> }>, NotFound | ValidationFailed>
  readonly get: (key: RunKey) => Effect.Effect<{ readonly run: Run }, NotFound>
  readonly jobs: (key: RunKey) => Effect.Effect<{ readonly jobs: ReadonlyArray<Job> }, NotFound>
  readonly runnable: (key: RunKey) => Effect.Effect<{ readonly jobs: ReadonlyArray<Job> }, NotFound>
  readonly frontier: (key: RunKey) => Effect.Effect<{ readonly frontier: Frontier }, NotFound>
  readonly log: (
    key: RunKey,
    query: { readonly after?: number; readonly limit?: number; readonly cursor?: string }
  ) => Effect.Effect<Paged<{ readonly events: ReadonlyArray<RunEvent> }>, NotFound | ValidationFailed>
  readonly claim: (
    actor: Actor,
    key: RunKey,
    jobId: JobKey,
    input: ClaimInput
  ) => Effect.Effect<ClaimResult, NotFound | RunTerminal | DepsNotReady | AlreadyClaimed>
  readonly heartbeat: (
    key: RunKey,
    jobId: JobKey,
    input: HeartbeatInput
  ) => Effect.Effect<{ readonly lease: Lease }, NotFound | LeaseLost>
  readonly complete: (
    actor: Actor,
    key: RunKey,
    jobId: JobKey,
    input: CompleteInput
  ) => Effect.Effect<{ readonly job: Job }, NotFound | LeaseLost>
  readonly cancel: (
    actor: Actor,
    key: RunKey,
    input: CancelInput
  ) => Effect.Effect<{ readonly run: Run }, NotFound | RunTerminal>
  /**
   * Inside a transaction: the job of the run, locked until it ends, if `fence` holds a live lease on it (a lapsed
   * lease is settled first), else `lease_lost`. What logs, secrets and output secrets check.
   */
  readonly requireLease: (
    key: RunKey,
    jobId: JobKey,
    fence: LeaseFence
  ) => Effect.Effect<{ readonly run: RunRow; readonly job: JobRow }, NotFound | LeaseLost>
  /** The lease sweep's step: settles lapsed leases of up to `limit` runs no other transaction holds; how many jobs. */
  readonly sweepLapsed: (limit: number) => Effect.Effect<number>
}>()("@cp/server/RunsService") {
  static readonly layer = Layer.effect(
    RunsService,
    Effect.gen(function*() {
      const runs = yield* RunsRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors

      const findRun = (key: RunKey) =>
        runs.find(key).pipe(Effect.flatMap(Option.match({
          onNone: () => Effect.fail(runNotFound(key.runId)),
          onSome: Effect.succeed
        })))

      const recordRun = (actor: EventActor, run: RunRow, type: string, data: Record<string, Schema.Json>) =>
        events.record({
          orgId: run.orgId,
          type,
          actor,
          subject: { kind: "run", id: run.id, name: null },
          data: { runId: run.id, projectId: run.projectId, ...data },
          projectId: run.projectId,
          environmentId: run.environmentId,
          description: `Run ${run.id} ${type.slice("run.".length)}`
        })

      /**
       * A lease call's change: the run (not locked), the job it names locked, its lapsed lease settled, and with
       * `withDeps` the job's dependencies as they are now (a dependency that succeeded or was memoized stays so, so
       * reading them unlocked is enough to let a claim through).
       */
      const openJob = Effect.fnUntraced(function*(key: RunKey, jobId: JobKey, withDeps: boolean) {
        const run = yield* findRun(key)
        const now = yield* currentDate
        const locked = Option.toArray(yield* runs.lockJob({ runId: run.id, jobId }))
        const working = workingOn(run, now, locked)
        settleLapsed(working)
        const deps = withDeps ? locked[0]?.dependsOn ?? [] : []
        if (deps.length > 0) {
          for (const dep of yield* runs.jobsNamed({ runId: run.id, jobIds: deps })) working.jobs.set(dep.jobId, dep)
        }
        return working
      })

      /** A whole-run change (cancel): the run (not locked) and every job of it locked, lapsed leases settled. */
      const openRun = Effect.fnUntraced(function*(key: RunKey) {
        const run = yield* findRun(key)
        const working = workingOn(run, yield* currentDate, yield* runs.lockJobs(run.id))
        settleLapsed(working)
        return working
      })

      /**
       * The status of the run just advanced (locked, its counts current): from the counts when they decide it
       * (canceled, all done, something running), else from the whole graph as it now is (what can still run).
       */
      const statusOf = Effect.fnUntraced(function*(run: RunRow) {
        const counts = run.jobCounts
        const total = Object.values(counts).reduce((sum, n) => sum + n, 0)
        if (run.canceledAt !== null) return "canceled" as const
        if (counts.succeeded + counts.memoized === total) return "succeeded" as const
        if (counts.running > 0) return "running" as const
        return runStatusOf(run, yield* runs.jobs(run.id))
      })

      /**
       * Writes the changed jobs, then advances the run row (locking it only from here to the commit): counts moved,
       * event numbers reserved, status decided from what is now committed plus this change (the last change to take
       * the run row sees every other), its events appended, and a finish recorded on both logs. A change that leaves
       * the run row alone (a heartbeat) does not touch it.
       */
      const commit = Effect.fnUntraced(function*(working: Working, actor: EventActor) {
        const changedJobs = jobsOf(working).filter((job) => working.changed.has(job.jobId))
        yield* runs.saveJobs(changedJobs)
        if (!movesRun(working)) return working.run
        const { now } = working
        const advanced = yield* runs.advance({
          runId: working.run.id,
          delta: { ...working.delta },
          events: working.events,
          startedAt: working.started ? now : null,
          canceledAt: working.canceled ? now : null
        })
        if (Option.isNone(advanced)) return yield* runNotFound(working.run.id)
        const run = advanced.value
        const status = yield* statusOf(run)
        const finished = (status === "succeeded" || status === "failed") && run.status !== status
        const finishedAt = status === "running" || status === "queued"
          ? null
          : finished
          ? now
          : run.finishedAt ?? now
        const saved: RunRow = { ...run, status, finishedAt, nextSeq: run.nextSeq + (finished ? 1 : 0) }
        if (status !== run.status || finishedAt?.getTime() !== run.finishedAt?.getTime()) yield* runs.save(saved)
        if (finished) {
          yield* runs.appendEvents([{
            runId: run.id,
            seq: run.nextSeq,
            type: "state.run.finished",
            jobId: null,
            attempt: null,
            runnerId: null,
            at: now,
            data: { status }
          }])
        }
        working.run = saved
        if (finished) yield* recordRun(actor, saved, "run.finished", { status, jobCounts: { ...saved.jobCounts } })
        return saved
      })

      /**
       * One change to a run: opened (its jobs locked and settled), `body` applied, committed. A failing check still
       * commits what settling changed (lapsed leases stay timed out), then fails.
       */
      const change = <A, E>(
        opened: Effect.Effect<Working, NotFound>,
        actor: EventActor,
        body: (working: Working) => Effect.Effect<A, E>
      ): Effect.Effect<A, E | NotFound> =>
        tx.withTransaction(Effect.gen(function*() {
          const working = yield* opened
          const outcome = yield* Effect.result(body(working))
          yield* commit(working, actor)
          return outcome
        })).pipe(Effect.flatMap((outcome) =>
          Result.isSuccess(outcome) ? Effect.succeed(outcome.success) : Effect.fail(outcome.failure)
        ))

      const jobIn = (working: Working, jobId: JobKey) => {
        const job = working.jobs.get(jobId)
        return job === undefined ? Effect.fail(jobNotFound(working.run.id, jobId)) : Effect.succeed(job)
      }

      const fenced = (working: Working, jobId: JobKey, fence: LeaseFence) =>
        Effect.flatMap(
          jobIn(working, jobId),
          (job) =>
            job.status === "running" && job.runnerId === fence.runnerId && job.leaseEpoch === fence.leaseEpoch
              ? Effect.succeed(job)
              : Effect.fail(wireError(LeaseLost, "This runner holds no live lease on the job at this epoch", {
                jobId,
                status: job.status,
                leaseEpoch: job.leaseEpoch
              }))
        )

      const leaseOf = (job: JobRow): Lease => ({
        epoch: job.leaseEpoch,
        expiresAt: job.leaseExpiresAt ?? job.updatedAt,
        leaseSeconds: job.leaseSeconds ?? DEFAULT_LEASE_SECONDS
      })

      const readJobs = Effect.fnUntraced(function*(key: RunKey) {
        const run = yield* findRun(key)
        return yield* runs.jobs(run.id)
      })

      return RunsService.of({
        create: Effect.fn("Runs.create")(function*(actor, workspace, projectId, input) {
          const orgId = workspace.organization.id
          const now = yield* currentDate
          const problems = graphProblems(input.jobs)
          if (problems !== undefined) return yield* validationFailed(problems, "The job graph is not valid")
          const bodyHash = sha256Hex(canonicalJson({ projectId, input }))
          return yield* tx.withTransaction(Effect.gen(function*() {
            const project = yield* findProject(projects, orgId, projectId)
            const existing = yield* runs.lock({ orgId, projectId, runId: input.runId })
            if (Option.isSome(existing)) {
              if (existing.value.bodyHash === bodyHash) return { run: toRun(existing.value) }
              return yield* wireError(Conflict, "This runId was used with another body", { runId: input.runId })
            }
            if (project.status !== "active") {
              return yield* validationFailed({ projectId: ["the project is archived"] })
            }
            const environmentId = input.environmentId ?? null
            if (environmentId !== null) {
              const environment = yield* environments.findById({ orgId, projectId, environmentId })
              if (Option.isNone(environment) || environment.value.status !== "active") {
                return yield* validationFailed({ environmentId: ["names no live environment of this project"] })
              }
            }
            const jobs: Array<JobRow> = input.jobs.map((job, position) => ({
              runId: input.runId,
              jobId: job.jobId,
              orgId,
              projectId,
              position,
              name: job.name ?? job.jobId,
              dependsOn: job.dependsOn ?? [],
              status: "pending",
              attempt: 0,
              leaseEpoch: 0,
              runnerId: null,
              leaseExpiresAt: null,
              leaseSeconds: null,
              timeoutSeconds: job.timeoutSeconds ?? null,
              hermetic: false,
              jobInputHash: null,
              exitCode: null,
              outputs: {},
              errorMessage: null,
              startedAt: null,
              finishedAt: null,
              updatedAt: now
            }))
            const run: RunRow = {
              id: input.runId,
              orgId,
              projectId,
              environmentId,
              status: "queued",
              trigger: input.trigger ?? { kind: "manual" },
              metadata: input.metadata ?? {},
              createdBy: createdByOf(actor),
              jobCounts: countJobs(jobs),
              createdAt: now,
              startedAt: null,
              finishedAt: null,
              canceledAt: null,
              bodyHash,
              nextSeq: 2
            }
            const inserted = yield* Effect.result(runs.insert(run, jobs))
            if (Result.isFailure(inserted)) {
              // The runId is taken by a run of another project (ids are global): another body.
              return yield* wireError(Conflict, "This runId was used with another body", { runId: input.runId })
            }
            yield* runs.appendEvents([{
              runId: run.id,
              seq: 1,
              type: "state.run.created",
              jobId: null,
              attempt: null,
              runnerId: null,
              at: now,
              data: { jobs: jobs.length }
            }])
            yield* recordRun(eventActorOf(actor), run, "run.created", { environmentId, jobs: jobs.length })
            return { run: toRun(run) }
          }))
        }),

        list: Effect.fn("Runs.list")(function*(workspace, projectId, query) {
          const orgId = workspace.organization.id
          yield* findProject(projects, orgId, projectId)
          const filters = { status: query.status, environmentId: query.environmentId }
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "runs.list", scope: `${orgId}/${projectId}`, filters },
            query,
            (window) =>
              runs.list({
                orgId,
                projectId,
                ...window,
                ...(query.status === undefined ? {} : { status: query.status }),
                ...(query.environmentId === undefined ? {} : { environmentId: query.environmentId })
              }),
            idPosition
          )
          return { data: { runs: items.map(toRun) }, cursor }
        }),

        get: Effect.fn("Runs.get")(function*(key) {
          return { run: toRun(yield* findRun(key)) }
        }),

        jobs: Effect.fn("Runs.jobs")(function*(key) {
          return { jobs: (yield* readJobs(key)).map(toJob) }
        }),

        runnable: Effect.fn("Runs.runnable")(function*(key) {
          const run = yield* findRun(key)
          return { jobs: (yield* runs.runnable(run.id)).map(toJob) }
        }),

        frontier: Effect.fn("Runs.frontier")(function*(key) {
          const jobs = yield* readJobs(key)
          return {
            frontier: {
              running: jobs.filter((job) => job.status === "running").map((job) => job.jobId),
              runnable: runnableJobs(jobs).map((job) => job.jobId),
              blocked: blockedJobs(jobs).map((job) => job.jobId)
            }
          }
        }),

        log: Effect.fn("Runs.log")(function*(key, query) {
          yield* findRun(key)
          const binding = { endpoint: "runs.log", scope: `${key.orgId}/${key.runId}` }
          const position = yield* cursors.decode(binding, query.cursor, Schema.Struct({ seq: Schema.Int }))
          const after = position?.seq ?? query.after ?? 0
          const limit = query.limit ?? DEFAULT_PAGE_SIZE
          const rows = yield* runs.events({ runId: key.runId, after, limit: limit + 1 })
          const items = rows.slice(0, limit)
          const last = items[items.length - 1]
          const cursor = rows.length > limit && last !== undefined ? cursors.encode(binding, { seq: last.seq }) : null
          return { data: { events: items.map(toEvent) }, cursor }
        }),

        claim: Effect.fn("Runs.claim")(function*(actor, key, jobId, input) {
          return yield* change(openJob(key, jobId, true), eventActorOf(actor), (working) =>
            Effect.gen(function*() {
              const { now, run } = working
              if (run.canceledAt !== null) {
                return yield* wireError(RunTerminal, "The run was canceled", { runId: run.id, status: run.status })
              }
              const job = yield* jobIn(working, jobId)
              const terminal: ClaimResult = { ok: false, reason: "terminal", job: toJob(job) }
              if (job.status === "succeeded" || job.status === "memoized" || job.status === "canceled") return terminal
              const retrying = job.status === "failed" || job.status === "timed_out"
              if (retrying && input.retry !== true) return terminal
              const waiting = waitingOn(job, jobsOf(working))
              if (waiting.length > 0) {
                return yield* wireError(DepsNotReady, "Dependencies have not all succeeded", { waitingOn: waiting })
              }
              if (job.status === "running") {
                return yield* wireError(AlreadyClaimed, "Another runner holds a live lease on this job", {
                  runnerId: job.runnerId,
                  leaseExpiresAt: job.leaseExpiresAt?.toISOString() ?? null
                })
              }
              const hermetic = input.hermetic === true
              const jobInputHash = input.jobInputHash ?? null
              if (hermetic && jobInputHash !== null) {
                const memo = yield* runs.findMemo({ projectId: run.projectId, jobId, jobInputHash })
                if (Option.isSome(memo)) {
                  const memoized: JobRow = {
                    ...job,
                    status: "memoized",
                    hermetic,
                    jobInputHash,
                    outputs: memo.value.outputs,
                    exitCode: memo.value.exitCode,
                    errorMessage: null,
                    runnerId: input.runnerId,
                    leaseExpiresAt: null,
                    finishedAt: now,
                    updatedAt: now
                  }
                  setJob(working, memoized)
                  logEvent(working, "state.job.memoized", memoized, {
                    fromRunId: memo.value.runId,
                    jobInputHash
                  })
                  return { ok: false, reason: "memoized", job: toJob(memoized) } satisfies ClaimResult
                }
              }
              if (retrying) logEvent(working, "state.job.retried", job, { previousStatus: job.status })
              const leaseSeconds = input.leaseSeconds ?? DEFAULT_LEASE_SECONDS
              const attempt = job.attempt + 1
              const claimed: JobRow = {
                ...job,
                status: "running",
                attempt,
                leaseEpoch: attempt,
                runnerId: input.runnerId,
                leaseSeconds,
                leaseExpiresAt: new Date(now.getTime() + leaseSeconds * 1000),
                hermetic,
                jobInputHash,
                exitCode: null,
                outputs: {},
                errorMessage: null,
                startedAt: now,
                finishedAt: null,
                updatedAt: now
              }
              setJob(working, claimed)
              logEvent(working, "state.job.claimed", claimed, { leaseSeconds })
              working.started = true
              return { ok: true, job: toJob(claimed), lease: leaseOf(claimed) } satisfies ClaimResult
            }))
        }),

        heartbeat: Effect.fn("Runs.heartbeat")(function*(key, jobId, input) {
          return yield* change(
            openJob(key, jobId, false),
            { actorType: "system", actorId: "system" },
            (working) =>
              Effect.gen(function*() {
                const job = yield* fenced(working, jobId, input)
                const leaseSeconds = input.leaseSeconds ?? job.leaseSeconds ?? DEFAULT_LEASE_SECONDS
                const extended: JobRow = {
                  ...job,
                  leaseSeconds,
                  leaseExpiresAt: new Date(working.now.getTime() + leaseSeconds * 1000),
                  updatedAt: working.now
                }
                setJob(working, extended)
                return { lease: leaseOf(extended) }
              })
          )
        }),

        complete: Effect.fn("Runs.complete")(function*(actor, key, jobId, input) {
          return yield* change(openJob(key, jobId, false), eventActorOf(actor), (working) =>
            Effect.gen(function*() {
              const job = yield* fenced(working, jobId, input)
              const done: JobRow = {
                ...job,
                status: input.outcome,
                exitCode: input.exitCode ?? null,
                outputs: input.outputs ?? {},
                errorMessage: input.errorMessage ?? null,
                leaseExpiresAt: null,
                finishedAt: working.now,
                updatedAt: working.now
              }
              setJob(working, done)
              logEvent(
                working,
                input.outcome === "succeeded" ? "state.job.succeeded" : "state.job.failed",
                done,
                { exitCode: done.exitCode }
              )
              return { job: toJob(done) }
            }))
        }),

        cancel: Effect.fn("Runs.cancel")(function*(actor, key, input) {
          const eventActor = eventActorOf(actor)
          return yield* change(openRun(key), eventActor, (working) =>
            Effect.gen(function*() {
              const { now, run } = working
              const status = runStatusOf(run, jobsOf(working))
              if (status === "canceled" || status === "succeeded" || status === "failed") {
                return yield* wireError(RunTerminal, "The run has already finished", { runId: run.id, status })
              }
              for (const job of jobsOf(working)) {
                if (job.status !== "pending" && job.status !== "running") continue
                const canceled: JobRow = {
                  ...job,
                  status: "canceled",
                  leaseExpiresAt: null,
                  finishedAt: now,
                  updatedAt: now
                }
                setJob(working, canceled)
                logEvent(working, "state.job.canceled", canceled)
              }
              const reason = input.reason ?? null
              logEvent(working, "state.run.canceled", null, { reason })
              working.canceled = true
              yield* recordRun(eventActor, run, "run.canceled", { reason })
              return working
            })).pipe(Effect.map((working) => ({ run: toRun(working.run) })))
        }),

        requireLease: (key, jobId, fence) =>
          Effect.gen(function*() {
            const working = yield* openJob(key, jobId, false)
            yield* commit(working, { actorType: "system", actorId: "system" })
            const job = yield* fenced(working, jobId, fence)
            return { run: working.run, job }
          }),

        sweepLapsed: (limit) =>
          tx.withTransaction(Effect.gen(function*() {
            const now = yield* currentDate
            const claimed = yield* runs.claimExpired({ now, limit })
            // By run (the claim comes in run order), so run rows are locked in one order.
            const byRun = new Map<string, Array<JobRow>>()
            for (const job of claimed) byRun.set(job.runId, [...(byRun.get(job.runId) ?? []), job])
            let settled = 0
            for (const jobs of byRun.values()) {
              const first = jobs[0]
              if (first === undefined) continue
              const run = yield* runs.find({ orgId: first.orgId, projectId: first.projectId, runId: first.runId })
              if (Option.isNone(run)) continue
              const working = workingOn(run.value, now, jobs)
              settleLapsed(working)
              settled += working.changed.size
              // Jobs reference their run, so it is there; a run gone anyway leaves nothing to settle.
              yield* commit(working, { actorType: "system", actorId: "system" }).pipe(
                Effect.catch(() => Effect.void)
              )
            }
            return settled
          }))
      })
    })
  )
}
