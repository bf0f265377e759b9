/**
 * The pure rules of runs and jobs (run-state.md §2): graph validation, which jobs can run, the run's status from its
 * jobs, and what happens to a job whose lease or timeout has passed. The service calls these with the jobs it
 * changes locked, and decides the run's status with the run row locked.
 */
import type { JobCounts, JobInput, JobKey, JobStatus, RunStatus } from "@cp/domain"
import type { JobRow, RunRow } from "@cp/persistence"

/** Statuses a dependency may have for its dependants to run. */
const DONE: ReadonlySet<JobStatus> = new Set(["succeeded", "memoized"])
/** Statuses that block dependants until a retry. */
const BROKEN: ReadonlySet<JobStatus> = new Set(["failed", "timed_out", "canceled"])

export const isDone = (status: JobStatus): boolean => DONE.has(status)

/**
 * What is wrong with a run's job graph, as `details.fields` of a 422: duplicate ids, a dependency on a job the run
 * does not declare (or on itself), or a cycle (named in order, first job repeated at the end). Undefined when sound.
 */
export const graphProblems = (jobs: ReadonlyArray<JobInput>): Record<string, Array<string>> | undefined => {
  const problems: Record<string, Array<string>> = {}
  const add = (field: string, message: string) => (problems[field] ??= []).push(message)
  const declared = new Map<string, number>()
  jobs.forEach((job, index) => {
    if (declared.has(job.jobId)) add(`jobs.${index}.jobId`, `duplicates job '${job.jobId}'`)
    else declared.set(job.jobId, index)
  })
  jobs.forEach((job, index) => {
    for (const dep of job.dependsOn ?? []) {
      if (dep === job.jobId) add(`jobs.${index}.dependsOn`, `job '${job.jobId}' depends on itself`)
      else if (!declared.has(dep)) add(`jobs.${index}.dependsOn`, `names job '${dep}', which the run does not declare`)
    }
  })
  if (Object.keys(problems).length > 0) return problems
  const cycle = findCycle(jobs)
  return cycle === undefined ? undefined : { jobs: [`dependency cycle: ${cycle.join(" -> ")}`] }
}

/** A dependency cycle of the graph (iterative depth-first search), or undefined. */
export const findCycle = (jobs: ReadonlyArray<JobInput>): ReadonlyArray<string> | undefined => {
  const deps = new Map(jobs.map((job) => [job.jobId as string, job.dependsOn ?? []]))
  const state = new Map<string, "visiting" | "done">()
  for (const root of deps.keys()) {
    if (state.has(root)) continue
    const path: Array<string> = []
    const stack: Array<{ readonly id: string; next: number }> = [{ id: root, next: 0 }]
    state.set(root, "visiting")
    path.push(root)
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]
      if (frame === undefined) break
      const children = deps.get(frame.id) ?? []
      const child = children[frame.next]
      if (child === undefined) {
        state.set(frame.id, "done")
        stack.pop()
        path.pop()
        continue
      }
      frame.next++
      const seen = state.get(child)
      if (seen === "visiting") return [...path.slice(path.indexOf(child)), child]
      if (seen === undefined) {
        state.set(child, "visiting")
        path.push(child)
        stack.push({ id: child, next: 0 })
      }
    }
  }
  return undefined
}

export const emptyCounts = (): { -readonly [K in keyof JobCounts]: number } => ({
  pending: 0,
  running: 0,
  succeeded: 0,
  failed: 0,
  timed_out: 0,
  memoized: 0,
  canceled: 0
})

export const countJobs = (jobs: ReadonlyArray<JobRow>): JobCounts => {
  const counts = emptyCounts()
  for (const job of jobs) counts[job.status]++
  return counts
}

const byId = (jobs: ReadonlyArray<JobRow>) => new Map<string, JobRow>(jobs.map((job) => [job.jobId, job]))

const waitingIn = (job: JobRow, all: ReadonlyMap<string, JobRow>): ReadonlyArray<JobKey> =>
  job.dependsOn.filter((dep) => {
    const found = all.get(dep)
    return found === undefined || !isDone(found.status)
  })

/** The dependencies of `job` not yet succeeded or memoized. */
export const waitingOn = (job: JobRow, jobs: ReadonlyArray<JobRow>): ReadonlyArray<JobKey> => waitingIn(job, byId(jobs))

/** Pending jobs whose dependencies all succeeded or were memoized, in declared order. */
export const runnableJobs = (jobs: ReadonlyArray<JobRow>): ReadonlyArray<JobRow> => {
  const all = byId(jobs)
  return jobs.filter((job) => job.status === "pending" && waitingIn(job, all).length === 0)
}

/** Pending jobs behind a failed, timed-out or canceled dependency, directly or through other blocked jobs. */
export const blockedJobs = (jobs: ReadonlyArray<JobRow>): ReadonlyArray<JobRow> => {
  const all = byId(jobs)
  const blocked = new Map<string, boolean>()
  const isBlocked = (job: JobRow, depth: number): boolean => {
    const known = blocked.get(job.jobId)
    if (known !== undefined) return known
    // Graphs are acyclic and at most 500 deep; the depth guard only bounds the walk.
    const answer = job.status === "pending" && depth <= 501 && job.dependsOn.some((dep) => {
      const found = all.get(dep)
      return found !== undefined && (BROKEN.has(found.status) || isBlocked(found, depth + 1))
    })
    blocked.set(job.jobId, answer)
    return answer
  }
  return jobs.filter((job) => isBlocked(job, 0))
}

/**
 * The run's status from its jobs: `canceled` once canceled; `succeeded` when every job succeeded or was memoized;
 * `running` while a job runs or can run and something was claimed; `queued` before the first claim; `failed` when
 * nothing can run any more and some job failed or timed out.
 */
export const runStatusOf = (run: RunRow, jobs: ReadonlyArray<JobRow>): RunStatus => {
  if (run.canceledAt !== null) return "canceled"
  if (jobs.every((job) => isDone(job.status))) return "succeeded"
  if (jobs.some((job) => job.status === "running")) return "running"
  if (runnableJobs(jobs).length > 0) return run.startedAt === null ? "queued" : "running"
  return "failed"
}

/** Whether the job's lease expired or its timeout passed at `now`. */
export const hasLapsed = (job: JobRow, now: Date): boolean =>
  job.status === "running" &&
  ((job.leaseExpiresAt !== null && job.leaseExpiresAt <= now) ||
    (job.timeoutSeconds !== null && job.startedAt !== null &&
      job.startedAt.getTime() + job.timeoutSeconds * 1000 <= now.getTime()))

/** Why a lapsed job timed out: its lease expired, or it ran past `timeoutSeconds`. */
export const lapseReason = (job: JobRow, now: Date): "lease_expired" | "timeout" =>
  job.leaseExpiresAt !== null && job.leaseExpiresAt <= now ? "lease_expired" : "timeout"

/** `pattern` as a glob in which `*` matches any characters (`/` included) and everything else itself. */
export const globMatches = (pattern: string, value: string): boolean =>
  new RegExp(`^${pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s")
    .test(value)
