/**
 * Runs and jobs of the run-state plane (run-state.md §2): a client-minted run of up to 500 jobs in a dependency graph,
 * coordinated by leases that runners claim, heartbeat and complete. Every route sits under
 * `/v1/organizations/{orgId}/projects/{projectId}/state/` and passes the contract-version gate (`ContractVersionGate`)
 * before anything but authentication.
 */
import { Context, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, OpenApi } from "effect/http-api"
import {
  AlreadyClaimed,
  Conflict,
  ContractVersionUnsupported,
  DepsNotReady,
  LeaseLost,
  NotFound,
  RunTerminal,
  ValidationFailed
} from "./errors.ts"
import { EnvironmentId, OrgId, ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { JsonValue, LineText, MultilineText, Text } from "./text.ts"
import { Envelope, EnvelopeOf, Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** The contract majors the state routes serve (spec: Versioning; Limits "Supported contract majors"). */
export const CONTRACT_VERSIONS = { min: 1, max: 2 } as const
/** The header a state request names its contract major in; absent means the current one. */
export const CONTRACT_VERSION_HEADER = "svc-contract-version"

/**
 * The contract-version gate of every `…/state/` route: `Svc-Contract-Version` absent, `1` or `2` is served; anything
 * else is 409 `contract_version_unsupported` with the supported range. Added to the group between authentication
 * and authorization, so it answers before every other check but authentication.
 */
export class ContractVersionGate extends HttpApiMiddleware.Service<ContractVersionGate>()(
  "@cp/domain/ContractVersionGate",
  { error: ContractVersionUnsupported }
) {}

/** Marks a group whose routes pass the gate (the server's test checks every `…/state/` route carries it). */
export class StatePlaneRoute extends Context.Service<StatePlaneRoute, true>()("@cp/domain/StatePlaneRoute") {}

// The `u` flag lets the patterns reach the OpenAPI document (as in ids.ts).
const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/u

/** A run's id: the ULID the client minted (Crockford base 32, upper case). */
export const RunId = Schema.String.annotate({ description: "The run's id: the ULID its client minted" }).check(
  Schema.isPattern(ULID_PATTERN, { message: "must be a ULID" })
).pipe(Schema.brand("RunId"))
export type RunId = typeof RunId.Type

/** A job's id within its run: 1–64 characters of `a-z 0-9 _ . -`. */
export const JobKey = Schema.String.annotate({ description: "The job's id within its run: 1 to 64 of `a-z 0-9 _ . -`" })
  .check(
    Schema.isPattern(/^[a-z0-9_.-]{1,64}$/u, { message: "must be 1 to 64 characters of a-z, 0-9, _, . and -" })
  ).pipe(Schema.brand("JobKey"))
export type JobKey = typeof JobKey.Type

export const RunStatus = Schema.Literals(["queued", "running", "succeeded", "failed", "canceled"])
export type RunStatus = typeof RunStatus.Type

export const JobStatus = Schema.Literals([
  "pending",
  "running",
  "succeeded",
  "failed",
  "timed_out",
  "memoized",
  "canceled"
])
export type JobStatus = typeof JobStatus.Type
export const jobStatuses = JobStatus.literals

export const TriggerKind = Schema.Literals(["manual", "ci", "scm"])

export const Trigger = Schema.Struct({
  kind: TriggerKind,
  ref: Schema.optionalKey(Text.check(Schema.isMaxLength(255))),
  sha: Schema.optionalKey(Text.check(Schema.isMaxLength(64)))
})
export type Trigger = typeof Trigger.Type

/** String metadata: at most 64 keys, values up to 1024 characters. */
export const RunMetadata = Schema.Record(Text.check(Schema.isMaxLength(128)), Text.check(Schema.isMaxLength(1024)))
  .check(Schema.isMaxProperties(64))

export const JobCounts = Schema.Struct({
  pending: Schema.Int,
  running: Schema.Int,
  succeeded: Schema.Int,
  failed: Schema.Int,
  timed_out: Schema.Int,
  memoized: Schema.Int,
  canceled: Schema.Int
})
export type JobCounts = typeof JobCounts.Type

export const CreatedBy = Schema.Struct({ id: Schema.String, kind: Schema.String })

export const Run = Schema.Struct({
  id: RunId,
  orgId: OrgId,
  projectId: ProjectId,
  environmentId: Schema.NullOr(EnvironmentId),
  status: RunStatus,
  trigger: Trigger,
  metadata: Schema.Record(Schema.String, Schema.String),
  createdBy: CreatedBy,
  jobCounts: JobCounts,
  createdAt: Timestamp,
  startedAt: Schema.NullOr(Timestamp),
  finishedAt: Schema.NullOr(Timestamp),
  canceledAt: Schema.NullOr(Timestamp)
})
export type Run = typeof Run.Type

/** Job outputs: at most 64 string values. */
export const JobOutputs = Schema.Record(Text.check(Schema.isMaxLength(128)), Text.check(Schema.isMaxLength(65_536)))
  .check(Schema.isMaxProperties(64))

export const Job = Schema.Struct({
  jobId: JobKey,
  runId: RunId,
  name: Schema.String,
  dependsOn: Schema.Array(JobKey),
  status: JobStatus,
  attempt: Schema.Int,
  leaseEpoch: Schema.Int,
  runnerId: Schema.NullOr(Schema.String),
  leaseExpiresAt: Schema.NullOr(Timestamp),
  timeoutSeconds: Schema.NullOr(Schema.Int),
  hermetic: Schema.Boolean,
  jobInputHash: Schema.NullOr(Schema.String),
  exitCode: Schema.NullOr(Schema.Int),
  outputs: Schema.Record(Schema.String, Schema.String),
  errorMessage: Schema.NullOr(Schema.String),
  startedAt: Schema.NullOr(Timestamp),
  finishedAt: Schema.NullOr(Timestamp),
  updatedAt: Timestamp
})
export type Job = typeof Job.Type

/** At most 500 jobs in a run (spec: `jobs` 1–500). */
export const MAX_JOBS_PER_RUN = 500

export const JobInput = Schema.Struct({
  jobId: JobKey,
  name: Schema.optionalKey(LineText.check(Schema.isMinLength(1), Schema.isMaxLength(200))),
  dependsOn: Schema.optionalKey(Schema.Array(JobKey).check(Schema.isMaxLength(MAX_JOBS_PER_RUN))),
  timeoutSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 7 * 24 * 3600 })))
})
export type JobInput = typeof JobInput.Type

