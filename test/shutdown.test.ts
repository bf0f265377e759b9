/**
 * SIGTERM at any moment of an embedded-mode boot (issue 10 item 7): `node packages/server/src/main.ts` on a fresh
 * `DATA_DIR` is stopped at several points of its boot (initdb, migrations, listening) and must exit, with 0 once it
 * handles signals (before that, Node's default SIGTERM ends it before anything touched the data directory); the
 * same directory then boots and answers `/health` 200. The bound on each exit only catches a hang.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const MAIN = join(ROOT, "packages/server/src/main.ts")
/** Far above a boot on a loaded machine: only a process that does not exit at all fails this. */
const EXIT_BOUND_MS = 60_000

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly output: string
}

const start = (dataDir: string, port: number) => {
  const child = spawn(process.execPath, [MAIN], {
    cwd: ROOT,
    // Not the caller's environment: a DATABASE_URL there (as in CI) would take the server off the embedded database.
    env: {
      PATH: process.env.PATH ?? "",
      APP_ENV: "development",
      DATA_DIR: dataDir,
      HOST: "127.0.0.1",
      PORT: String(port)
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => output += chunk.toString())
  child.stderr?.on("data", (chunk: Buffer) => output += chunk.toString())
  const exited = new Promise<Exited>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal, output })))
  return { child, exited }
}

/** Waits for the exit, or kills the process and fails when it does not come within the bound. */
const exitOf = async (child: ChildProcess, exited: Promise<Exited>): Promise<Exited> => {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<"hung">((resolve) => timer = setTimeout(() => resolve("hung"), EXIT_BOUND_MS))
  const result = await Promise.race([exited, hung])
  clearTimeout(timer)
  if (result === "hung") {
    child.kill("SIGKILL")
    throw new Error(`the server did not exit within ${EXIT_BOUND_MS} ms of SIGTERM`)
  }
  return result
}

const healthy = async (port: number, child: ChildProcess): Promise<number> => {
  for (;;) {
    if (child.exitCode !== null) throw new Error("the server exited before it was ready")
    const status = await fetch(`http://127.0.0.1:${port}/health`).then((res) => res.status, () => 0)
    if (status === 200) return status
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** Starts a server and stops it with SIGTERM once `ready` says so: its exit. */
const stopWhen = async (dataDir: string, ready: (child: ChildProcess) => Promise<void>) => {
  const { child, exited } = start(dataDir, await freePort())
  await ready(child)
  child.kill("SIGTERM")
  return exitOf(child, exited)
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Polls until the data directory exists: PGlite has begun creating it (initdb). */
const dataDirAppears = (dataDir: string) => async (child: ChildProcess) => {
  while (!existsSync(dataDir) && child.exitCode === null) await sleep(10)
}

/** Boots a server on `dataDir` until `/health` answers 200, then stops it: it must exit 0. */
const servesAgain = async (dataDir: string) => {
  const port = await freePort()
  const { child, exited } = start(dataDir, port)
  assert.strictEqual(await healthy(port, child), 200)
  child.kill("SIGTERM")
  const exit = await exitOf(child, exited)
  assert.strictEqual(exit.code, 0, exit.output)
}

describe("SIGTERM during an embedded boot (item 7)", () => {
  it.live(
    "exits at every point of the boot and leaves a data directory the next start serves",
    () =>
      Effect.promise(async () => {
        const root = await mkdtemp(join(tmpdir(), "cp-shutdown-"))
        try {
          // Fresh directories, stopped while PGlite creates them (initdb) and soon after: the moments that used to
          // hang until SIGKILL. Signals are handled by then, so each exit is 0.
          const dirs: Array<string> = []
          for (const afterMs of [0, 3_000]) {
            const dataDir = join(root, `fresh-${afterMs}`)
            dirs.push(dataDir)
            const exit = await stopWhen(dataDir, async (child) => {
              await dataDirAppears(dataDir)(child)
              await sleep(afterMs)
            })
            assert.strictEqual(exit.code, 0, `SIGTERM ${afterMs} ms into initdb: ${JSON.stringify(exit)}`)
          }
          // Restarts of what the last one left, stopped at fixed points of their boot. Before Node hands SIGTERM to
          // the server, its default action ends the process; nothing has touched the data directory then.
          const restarted = dirs[dirs.length - 1] ?? join(root, "unused")
          for (const delayMs of [1_000, 4_000]) {
            const exit = await stopWhen(restarted, () => sleep(delayMs))
            const handled = exit.code === 0
            const beforeHandlers = exit.code === null && exit.signal === "SIGTERM"
            assert.isTrue(handled || beforeHandlers, `SIGTERM at ${delayMs} ms: ${JSON.stringify(exit)}`)
          }
          for (const dataDir of dirs) await servesAgain(dataDir)
        } finally {
          await rm(root, { recursive: true, force: true })
        }
      }),
    { timeout: 600_000 }
  )
})
