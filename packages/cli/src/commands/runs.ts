/**
 * Run-state commands (run-state.md §1–3): `link` (the current git remote, or `--remote`), `runs list|get|cancel|log`,
 * `jobs list`, `logs tail [--follow]`, and `runner`: a minimal runner that claims the runnable jobs of a run, keeps
 * their leases alive, runs a shell command per job (its output appended to the job's log) and completes each with the
 * command's exit status, until nothing is left to run.
 */
import {
  AlreadyClaimed,
  type ClaimResult,
  DepsNotReady,
  type Job,
  JobKey,
  type Run,
  type RunEvent,
  RunId,
  RunStatus,
  Slug
} from "@cp/domain"
import { Console, Duration, Effect, Fiber, Option, Schedule, Stream } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import {
  confirm,
  fetchRows,
  flagWords,
  optionalKey,
  pageFlags,
  resolveProject,
  workspaceFlag,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const projectArgument = Argument.String("project").pipe(Argument.withDescription("The project's id (prj_…) or slug"))
const runArgument = Argument.String("run").pipe(Argument.withSchema(RunId), Argument.withDescription("The run's ULID"))
const jobArgument = Argument.String("job").pipe(Argument.withSchema(JobKey), Argument.withDescription("The job's id"))

const runColumns: Columns<Run> = {
  id: (run) => run.id,
  status: (run) => run.status,
  jobs: (run) =>
    Object.entries(run.jobCounts).filter(([, n]) => n > 0).map(([status, n]) => `${status}:${n}`).join(" "),
  created: (run) => run.createdAt,
  finished: (run) => run.finishedAt
}

const jobColumns: Columns<Job> = {
  job: (job) => job.jobId,
  status: (job) => job.status,
  attempt: (job) => String(job.attempt),
  runner: (job) => job.runnerId,
  exit: (job) => (job.exitCode === null ? null : String(job.exitCode)),
  dependsOn: (job) => job.dependsOn.join(",")
}

const eventColumns: Columns<RunEvent> = {
  seq: (event) => String(event.seq),
  type: (event) => event.type,
  job: (event) => event.jobId,
  attempt: (event) => (event.attempt === null ? null : String(event.attempt)),
  runner: (event) => event.runnerId,
  at: (event) => event.at
}

/** Runs a program and collects its stdout and exit code (`extendEnv`: the child sees this process's environment). */
const runProgram = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    const handle = yield* spawner.spawn(ChildProcess.make(command, args, { env, extendEnv: true }))
    const [stdout, exitCode] = yield* Effect.all(
      [Stream.mkString(Stream.decodeText(handle.all)), handle.exitCode],
      { concurrency: "unbounded" }
    )
    return { stdout, exitCode: Number(exitCode) }
  }).pipe(
    Effect.scoped,
    Effect.mapError((error) => new CliFailure({ code: "process_failed", message: `${command}: ${String(error)}` }))
  )