export const RunInput = Schema.Struct({
  runId: RunId,
  environmentId: Schema.optionalKey(EnvironmentId),
  trigger: Schema.optionalKey(Trigger),
  metadata: Schema.optionalKey(RunMetadata),
  jobs: Schema.Array(JobInput).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_JOBS_PER_RUN))
})
export type RunInput = typeof RunInput.Type

export const RunnerId = LineText.check(Schema.isMinLength(1), Schema.isMaxLength(128))
const LeaseSeconds = Schema.Int.check(Schema.isBetween({ minimum: 10, maximum: 600 }))
export const LeaseEpoch = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

export const ClaimInput = Schema.Struct({
  runnerId: RunnerId,
  retry: Schema.optionalKey(Schema.Boolean),
  hermetic: Schema.optionalKey(Schema.Boolean),
  jobInputHash: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/, { message: "must be 64 lowercase hex characters" }))
  ),
  leaseSeconds: Schema.optionalKey(LeaseSeconds)
})
export type ClaimInput = typeof ClaimInput.Type

export const Lease = Schema.Struct({ epoch: Schema.Int, expiresAt: Timestamp, leaseSeconds: Schema.Int })
export type Lease = typeof Lease.Type

/** A claim's 200 answer: the lease, or why there is none (the job is terminal, or was memoized just now). */
export const ClaimResult = Schema.Union([
  Schema.Struct({ ok: Schema.Literal(true), job: Job, lease: Lease }),
  Schema.Struct({ ok: Schema.Literal(false), reason: Schema.Literals(["terminal", "memoized"]), job: Job })
])
export type ClaimResult = typeof ClaimResult.Type

