/**
 * The server as an operator runs it (contract §1): `main.ts` in its own process, the first log line,
 * data kept across a restart on the embedded database, SIGTERM exits 0, production refuses to start
 * without its keys and hides the dev outbox.
 */
import { Session, User } from "@cp/domain"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { failed, okData } from "./support/envelope.ts"
import { call } from "./support/server.ts"
import { signIn } from "./support/session.ts"

const main = join(import.meta.dirname, "../packages/server/src/main.ts")

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(
        () => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
      )
    })
  })

interface Running {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const start = async (env: Record<string, string>): Promise<Running> => {
  const port = await freePort()
  let output = ""
  const child = spawn(process.execPath, [main], {
    env: { PATH: process.env.PATH ?? "", HOST: "127.0.0.1", PORT: String(port), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const running = { child, baseUrl: `http://127.0.0.1:${port}`, output: () => output, exited }
  started.push(running)
  return running
}

/** Polls `/health` until it answers 200; a loaded machine can take long to boot, so this gives it 45 s. */
const waitForHealth = async (running: Running) => {
  for (let attempt = 0; attempt < 450; attempt++) {
    try {
      const response = await fetch(`${running.baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`server did not become healthy:\n${running.output()}`)
}

const started: Array<Running> = []

afterEach(() => {
  for (const running of started.splice(0)) running.child.kill("SIGKILL")
})

const stop = async (running: Running) => {
  running.child.kill("SIGTERM")
  return running.exited
}

/** A fresh temporary data directory, removed with the scope. */
const tempDataDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.promise(() => mkdtemp(join(tmpdir(), prefix))),
    (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
  )

/** Starts `main.ts` with `env` and waits until it answers `/health`. */
const startHealthy = (env: Record<string, string>) =>
  Effect.promise(async () => {
    const running = await start(env)
    await waitForHealth(running)
    return running
  })

describe("running the server", () => {
  it.live(
    "serves on the embedded database, keeps data across a restart, and exits 0 on SIGTERM",
    () =>
      Effect.gen(function*() {
        const dataDir = yield* tempDataDir("cp-lifecycle-")
        const first = yield* startHealthy({ APP_ENV: "development", DATA_DIR: dataDir })
        const firstLine = first.output().split("\n").find((line) => line.trim() !== "") ?? ""
        assert.include(firstLine, `${first.baseUrl}/v1`)
        assert.include(firstLine, `${first.baseUrl}/docs`)
        const { token, user } = yield* signIn(first.baseUrl, { email: "restart@example.com" })
        assert.strictEqual(yield* Effect.promise(() => stop(first)), 0)

        const second = yield* startHealthy({ APP_ENV: "development", DATA_DIR: dataDir })
        const session = okData(yield* call(second.baseUrl, "GET", "/v1/auth/session", { token }), {
          session: Session,
          user: User
        })
        assert.strictEqual(session.user.id, user.id)
        assert.strictEqual(yield* Effect.promise(() => stop(second)), 0)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live("production refuses to start without SECRETS_KEK and TOKEN_SIGNING_KEY", () =>
    Effect.promise(async () => {
      const running = await start({ APP_ENV: "production", DATA_DIR: join(tmpdir(), "cp-never-used") })
      const code = await running.exited
      assert.notStrictEqual(code, 0)
      assert.include(running.output(), "SECRETS_KEK")
      assert.include(running.output(), "TOKEN_SIGNING_KEY")
    }), 30_000)

  it.live("production has no dev outbox", () =>
    Effect.gen(function*() {
      const running = yield* startHealthy({
        APP_ENV: "production",
        DATA_DIR: yield* tempDataDir("cp-prod-"),
        SECRETS_KEK: Buffer.alloc(32, 7).toString("base64"),
        TOKEN_SIGNING_KEY: "a-production-signing-key"
      })
      failed(yield* call(running.baseUrl, "GET", "/v1/dev/outbox"), 404, "not_found")
      assert.strictEqual(yield* Effect.promise(() => stop(running)), 0)
    }).pipe(Effect.scoped), 60_000)
})