const link = Command.make(
  "link",
  {
    workspace: workspaceFlag,
    remote: Flag.String("remote").pipe(
      Flag.withDescription("The remote URL (default: `git remote get-url origin` here)"),
      Flag.optional
    ),
    project: Flag.String("project").pipe(
      Flag.withSchema(Slug),
      Flag.withDescription("The project's slug (created when absent; default: the repository's name)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.link")(function*({ project, remote, workspace }) {
    const { api } = yield* ControlPlaneClient
    const remoteUrl = Option.isSome(remote) ? remote.value : yield* Effect.gen(function*() {
      const git = yield* runProgram("git", ["remote", "get-url", "origin"])
      if (git.exitCode !== 0 || git.stdout.trim() === "") {
        return yield* new CliFailure({ code: "usage", message: "No git remote `origin` here: pass --remote <url>" })
      }
      return git.stdout.trim()
    })
    const { link } = yield* api.cliLinks.create({
      params: { orgId: workspace },
      payload: { remoteUrl, ...optionalKey("projectSlug", project) }
    })
    yield* printResult(link, (link) =>
      renderTable({
        id: (l: typeof link) => l.id,
        project: (l) => l.projectSlug,
        remote: (l) => l.remoteUrl,
        provider: (l) => l.provider
      }, [link]))
  })
).pipe(Command.withDescription("Link this repository (its git remote) to a project"), withClient)

const runsList = Command.make(
  "list",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    status: Flag.Literals("status", RunStatus.literals).pipe(Flag.optional),
    ...pageFlags
  },
  Effect.fn("cpctl.runs.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.runs.list({
          params: { orgId: flags.workspace, projectId },
          query: { ...query, ...optionalKey("status", flags.status) }
        }),
        (page) => ({ rows: page.data.runs, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: runColumns,
      empty: "No runs in this project.",
      command: ["cpctl", "runs", "list", flags.project, "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List a project's runs, newest first"), withClient)

const runsGet = Command.make(
  "get",
  { workspace: workspaceFlag, project: projectArgument, run: runArgument },
  Effect.fn("cpctl.runs.get")(function*({ project, run, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const found = yield* api.runs.get({ params: { orgId: workspace, projectId, runId: run } })
    yield* printResult(found.run, (run) => renderTable(runColumns, [run]))
  })
).pipe(Command.withDescription("Show a run"), withClient)

const runsCancel = Command.make(
  "cancel",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    run: runArgument,
    reason: Flag.String("reason").pipe(Flag.optional),
    yes: yesFlag
  },
  Effect.fn("cpctl.runs.cancel")(function*({ project, reason, run, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    yield* confirm(yes, `Cancel run ${run}?`)
    const canceled = yield* api.runs.cancel({
      params: { orgId: workspace, projectId, runId: run },
      payload: { ...optionalKey("reason", reason) }
    })
    yield* printResult(canceled.run, (run) => renderTable(runColumns, [run]))
  })
).pipe(Command.withDescription("Cancel a run: its pending and running jobs (asks unless --yes)"), withClient)

const runsLog = Command.make(
  "log",
  { workspace: workspaceFlag, project: projectArgument, run: runArgument, ...pageFlags },
  Effect.fn("cpctl.runs.log")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.runs.log({ params: { orgId: flags.workspace, projectId, runId: flags.run }, query }),
        (page) => ({ rows: page.data.events, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: eventColumns,
      empty: "No events.",
      command: ["cpctl", "runs", "log", flags.project, flags.run, "-w", flags.workspace]
    })
  })
).pipe(Command.withDescription("A run's event log, oldest first"), withClient)

/** `cpctl runs`. */
export const runs = Command.make("runs").pipe(
  Command.withDescription("Runs of a project"),
  Command.withSubcommands([runsList, runsGet, runsCancel, runsLog])
)

const jobsList = Command.make(
  "list",
  { workspace: workspaceFlag, project: projectArgument, run: runArgument },
  Effect.fn("cpctl.jobs.list")(function*({ project, run, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    const { jobs } = yield* api.runs.jobs({ params: { orgId: workspace, projectId, runId: run } })
    yield* printList(jobs, null, { columns: jobColumns, empty: "No jobs.", command: [] })
  })
).pipe(Command.withDescription("A run's jobs in declared order"), withClient)

/** `cpctl jobs`. */
export const jobs = Command.make("jobs").pipe(
  Command.withDescription("Jobs of a run"),
  Command.withSubcommands([jobsList])
)

const logsTail = Command.make(
  "tail",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    run: runArgument,
    job: jobArgument,
    follow: Flag.Boolean("follow").pipe(
      Flag.withAlias("f"),
      Flag.withDescription("Keep printing until the attempt ends"),
      Flag.withDefault(false)
    ),
    attempt: Flag.Int("attempt").pipe(Flag.optional)
  },
  Effect.fn("cpctl.logs.tail")(function*({ attempt, follow, job, project, run, workspace }) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(workspace, project)
    let offset = 0
    while (true) {
      const { log } = yield* api.jobLogs.read({
        params: { orgId: workspace, projectId, runId: run, jobId: job },
        query: { offset, ...optionalKey("attempt", attempt) }
      })
      if (log.content !== "") yield* Effect.sync(() => process.stdout.write(log.content))
      offset = log.bytes
      if (!follow || log.complete) return
      yield* Effect.sleep(Duration.seconds(1))
    }
  })
).pipe(Command.withDescription("Print a job's log (with --follow, until its attempt ends)"), withClient)

/** `cpctl logs`. */
export const logs = Command.make("logs").pipe(
  Command.withDescription("Job logs"),
  Command.withSubcommands([logsTail])
)

const isOk = (claim: ClaimResult): claim is Extract<ClaimResult, { readonly ok: true }> => claim.ok

