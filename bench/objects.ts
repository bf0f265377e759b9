/**
 * `npm run bench:objects` (run-state.md §9): object PUT and GET throughput for 1 MiB and 64 MiB objects through our
 * server, beside raw PostgreSQL `COPY` of the same bytes into and out of a plain `bytea` table in the same run; the
 * server's peak RSS while 8 clients PUT and then GET 64 MiB objects at once; and `objects/missing` latency (p50, p99)
 * for 1,000 digests. One server process over a scratch database on PostgreSQL. Prints figures, asserts nothing.
 *
 * Environment: `BENCH_DATABASE_URL` or `DATABASE_URL` (default postgres://postgres@127.0.0.1:5432/test), the server
 * on which the scratch database is made; `BENCH_REPS` repetitions per size (default 5); `BENCH_MISSING` missing
 * requests (default 100).
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { startReplicaProcesses } from "../test/support/processes.ts"
import { scratchDatabaseUrl } from "../test/support/scratch.ts"
import { call } from "../test/support/server.ts"
import { createProject, signInWithPersonal } from "../test/support/session.ts"
import { percentile } from "./runStateLoad.ts"

const number = (name: string, fallback: number) => Number(process.env[name] || fallback)
const REPS = number("BENCH_REPS", 5)
const MISSING_REQUESTS = number("BENCH_MISSING", 100)
const MIB = 1024 * 1024
process.env["DATABASE_URL"] = process.env["BENCH_DATABASE_URL"] || process.env["DATABASE_URL"] ||
  "postgres://postgres@127.0.0.1:5432/test"

const digestOf = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`
const median = (values: ReadonlyArray<number>) => percentile(values, 50)
const rate = (bytes: number, ms: number) => (bytes / MIB) / (ms / 1000)

/** The server process's resident set (kB) from /proc. */
const rssKb = (pid: number) => {
  try {
    const match = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match === null ? 0 : Number(match[1])
  } catch {
    return 0 // the process is gone
  }
}

/** Wall milliseconds of `psql` running `command` on `url`, less a bare `psql -c 'select 1'` (its start-up). */
const psqlMs = (url: string, command: string, startupMs: number) => {
  const start = performance.now()
  execFileSync("psql", [url, "-q", "-v", "ON_ERROR_STOP=1", "-c", command], { stdio: ["ignore", "ignore", "inherit"] })
  return Math.max(1, performance.now() - start - startupMs)
}

