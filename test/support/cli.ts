/** Runs the real `cpctl` executable in a child process for end-to-end tests: its stdout, stderr and exit code. */
import { Effect, Schema, Stream } from "effect"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import { wire } from "./envelope.ts"

const bin = fileURLToPath(new URL("../../packages/cli/src/bin.ts", import.meta.url))

/**
 * Runs `cpctl` with only `env` (plus `NO_COLOR=1`), optional stdin and working directory; collects its output and exit
 * code.
 */
export const cpctlRun = (env: Record<string, string>, args: ReadonlyArray<string>, stdin?: string, cwd?: string) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    const handle = yield* spawner.spawn(
      ChildProcess.make(process.execPath, [bin, ...args], {
        env: { ...env, NO_COLOR: "1" },
        extendEnv: false,
        ...(cwd === undefined ? {} : { cwd }),
        ...(stdin === undefined ? {} : { stdin: Stream.make(new TextEncoder().encode(stdin)) })
      })
    )
    const text = (stream: Stream.Stream<Uint8Array, unknown>) => Stream.mkString(Stream.decodeText(stream))
    const [stdout, stderr, exitCode] = yield* Effect.all([text(handle.stdout), text(handle.stderr), handle.exitCode], {
      concurrency: "unbounded"
    })
    return { stdout, stderr, exitCode }
  }).pipe(Effect.scoped, Effect.orDie)

/** Runs `cpctl` with only the given environment; collects its output and exit code. */
export const cpctl = (env: Record<string, string>, ...args: ReadonlyArray<string>) => cpctlRun(env, args)

/** The environment that points `cpctl` at `baseUrl` with `token` and no credentials file. */
export const tokenEnv = (baseUrl: string, token: string): Record<string, string> => ({
  CP_BASE_URL: baseUrl,
  CP_TOKEN: token,
  CP_CONFIG_DIR: `/nonexistent/${randomUUID()}`
})

/** Runs `cpctl` against the server at `baseUrl` with a token; collects its output and exit code. */
export const cpctlAs = (baseUrl: string, token: string, ...args: ReadonlyArray<string>) =>
  cpctlRun(tokenEnv(baseUrl, token), args)

/** What `cpctl --json` printed, checked against the wire form of `fields`. */
export const printed = <const F extends Schema.Struct.Fields>(
  run: { readonly stdout: string },
  fields: F
): Schema.Struct<F>["Encoded"] => wire(Schema.Struct(fields), JSON.parse(run.stdout), run.stdout)

/** What `cpctl --json` printed (a resource or an array), checked against the wire form of `schema`. */
export const printedAs = <S extends Schema.Top>(run: { readonly stdout: string }, schema: S): S["Encoded"] =>
  wire(schema, JSON.parse(run.stdout), run.stdout)

/** The cells (split where two or more spaces pad them) of the table line `cpctl` printed starting with `first`. */
export const tableRow = (stdout: string, first: string): ReadonlyArray<string> => {
  const line = stdout.split("\n").find((candidate) => candidate.startsWith(`${first} `))
  if (line === undefined) throw new Error(`no table line starts with ${first}:\n${stdout}`)
  return line.split(/ {2,}/)
}