const runner = Command.make(
  "runner",
  {
    workspace: workspaceFlag,
    project: projectArgument,
    run: runArgument,
    command: Flag.String("command").pipe(
      Flag.withDescription("Shell command run per job (sh -c); $CP_JOB_ID, $CP_RUN_ID, $CP_ATTEMPT are set")
    ),
    runnerId: Flag.String("runner-id").pipe(
      Flag.withDescription("This runner's id (default: cpctl-<pid>)"),
      Flag.optional
    ),
    leaseSeconds: Flag.Int("lease-seconds").pipe(Flag.withDescription("Lease length, 10 to 600"), Flag.withDefault(60)),
    retry: Flag.Boolean("retry").pipe(
      Flag.withDescription("Re-claim failed or timed-out jobs once"),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cpctl.runner")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const projectId = yield* resolveProject(flags.workspace, flags.project)
    const runnerId = Option.getOrElse(flags.runnerId, () => `cpctl-${process.pid}`)
    const params = { orgId: flags.workspace, projectId, runId: flags.run }
    const retried = new Set<string>()

    const execute = Effect.fnUntraced(function*(job: Job, leaseEpoch: number) {
      const fence = { runnerId, leaseEpoch }
      const jobParams = { ...params, jobId: job.jobId }
      const heartbeat = yield* api.runs.heartbeat({ params: jobParams, payload: fence }).pipe(
        Effect.repeat(Schedule.spaced(Duration.seconds(Math.max(1, Math.floor(flags.leaseSeconds / 3))))),
        Effect.ignore,
        Effect.forkChild
      )
      const result = yield* runProgram("sh", ["-c", flags.command], {
        CP_JOB_ID: job.jobId,
        CP_RUN_ID: flags.run,
        CP_ATTEMPT: String(leaseEpoch)
      })
      yield* Fiber.interrupt(heartbeat)
      if (result.stdout !== "") {
        yield* api.jobLogs.append({ params: jobParams, payload: { ...fence, seq: 0, content: result.stdout } })
      }
      const outcome = result.exitCode === 0 ? "succeeded" as const : "failed" as const
      yield* api.runs.complete({
        params: jobParams,
        payload: {
          ...fence,
          outcome,
          exitCode: result.exitCode,
          ...(outcome === "failed" ? { errorMessage: `exited with ${result.exitCode}` } : {})
        }
      })
      yield* Console.error(`${job.jobId}: ${outcome} (exit ${result.exitCode})`)
    })

    while (true) {
      const { jobs } = yield* api.runs.jobs({ params })
      const { run } = yield* api.runs.get({ params })
      if (run.status === "canceled" || run.status === "succeeded") break
      const retryable = flags.retry
        ? jobs.filter((job) => (job.status === "failed" || job.status === "timed_out") && !retried.has(job.jobId))
        : []
      const { jobs: runnable } = yield* api.runs.runnable({ params })
      const candidates = [...runnable, ...retryable]
      if (candidates.length === 0) {
        if (!jobs.some((job) => job.status === "running")) break
        yield* Effect.sleep(Duration.millis(500))
        continue
      }
      for (const job of candidates) {
        const retry = job.status !== "pending"
        if (retry) retried.add(job.jobId)
        const claimed = yield* api.runs.claim({
          params: { ...params, jobId: job.jobId },
          payload: { runnerId, leaseSeconds: flags.leaseSeconds, ...(retry ? { retry: true } : {}) }
        }).pipe(
          Effect.map(Option.some),
          // Another runner took it, or its dependencies changed: look again on the next round.
          Effect.catch((error) =>
            error instanceof AlreadyClaimed || error instanceof DepsNotReady
              ? Effect.succeed(Option.none<ClaimResult>())
              : Effect.fail(error)
          )
        )
        if (Option.isSome(claimed) && isOk(claimed.value)) yield* execute(claimed.value.job, claimed.value.lease.epoch)
      }
    }
    const { run } = yield* api.runs.get({ params })
    yield* printResult(run, (run) => renderTable(runColumns, [run]))
    if (run.status !== "succeeded") {
      return yield* new CliFailure({ code: "run_failed", message: `Run ${run.id} ended ${run.status}` })
    }
  })
).pipe(
  Command.withDescription("Run a run's jobs here: claim, heartbeat, run --command per job, complete"),
  withClient
)

export { link, runner }
