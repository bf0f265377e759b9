/**
 * The run-state load driver shared by the two-process replica test and `npm run bench:run-state` (run-state.md §9):
 * `runners` concurrent runners, spread over the given server processes and runs, each repeatedly reading a run's
 * runnable jobs and claiming and completing them, until every run has finished. A run holds at most 500 jobs
 * (run-state.md §2), so a 1,000-job load is two runs of 500 driven at once. It records every successful claim, so a
 * job claimed twice is counted, and the latency of every claim request.
 */

export interface LoadTarget {
  readonly baseUrls: ReadonlyArray<string>
  readonly token: string
  readonly orgId: string
  readonly projectId: string
  readonly runIds: ReadonlyArray<string>
  readonly runners: number
}

export interface LoadStats {
  /** Successful claims (`ok: true`) and completes. */
  readonly claims: number
  readonly completes: number
  /** Claims answered 409 (`already_claimed`, `deps_not_ready`): lost races, which are expected. */
  readonly lostRaces: number
  /** Jobs that more than one claim was granted for. */
  readonly doubleClaims: number
  /** How many successful claims each job (`<runId>/<jobId>`) got. */
  readonly claimsPerJob: ReadonlyMap<string, number>
  /** Every claim request's latency, in milliseconds. */
  readonly claimLatenciesMs: ReadonlyArray<number>
  readonly wallMs: number
  /** Requests answered 503 and retried (statement or lock timeouts on a loaded machine). */
  readonly unavailableRetries: number
}

/** A graph of `count` jobs in which job i depends on job i - `width`: `width` jobs can run at a time. */
export const layeredJobs = (count: number, width: number) =>
  Array.from({ length: count }, (_, i) => ({ jobId: `j${i}`, dependsOn: i >= width ? [`j${i - width}`] : [] }))

/** 503s answered (the database timed out on a loaded machine) and retried; the request is retried after 250 ms. */
let unavailableRetries = 0
const MAX_RETRIES = 20

const request = async (
  baseUrl: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
  retries = 0
): Promise<{ readonly status: number; readonly json: unknown }> => {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  // A 503 rolled its transaction back (a statement or lock timed out): the same request again is safe.
  if (response.status === 503 && retries < MAX_RETRIES) {
    unavailableRetries++
    await new Promise((resolve) => setTimeout(resolve, 250))
    return request(baseUrl, token, method, path, body, retries + 1)
  }
  return { status: response.status, json: text === "" ? undefined : JSON.parse(text) }
}

const dataOf = (json: unknown): Record<string, unknown> => {
  if (typeof json !== "object" || json === null || !("data" in json)) {
    throw new Error(`no data: ${JSON.stringify(json)}`)
  }
  const data = json.data
  if (typeof data !== "object" || data === null) throw new Error(`no data: ${JSON.stringify(json)}`)
  return Object.fromEntries(Object.entries(data))
}

const jobIdsOf = (json: unknown): Array<string> => {
  const jobs = dataOf(json)["jobs"]
  if (!Array.isArray(jobs)) throw new Error("no jobs")
  return jobs.map((job: unknown) =>
    typeof job === "object" && job !== null && "jobId" in job && typeof job.jobId === "string" ? job.jobId : ""
  )
}

const runStatusOf = (json: unknown): string => {
  const run = dataOf(json)["run"]
  return typeof run === "object" && run !== null && "status" in run && typeof run.status === "string" ? run.status : ""
}

/** Drives the run to its end with `runners` runners; the figures of the drive. */
export const driveRun = async (target: LoadTarget): Promise<LoadStats> => {
  const runsPath = `/v1/organizations/${target.orgId}/projects/${target.projectId}/state/runs`
  const claimsPerJob = new Map<string, number>()
  const claimLatenciesMs: Array<number> = []
  let claims = 0
  let completes = 0
  let lostRaces = 0
  unavailableRetries = 0
  const started = performance.now()

  const runner = async (index: number) => {
    const baseUrl = target.baseUrls[index % target.baseUrls.length] ?? ""
    const runnerId = `load-${index}`
    const call = (method: string, path: string, body?: unknown) => request(baseUrl, target.token, method, path, body)
    // Each runner starts on its own run and moves to the next one when it has finished.
    const order = target.runIds.map((_, k) => target.runIds[(index + k) % target.runIds.length] ?? "")
    for (const runId of order) await drain(runId, runnerId, call)
  }

  const drain = async (
    runId: string,
    runnerId: string,
    call: (method: string, path: string, body?: unknown) => ReturnType<typeof request>
  ) => {
    const runPath = `${runsPath}/${runId}`
    const index = Number(runnerId.slice("load-".length))
    while (true) {
      const runnable = await call("GET", `${runPath}/runnable`)
      if (runnable.status !== 200) throw new Error(`runnable: ${runnable.status} ${JSON.stringify(runnable.json)}`)
      const ids = jobIdsOf(runnable.json)
      if (ids.length === 0) {
        const run = await call("GET", runPath)
        const status = runStatusOf(run.json)
        if (status === "succeeded" || status === "failed" || status === "canceled") return
        await new Promise((resolve) => setTimeout(resolve, 10))
        continue
      }
      // Each runner starts at its own place in the list, so runners mostly go for different jobs.
      const offset = (index * 7) % ids.length
      for (const jobId of [...ids.slice(offset), ...ids.slice(0, offset)]) {
        const before = performance.now()
        const claim = await call("POST", `${runPath}/jobs/${jobId}:claim`, { runnerId, leaseSeconds: 120 })
        claimLatenciesMs.push(performance.now() - before)
        if (claim.status === 409) {
          lostRaces++
          continue
        }
        if (claim.status !== 200) throw new Error(`claim: ${claim.status} ${JSON.stringify(claim.json)}`)
        const answer = dataOf(claim.json)
        if (answer["ok"] !== true) continue
        claims++
        claimsPerJob.set(`${runId}/${jobId}`, (claimsPerJob.get(`${runId}/${jobId}`) ?? 0) + 1)
        const complete = await call("POST", `${runPath}/jobs/${jobId}:complete`, {
          runnerId,
          leaseEpoch: 1,
          outcome: "succeeded",
          exitCode: 0
        })
        if (complete.status !== 200) throw new Error(`complete: ${complete.status} ${JSON.stringify(complete.json)}`)
        completes++
      }
    }
  }

  await Promise.all(Array.from({ length: target.runners }, (_, index) => runner(index)))
  return {
    claims,
    completes,
    lostRaces,
    doubleClaims: [...claimsPerJob.values()].filter((count) => count > 1).length,
    claimsPerJob,
    claimLatenciesMs,
    wallMs: performance.now() - started,
    unavailableRetries
  }
}

/** The `p`th percentile (0–100) of `values`. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0
}
