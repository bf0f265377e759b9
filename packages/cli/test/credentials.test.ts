import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, FileSystem, Option } from "effect"
import { DEFAULT_BASE_URL, resolveConnection } from "../src/client.ts"
import { CredentialsStore } from "../src/credentials.ts"
import { CliFailure } from "../src/errors.ts"

const stored = { baseUrl: "http://file.test", token: "file-token" }
const none = { baseUrl: Option.none(), token: Option.none() }

/** Runs `use` with a fresh config directory (not yet created) and the given environment variables. */
const withConfigDir = <A, E>(
  env: Record<string, string>,
  use: (dir: string) => Effect.Effect<A, E, CredentialsStore | FileSystem.FileSystem>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = `${yield* fs.makeTempDirectoryScoped()}/cpctl`
    const configured = ConfigProvider.layer(ConfigProvider.fromEnv({ env: { ...env, CP_CONFIG_DIR: dir } }))
    return yield* use(dir).pipe(
      Effect.provide(CredentialsStore.layer),
      Effect.provide(configured)
    )
  }).pipe(Effect.provide(NodeServices.layer))

const resolveWith = (
  env: Record<string, string>,
  flags: Parameters<typeof resolveConnection>[0],
  file: Option.Option<typeof stored>
) =>
  withConfigDir(env, () =>
    Effect.gen(function*() {
      if (Option.isSome(file)) yield* (yield* CredentialsStore).save(file.value)
      return yield* resolveConnection(flags)
    }))

const env = { CP_BASE_URL: "http://env.test", CP_TOKEN: "env-token" }

describe("credential resolution", () => {
  it.effect("flags win over the environment", () =>
    Effect.gen(function*() {
      const connection = yield* resolveWith(
        env,
        { baseUrl: Option.some("http://flag.test"), token: Option.some("flag-token") },
        Option.some(stored)
      )
      assert.deepStrictEqual(connection, { baseUrl: "http://flag.test", token: Option.some("flag-token") })
    }))

  it.effect("the environment wins over the credentials file", () =>
    Effect.gen(function*() {
      const connection = yield* resolveWith(env, none, Option.some(stored))
      assert.deepStrictEqual(connection, { baseUrl: "http://env.test", token: Option.some("env-token") })
    }))

  it.effect("the credentials file fills what flags and environment leave out", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* resolveWith({}, none, Option.some(stored)),
        { baseUrl: "http://file.test", token: Option.some("file-token") }
      )
      assert.deepStrictEqual(
        yield* resolveWith({ CP_TOKEN: "env-token" }, none, Option.some(stored)),
        { baseUrl: "http://file.test", token: Option.some("env-token") }
      )
    }))

  it.effect("a stored token is only sent to the server that issued it", () =>
    Effect.gen(function*() {
      const elsewhere = yield* resolveWith(
        {},
        { ...none, baseUrl: Option.some("http://other.test/") },
        Option.some(stored)
      )
      assert.deepStrictEqual(elsewhere, { baseUrl: "http://other.test", token: Option.none() })
    }))

  it.effect("with nothing configured: the default base URL and no token", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* resolveWith({}, none, Option.none()), {
        baseUrl: DEFAULT_BASE_URL,
        token: Option.none()
      })
    }))
})

describe("credentials file", () => {
  it.effect("is written 0600, even over a file that was readable by others", () =>
    withConfigDir({}, (dir) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const store = yield* CredentialsStore
        yield* fs.makeDirectory(dir, { mode: 0o700 })
        yield* fs.writeFileString(store.file, "{}", { mode: 0o644 })
        yield* store.save(stored)
        assert.strictEqual((yield* fs.stat(store.file)).mode & 0o777, 0o600)
        assert.deepStrictEqual(yield* store.load, Option.some(stored))
        assert.deepStrictEqual(yield* fs.readDirectory(dir), ["credentials.json"])
      })))

  it.effect("creates its directory 0700", () =>
    withConfigDir({}, (dir) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* (yield* CredentialsStore).save(stored)
        assert.strictEqual((yield* fs.stat(dir)).mode & 0o777, 0o700)
      })))

  it.effect("a corrupt file is a `credentials_file` failure naming the file; remove deletes it", () =>
    withConfigDir({}, (dir) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const store = yield* CredentialsStore
        yield* fs.makeDirectory(dir, { recursive: true })
        yield* fs.writeFileString(store.file, "{not json")
        const failure = yield* Effect.flip(store.load)
        assert.instanceOf(failure, CliFailure)
        assert.strictEqual(failure.code, "credentials_file")
        assert.include(failure.message, store.file)
        yield* store.remove
        assert.deepStrictEqual(yield* store.load, Option.none())
      })))
})