/** What fences a lease-bound call: the runner and the epoch it was handed. */
export const LeaseFence = Schema.Struct({ runnerId: RunnerId, leaseEpoch: LeaseEpoch })
export type LeaseFence = typeof LeaseFence.Type

export const HeartbeatInput = Schema.Struct({ ...LeaseFence.fields, leaseSeconds: Schema.optionalKey(LeaseSeconds) })
export type HeartbeatInput = typeof HeartbeatInput.Type

export const CompleteInput = Schema.Struct({
  ...LeaseFence.fields,
  outcome: Schema.Literals(["succeeded", "failed"]),
  exitCode: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: -2_147_483_648, maximum: 2_147_483_647 }))),
  outputs: Schema.optionalKey(JobOutputs),
  errorMessage: Schema.optionalKey(MultilineText.check(Schema.isMaxLength(4096)))
})
export type CompleteInput = typeof CompleteInput.Type

export const CancelInput = Schema.Struct({ reason: Schema.optionalKey(MultilineText.check(Schema.isMaxLength(1024))) })
export type CancelInput = typeof CancelInput.Type

export const RunEventType = Schema.Literals([
  "state.run.created",
  "state.job.claimed",
  "state.job.retried",
  "state.job.succeeded",
  "state.job.failed",
  "state.job.timed_out",
  "state.job.memoized",
  "state.job.canceled",
  "state.run.canceled",
  "state.run.finished"
])
export type RunEventType = typeof RunEventType.Type

export const RunEvent = Schema.Struct({
  seq: Schema.Int,
  type: RunEventType,
  jobId: Schema.NullOr(JobKey),
  attempt: Schema.NullOr(Schema.Int),
  runnerId: Schema.NullOr(Schema.String),
  at: Timestamp,
  data: JsonValue
})
export type RunEvent = typeof RunEvent.Type

export const Frontier = Schema.Struct({
  running: Schema.Array(JobKey),
  runnable: Schema.Array(JobKey),
  blocked: Schema.Array(JobKey)
})
export type Frontier = typeof Frontier.Type

/**
 * The `data` of each run event on the workspace event log (`run.created`, `run.canceled`, `run.finished`), one
 * schema per type, for the event catalog.
 */
export const RunWorkspaceEventData = {
  "run.created": Schema.Struct({
    runId: RunId,
    projectId: ProjectId,
    environmentId: Schema.NullOr(EnvironmentId),
    jobs: Schema.Int
  }),
  "run.canceled": Schema.Struct({ runId: RunId, projectId: ProjectId, reason: Schema.NullOr(Schema.String) }),
  "run.finished": Schema.Struct({ runId: RunId, projectId: ProjectId, status: RunStatus, jobCounts: JobCounts })
} as const

const projectParams = { orgId: OrgRef, projectId: ProjectId }
const runParams = { ...projectParams, runId: RunId }
const jobParams = { ...runParams, jobId: JobKey }
const STATE = "/v1/organizations/:orgId/projects/:projectId/state"

export const RunsQuery = Schema.Struct({
  ...PageQuery,
  status: Schema.optionalKey(RunStatus.annotate({ description: "Only runs in this state" })),
  environmentId: Schema.optionalKey(EnvironmentId)
})

export const RunLogQuery = Schema.Struct({
  after: Schema.optionalKey(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0)).pipe(
      Schema.annotateEncoded({ description: "Only events after this sequence number" })
    )
  ),
  limit: PageQuery.limit,
  cursor: PageQuery.cursor
})