const program = Effect.gen(function*() {
  const url = yield* scratchDatabaseUrl("cp_bench_objects")
  const [server] = yield* startReplicaProcesses(url, 1)
  if (server === undefined || server.pid === undefined) return yield* Effect.die(new Error("no server"))
  const pid = server.pid
  const user = yield* signInWithPersonal(server.baseUrl, "bench")
  const orgId = user.personal.id
  const projectId = yield* createProject(server.baseUrl, user.token, orgId)
  const base = `${server.baseUrl}/v1/organizations/${orgId}/projects/${projectId}/state`
  const auth = { authorization: `Bearer ${user.token}` }

  const put = (bytes: Uint8Array) =>
    Effect.promise(async () => {
      const start = performance.now()
      const res = await fetch(`${base}/objects/${digestOf(bytes)}`, {
        method: "PUT",
        headers: { ...auth, "content-type": "application/octet-stream" },
        body: bytes
      })
      await res.arrayBuffer()
      if (res.status !== 200) throw new Error(`PUT ${res.status}`)
      return performance.now() - start
    })
  const get = (digest: string, size: number) =>
    Effect.promise(async () => {
      const start = performance.now()
      const res = await fetch(`${base}/objects/${digest}`, { headers: auth })
      let received = 0
      for await (const chunk of res.body ?? []) received += (chunk as Uint8Array).length
      if (res.status !== 200 || received !== size) throw new Error(`GET ${res.status} ${received}/${size}`)
      return performance.now() - start
    })

  // Raw COPY of the same bytes: a plain bytea table, one row per MiB (as the store's chunk rows), text format.
  const psqlUrl = url.replace(/\?.*$/, "")
  execFileSync("psql", [psqlUrl, "-q", "-c", "create table bench_copy (seq int, data bytea)"])
  const startups = Array.from({ length: 3 }, () => {
    const start = performance.now()
    execFileSync("psql", [psqlUrl, "-q", "-c", "select 1"], { stdio: "ignore" })
    return performance.now() - start
  })
  const startupMs = median(startups)
  const copyFile = join(tmpdir(), `cp-bench-copy-${process.pid}.txt`)
  const copyIn = (bytes: Uint8Array) => {
    const lines: Array<string> = []
    for (let offset = 0, seq = 0; offset < bytes.length; offset += MIB, seq++) {
      lines.push(`${seq}\t\\\\x${Buffer.from(bytes.subarray(offset, offset + MIB)).toString("hex")}`)
    }
    writeFileSync(copyFile, lines.join("\n") + "\n")
    execFileSync("psql", [psqlUrl, "-q", "-c", "truncate bench_copy"])
    return psqlMs(psqlUrl, `\\copy bench_copy from '${copyFile}'`, startupMs)
  }
  const copyOut = () => psqlMs(psqlUrl, `\\copy (select data from bench_copy order by seq) to '/dev/null'`, startupMs)

  console.log(
    `objects bench: 1 server process, PostgreSQL scratch database; load average ${
      loadavg().map((n) => n.toFixed(2)).join(" ")
    }`
  )
  console.log("  size     PUT MiB/s   GET MiB/s   COPY in MiB/s   COPY out MiB/s   (medians of", REPS, "reps)")
  for (const size of process.env["BENCH_SKIP_SIZES"] ? [] : [MIB, 64 * MIB]) {
    const puts: Array<number> = []
    const gets: Array<number> = []
    const ins: Array<number> = []
    const outs: Array<number> = []
    for (let rep = 0; rep < REPS; rep++) {
      const bytes = new Uint8Array(randomBytes(size))
      puts.push(rate(size, yield* put(bytes)))
      gets.push(rate(size, yield* get(digestOf(bytes), size)))
      ins.push(rate(size, copyIn(bytes)))
      outs.push(rate(size, copyOut()))
    }
    console.log(
      `  ${String(size / MIB).padStart(2)} MiB  ${median(puts).toFixed(1).padStart(9)}   ${
        median(gets).toFixed(1).padStart(9)
      }   ${median(ins).toFixed(1).padStart(13)}   ${median(outs).toFixed(1).padStart(14)}`
    )
  }
  rmSync(copyFile, { force: true })

  // Peak RSS while 8 clients transfer 64 MiB each at once, PUTs then GETs.
  const idleKb = rssKb(pid)
  let peakKb = idleKb
  const sampler = setInterval(() => {
    peakKb = Math.max(peakKb, rssKb(pid))
  }, 25)
  const bodies = Array.from({ length: 8 }, () => new Uint8Array(randomBytes(64 * MIB)))
  // Node's 30 s whole-request limit (a server setting) can cut an upload on a loaded machine: counted, not fatal.
  const putStart = performance.now()
  const outcomes = yield* Effect.all(
    bodies.map((bytes) => Effect.result(Effect.tryPromise(() => Effect.runPromise(put(bytes))))),
    { concurrency: "unbounded" }
  )
  const putMs = performance.now() - putStart
  const stored = bodies.filter((_, index) => outcomes[index]?._tag === "Success")
  const putPeakKb = peakKb
  const firstFailure = outcomes.find((outcome) => outcome._tag === "Failure")
  // Whatever the limit cut is stored one at a time, so the GETs still run 8 at once.
  for (const bytes of bodies) if (!stored.includes(bytes)) yield* put(bytes)
  const getStart = performance.now()
  yield* Effect.all(bodies.map((bytes) => get(digestOf(bytes), bytes.length)), { concurrency: "unbounded" })
  const getMs = performance.now() - getStart
  clearInterval(sampler)
  console.log(
    `  8 concurrent 64 MiB PUTs: ${stored.length}/8 stored within Node's 30 s whole-request limit, ${
      rate(stored.length * 64 * MIB, putMs).toFixed(1)
    } MiB/s; server RSS ${(idleKb / 1024).toFixed(0)} MiB before, peak ${(putPeakKb / 1024).toFixed(0)} MiB${
      firstFailure === undefined ? "" : ` (first failure: ${String(firstFailure.failure)})`
    }`
  )
  console.log(
    `  8 concurrent 64 MiB GETs: ${rate(8 * 64 * MIB, getMs).toFixed(1)} MiB/s; server RSS peak over both phases ${
      (peakKb / 1024).toFixed(0)
    } MiB`
  )

  // objects/missing for 1,000 digests, half of them stored.
  const present: Array<string> = []
  for (let i = 0; i < 500; i++) {
    const bytes = new TextEncoder().encode(`missing bench ${i}`)
    yield* put(bytes)
    present.push(digestOf(bytes))
  }
  const asked = [
    ...present,
    ...Array.from({ length: 500 }, (_, i) => digestOf(new TextEncoder().encode(`absent ${i}`)))
  ]
  const latencies: Array<number> = []
  for (let i = 0; i < MISSING_REQUESTS; i++) {
    const start = performance.now()
    const res = yield* call(
      server.baseUrl,
      "POST",
      `/v1/organizations/${orgId}/projects/${projectId}/state/objects/missing`,
      {
        token: user.token,
        body: { digests: asked }
      }
    )
    latencies.push(performance.now() - start)
    if (res.status !== 200) return yield* Effect.die(new Error(`missing: ${res.status} ${res.text}`))
  }
  console.log(
    `  objects/missing, 1000 digests (500 stored): p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${
      percentile(latencies, 99).toFixed(1)
    } ms over ${MISSING_REQUESTS} requests`
  )
  console.log(`  load average after: ${loadavg().map((n) => n.toFixed(2)).join(" ")}`)
}).pipe(Effect.scoped)

await Effect.runPromise(program)
