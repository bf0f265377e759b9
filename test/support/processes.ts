/**
 * Real server processes (`node packages/server/src/main.ts`) for replica and fault tests: each one its own OS process
 * with its own pool and memory, all on one database. Started in a scope and SIGKILLed with it; a process still alive
 * when the test worker exits is killed then too.
 */
import { Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"

const MAIN = join(import.meta.dirname, "../../packages/server/src/main.ts")

/** How long a process may take to answer `/health`: a loaded machine boots slowly. */
const BOOT_ATTEMPTS = 600
const BOOT_POLL_MS = 100

export interface ServerProcess {
  readonly baseUrl: string
  readonly pid: number | undefined
  /** Everything the process wrote to stdout and stderr so far. */
  readonly output: () => string
  /** Resolves with the exit code (null after a signal) once the process has exited. */
  readonly exited: Promise<number | null>
  /** Sends `signal`; resolves once the process has exited. */
  readonly kill: (signal: NodeJS.Signals) => Promise<number | null>
}

const alive = new Set<ChildProcess>()
let exitHookInstalled = false

/** The test worker exiting (a crash, a timeout) takes its servers with it. */
const installExitHook = () => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once("exit", () => {
    for (const child of alive) child.kill("SIGKILL")
  })
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))
      )
    })
  })

const spawnServer = async (env: Readonly<Record<string, string>>): Promise<ServerProcess> => {
  installExitHook()
  const port = await freePort()
  let output = ""
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env["PATH"] ?? "", APP_ENV: "test", HOST: "127.0.0.1", ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"]
  })
  alive.add(child)
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      alive.delete(child)
      resolve(code)
    })
  )
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    pid: child.pid,
    output: () => output,
    exited,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    }
  }
}

/** Polls `/health` until 200; fails with the process's output if it exits or never gets there. */
const waitForHealth = async (server: ServerProcess) => {
  let exitedEarly = false
  void server.exited.then(() => (exitedEarly = true))
  for (let attempt = 0; attempt < BOOT_ATTEMPTS && !exitedEarly; attempt++) {
    try {
      const response = await fetch(`${server.baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, BOOT_POLL_MS))
  }
  throw new Error(`server at ${server.baseUrl} did not become healthy:\n${server.output()}`)
}

/**
 * Starts `main.ts` (`APP_ENV=test` on 127.0.0.1 at a free port, plus `env`, e.g. `DATABASE_URL`) and waits for its
 * `/health`; SIGKILLed when the scope closes, if still running.
 */
export const startServerProcess = (
  env: Readonly<Record<string, string>>
): Effect.Effect<ServerProcess, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => spawnServer(env)),
    (server) => Effect.promise(() => server.kill("SIGKILL"))
  ).pipe(Effect.tap((server) => Effect.promise(() => waitForHealth(server))))

/** `count` server processes on the database at `databaseUrl`, started together (migrations run once, locked). */
export const startReplicaProcesses = (
  databaseUrl: string,
  count: number,
  env: Readonly<Record<string, string>> = {}
): Effect.Effect<ReadonlyArray<ServerProcess>, never, Scope.Scope> =>
  Effect.all(
    Array.from({ length: count }, () => startServerProcess({ ...env, DATABASE_URL: databaseUrl })),
    { concurrency: "unbounded" }
  )