export class RunsApi extends HttpApiGroup.make("runs")
  .add(
    HttpApiEndpoint.post("create", `${STATE}/runs`, {
      params: projectParams,
      payload: RunInput,
      success: Envelope({ run: Run }),
      error: [NotFound, Conflict, ValidationFailed]
    }).annotateMerge(
      doc(
        "Create a run",
        "The client mints the run's ULID; sending the same body again answers the stored run, another body with " +
          "that `runId` is 409 `conflict`. `dependsOn` names jobs of the same run, without cycles."
      )
    ).annotateMerge(requires.permission("state.run.write")),
    HttpApiEndpoint.get("list", `${STATE}/runs`, {
      params: projectParams,
      query: RunsQuery,
      success: Page({ runs: Schema.Array(Run) }),
      error: NotFound
    }).annotateMerge(doc("List a project's runs", "Newest first; filter by `status` and `environmentId`."))
      .annotateMerge(requires.permission("state.run.read")),
    HttpApiEndpoint.get("get", `${STATE}/runs/:runId`, {
      params: runParams,
      success: Envelope({ run: Run }),
      error: NotFound
    }).annotateMerge(doc("Get a run")).annotateMerge(requires.permission("state.run.read")),
    HttpApiEndpoint.get("jobs", `${STATE}/runs/:runId/jobs`, {
      params: runParams,
      success: Envelope({ jobs: Schema.Array(Job) }),
      error: NotFound
    }).annotateMerge(doc("List a run's jobs", "In declared order.")).annotateMerge(
      requires.permission("state.run.read")
    ),
    HttpApiEndpoint.get("runnable", `${STATE}/runs/:runId/runnable`, {
      params: runParams,
      success: Envelope({ jobs: Schema.Array(Job) }),
      error: NotFound
    }).annotateMerge(
      doc("List a run's runnable jobs", "Pending jobs whose dependencies all succeeded or were memoized.")
    ).annotateMerge(requires.permission("state.run.read")),
    HttpApiEndpoint.get("frontier", `${STATE}/runs/:runId/frontier`, {
      params: runParams,
      success: Envelope({ frontier: Frontier }),
      error: NotFound
    }).annotateMerge(
      doc(
        "Get a run's frontier",
        "Job ids running, runnable, and blocked behind a failed, timed-out or canceled dependency."
      )
    ).annotateMerge(requires.permission("state.run.read")),
    HttpApiEndpoint.get("log", `${STATE}/runs/:runId/log`, {
      params: runParams,
      query: RunLogQuery,
      success: Page({ events: Schema.Array(RunEvent) }),
      error: NotFound
    }).annotateMerge(doc("Read a run's event log", "Events oldest first; `after` starts past a sequence number."))
      .annotateMerge(requires.permission("state.run.read")),
    HttpApiEndpoint.post("cancel", `${STATE}/runs/:runId:cancel`, {
      params: runParams,
      payload: CancelInput,
      success: Envelope({ run: Run }),
      error: [NotFound, RunTerminal]
    }).annotateMerge(
      doc(
        "Cancel a run",
        "Pending and running jobs become `canceled` and their leases die; a finished run is 409 `run_terminal`."
      )
    ).annotateMerge(requires.permission("state.run.write")),
    HttpApiEndpoint.post("claim", `${STATE}/runs/:runId/jobs/:jobId:claim`, {
      params: jobParams,
      payload: ClaimInput,
      success: EnvelopeOf(ClaimResult),
      error: [NotFound, RunTerminal, DepsNotReady, AlreadyClaimed]
    }).annotateMerge(
      doc(
        "Claim a job",
        "Answers a lease, or `ok: false` when the job is terminal or was memoized from an earlier hermetic run. " +
          "`retry: true` claims a failed or timed-out job again."
      )
    ).annotateMerge(requires.permission("state.run.write")),
    HttpApiEndpoint.post("heartbeat", `${STATE}/runs/:runId/jobs/:jobId:heartbeat`, {
      params: jobParams,
      payload: HeartbeatInput,
      success: Envelope({ lease: Lease }),
      error: [NotFound, LeaseLost]
    }).annotateMerge(
      doc("Extend a job's lease", "A stale epoch, another runner or an expired lease is 409 `lease_lost`.")
    ).annotateMerge(requires.permission("state.run.write")),
    HttpApiEndpoint.post("complete", `${STATE}/runs/:runId/jobs/:jobId:complete`, {
      params: jobParams,
      payload: CompleteInput,
      success: Envelope({ job: Job }),
      error: [NotFound, LeaseLost]
    }).annotateMerge(
      doc("Complete a job", "Records the outcome, exit code, outputs and error message; fenced like a heartbeat.")
    ).annotateMerge(requires.permission("state.run.write"))
  )
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Runs", description: "Run-state plane: runs, jobs and leases" }))
{}
