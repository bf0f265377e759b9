/** The stored shapes of the run-state plane's runs area: runs, their jobs, and each run's event log. */
import { OrgId, ProjectId } from "@cp/domain/ids"
import { CliLink, LinkId } from "@cp/domain/links"
import { Job, JobCounts, JobKey, Run, RunEvent, RunId, RunStatus } from "@cp/domain/runs"
import { Schema, Struct } from "effect"
import { pageFields } from "../keyset.ts"
import { storedFields } from "../stored.ts"

/**
 * A row of `runs`: the API's run, plus the hash of the create body (a reused `runId` with another body is refused)
 * and the next sequence number of its event log (the run row is locked while events are appended).
 */
export const RunRow = Schema.Struct({
  ...storedFields(Run.fields),
  bodyHash: Schema.String,
  nextSeq: Schema.Int
})
export type RunRow = typeof RunRow.Type

/**
 * A row of `jobs`: the API's job, plus where it stands in the declared order, whose run it is, and the lease length
 * its claim asked for (what a heartbeat without `leaseSeconds` extends by).
 */
export const JobRow = Schema.Struct({
  ...storedFields(Job.fields),
  leaseSeconds: Schema.NullOr(Schema.Int),
  orgId: OrgId,
  projectId: ProjectId,
  position: Schema.Int
})
export type JobRow = typeof JobRow.Type

/** A row of `run_events`: one entry of a run's own log. */
export const RunEventRow = Schema.Struct({ ...storedFields(RunEvent.fields), runId: RunId })
export type RunEventRow = typeof RunEventRow.Type

/** One run of one project of one workspace. */
export const RunKey = Schema.Struct({ orgId: OrgId, projectId: ProjectId, runId: RunId })
export type RunKey = typeof RunKey.Type

/** A page of a project's runs, newest first, optionally of one status or environment. */
export const RunsPage = Schema.Struct({
  orgId: OrgId,
  /** Absent: the workspace's runs across its projects (the org-wide feed). */
  projectId: Schema.optional(ProjectId),
  status: Schema.optional(RunStatus),
  environmentId: Schema.optional(Schema.String),
  ...pageFields
})
export type RunsPage = typeof RunsPage.Type

/** Some jobs of one run, by id. */
export const JobsOfRun = Schema.Struct({ runId: RunId, jobIds: Schema.Array(JobKey) })
export type JobsOfRun = typeof JobsOfRun.Type

/** What a memoized claim looks for: a succeeded hermetic job of the project with this id and input hash. */
export const MemoKey = Schema.Struct({ projectId: ProjectId, jobId: JobKey, jobInputHash: Schema.String })
export type MemoKey = typeof MemoKey.Type

/** A window of a run's event log: entries after `after` (a sequence number), oldest first. */
export const RunEventsWindow = Schema.Struct({ runId: RunId, after: Schema.Int, limit: Schema.Int })
export type RunEventsWindow = typeof RunEventsWindow.Type

/** A run-log entry before the run row hands out its sequence number. */
export const RunEventEntry = RunEventRow.mapFields(Struct.omit(["runId", "seq"]))
export type RunEventEntry = typeof RunEventEntry.Type

/** One job of one run. */
export const JobOfRun = Schema.Struct({ runId: RunId, jobId: JobKey })
export type JobOfRun = typeof JobOfRun.Type

/**
 * The run-row side of one change to its jobs (what `RunsRepo.advance` applies atomically, locking the run row until
 * the transaction ends): how each job count moved, the log entries the change appends (numbered by the run row), when
 * the run started (kept if already set) and when it was canceled (likewise).
 */
export const RunAdvance = Schema.Struct({
  runId: RunId,
  delta: JobCounts,
  events: Schema.Array(RunEventEntry),
  startedAt: Schema.NullOr(Schema.Date),
  canceledAt: Schema.NullOr(Schema.Date)
})
export type RunAdvance = typeof RunAdvance.Type

/** The lease sweep's claim: up to `limit` running jobs whose lease or timeout passed by `now`. */
export const ExpiredLeases = Schema.Struct({ now: Schema.Date, limit: Schema.Int })
export type ExpiredLeases = typeof ExpiredLeases.Type

/** One job attempt's log. */
export const JobLogKey = Schema.Struct({ runId: RunId, jobId: JobKey, attempt: Schema.Int })
export type JobLogKey = typeof JobLogKey.Type

/** A row of `job_log_chunks`: one appended chunk of an attempt's log. */
export const JobLogChunkRow = Schema.Struct({
  ...JobLogKey.fields,
  seq: Schema.Int,
  bytes: Schema.Int,
  content: Schema.String,
  createdAt: Schema.Date
})
export type JobLogChunkRow = typeof JobLogChunkRow.Type

/** A row of `cli_links`: the API's link without the slugs (read from the workspace and the project). */
export const CliLinkRow = Schema.Struct(storedFields(CliLink.mapFields(Struct.omit(["orgSlug", "projectSlug"])).fields))
export type CliLinkRow = typeof CliLinkRow.Type

/** One link of one project of one workspace. */
export const LinkKey = Schema.Struct({ orgId: OrgId, projectId: ProjectId, linkId: LinkId })
export type LinkKey = typeof LinkKey.Type

/** The active links of a workspace, optionally of one project or one canonical URL. */
export const LinksOf = Schema.Struct({
  orgId: OrgId,
  projectId: Schema.optional(ProjectId),
  remoteUrl: Schema.optional(Schema.String)
})
export type LinksOf = typeof LinksOf.Type

/** Which job outputs GC counts as roots: those of the project's runs created at or after `since`. */
export const OutputsSince = Schema.Struct({ projectId: ProjectId, since: Schema.Date })
export type OutputsSince = typeof OutputsSince.Type
