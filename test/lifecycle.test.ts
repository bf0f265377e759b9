/**
 * The server as an operator runs it (contract §1): `main.ts` in its own process, the first log line,
 * data kept across a restart on the embedded database, SIGTERM exits 0, production refuses to start
 * without its keys and hides the dev outbox.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

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

const waitForHealth = async (running: Running) => {
  for (let attempt = 0; attempt < 150; attempt++) {
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

const signIn = async (baseUrl: string, email: string) => {
  const post = (path: string, body: unknown) =>
    fetch(`${baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })
      .then((response) => response.json() as Promise<{ data: Record<string, unknown> }>)
  const challenge = await post("/v1/auth/login/start", { email })
  const outbox = await fetch(`${baseUrl}/v1/dev/outbox?to=${email}`).then((r) =>
    r.json() as Promise<{ data: { messages: Array<{ data: { code: string } }> } }>
  )
  const result = await post("/v1/auth/login/complete", {
    challengeId: challenge.data.challengeId,
    code: outbox.data.messages[0]?.data.code
  })
  return result.data as { token: string; user: { id: string } }
}

describe("running the server", () => {
  it.live(
    "serves on the embedded database, keeps data across a restart, and exits 0 on SIGTERM",
    () =>
      Effect.promise(async () => {
        const dataDir = await mkdtemp(join(tmpdir(), "cp-lifecycle-"))
        try {
          const first = await start({ APP_ENV: "development", DATA_DIR: dataDir })
          await waitForHealth(first)
          const firstLine = first.output().split("\n").find((line) => line.trim() !== "") ?? ""
          assert.include(firstLine, `${first.baseUrl}/v1`)
          assert.include(firstLine, `${first.baseUrl}/docs`)
          const { token, user } = await signIn(first.baseUrl, "restart@example.com")
          assert.strictEqual(await stop(first), 0)

          const second = await start({ APP_ENV: "development", DATA_DIR: dataDir })
          await waitForHealth(second)
          const session = await fetch(`${second.baseUrl}/v1/auth/session`, {
            headers: { authorization: `Bearer ${token}` }
          })
          assert.strictEqual(session.status, 200)
          const body = await session.json() as { data: { user: { id: string } } }
          assert.strictEqual(body.data.user.id, user.id)
          assert.strictEqual(await stop(second), 0)
        } finally {
          await rm(dataDir, { recursive: true, force: true })
        }
      }),
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
    Effect.promise(async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "cp-prod-"))
      try {
        const running = await start({
          APP_ENV: "production",
          DATA_DIR: dataDir,
          SECRETS_KEK: Buffer.alloc(32, 7).toString("base64"),
          TOKEN_SIGNING_KEY: "a-production-signing-key"
        })
        await waitForHealth(running)
        const outbox = await fetch(`${running.baseUrl}/v1/dev/outbox`)
        assert.strictEqual(outbox.status, 404)
        const body = await outbox.json() as { error: { code: string } }
        assert.strictEqual(body.error.code, "not_found")
        assert.strictEqual(await stop(running), 0)
      } finally {
        await rm(dataDir, { recursive: true, force: true })
      }
    }), 60_000)
})
