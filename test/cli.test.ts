/**
 * The real `cpctl` executable against the real server: what a user sees on stdout and stderr, the exit
 * code, and the credentials file (mode 0600).
 */
import { LoginChallenge, Membership, Organization } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Schema } from "effect"
import { StoredCredentials } from "../packages/cli/src/credentials.ts"
import { cpctl } from "./support/cli.ts"
import { okData } from "./support/envelope.ts"
import { call, TestServer, testServer } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

/** Decodes what `--json` printed (or a file holds) with the domain's own schema. */
const parse = <S extends Schema.Codec<unknown, unknown>>(schema: S, json: string): S["Type"] =>
  Schema.decodeUnknownSync(Schema.fromJsonString(schema))(json)

const Outbox = Schema.Struct({
  data: Schema.Struct({ messages: Schema.Array(Schema.Struct({ data: Schema.Struct({ code: Schema.String }) })) })
})

layer(Layer.merge(testServer("memory"), NodeServices.layer), { excludeTestServices: true })("cpctl", (it) => {
  /** A fresh config directory (not created yet), and `cpctl` run with only it in its environment. */
  const configDir = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { baseUrl } = yield* TestServer
    const dir = `${yield* fs.makeTempDirectoryScoped()}/cpctl`
    const run = (...args: ReadonlyArray<string>) => cpctl({ CP_CONFIG_DIR: dir }, ...args)
    return { fs, baseUrl, dir, file: `${dir}/credentials.json`, run }
  })

  /** A user signed in over HTTP, its session stored in the config directory as `cpctl login` stores it. */
  const loggedIn = Effect.gen(function*() {
    const setup = yield* configDir
    const { baseUrl, dir, file, fs } = setup
    const email = freshEmail("cli")
    const { token } = yield* signIn(baseUrl, { email })
    yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
    yield* fs.writeFileString(file, Schema.encodeSync(Schema.fromJsonString(StoredCredentials))({ baseUrl, token }), {
      mode: 0o600
    })
    return { ...setup, email, token }
  })

  it.effect("login without a terminal stops once the code is mailed; a wrong code: not_found; right: 0600 file", () =>
    Effect.gen(function*() {
      const { baseUrl, dir, file, fs, run } = yield* configDir
      const email = freshEmail("cli")

      // Without a terminal, login stops once the code is sent; --challenge and --code finish it.
      const started = yield* run("login", "--base-url", baseUrl, "--email", email, "--json")
      assert.strictEqual(started.exitCode, 0, started.stderr)
      const { challengeId } = parse(Schema.Struct(LoginChallenge), started.stdout)
      const outbox = yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`)
      const code = Schema.decodeUnknownSync(Outbox)(outbox.json).data.messages[0]?.data.code ?? ""

      const finish = (attempt: string) =>
        run("login", "--base-url", baseUrl, "--challenge", challengeId, "--code", attempt)
      const wrong = yield* finish(code === "000000" ? "111111" : "000000")
      assert.deepStrictEqual(wrong, {
        stdout: "",
        stderr: "error not_found: Unknown challenge or wrong code\n",
        exitCode: 1
      })
      const login = yield* finish(code)
      assert.strictEqual(login.exitCode, 0, login.stderr)
      assert.include(login.stdout, `Signed in to ${baseUrl} as ${email}`)
      const stored = parse(StoredCredentials, yield* fs.readFileString(file))
      assert.strictEqual(stored.baseUrl, baseUrl)
      assert.match(stored.token, /^sps_ses_/)
      assert.strictEqual((yield* fs.stat(file)).mode & 0o777, 0o600)
      assert.strictEqual((yield* fs.stat(dir)).mode & 0o777, 0o700)
    }))

  it.effect("signed in, whoami and workspaces create, list and get take the server and token from the file", () =>
    Effect.gen(function*() {
      const { email, run } = yield* loggedIn
      const whoami = yield* run("whoami")
      assert.strictEqual(whoami.exitCode, 0, whoami.stderr)
      assert.include(whoami.stdout, email)

      const created = yield* run("workspaces", "create", "Acme Corp", "--json")
      assert.strictEqual(created.exitCode, 0, created.stderr)
      // --json prints the resource itself, never an envelope.
      const organization = parse(Organization, created.stdout)
      assert.include(created.stdout, `"slug": "${organization.slug}"`)

      const list = yield* run("workspaces", "list")
      assert.strictEqual(list.exitCode, 0, list.stderr)
      assert.match(list.stdout, /^ID\s+SLUG\s+NAME\s+REF\s+KIND\s+CREATED\n/)
      assert.include(list.stdout, `${organization.id}  ${organization.slug}`)

      const got = yield* run("--json", "workspaces", "get", organization.workspaceRef)
      assert.deepStrictEqual(parse(Organization, got.stdout), organization)
    }))

  it.effect("wire errors print as `error <code>: <message>` on stderr, exit 1", () =>
    Effect.gen(function*() {
      const { baseUrl, run, token } = yield* loggedIn
      const { organization } = okData(
        yield* call(baseUrl, "POST", "/v1/organizations", { token, body: { name: "Acme Corp" } }),
        { organization: Organization, membership: Membership }
      )
      assert.deepStrictEqual(yield* run("workspaces", "get", "no-such-workspace"), {
        stdout: "",
        stderr: "error not_found: Workspace not found\n",
        exitCode: 1
      })
      const taken = yield* run("workspaces", "create", "Again", "--slug", organization.slug)
      assert.strictEqual(taken.exitCode, 1)
      assert.match(taken.stderr, /^error conflict: /)
    }))

  it.effect("logout removes the credentials file and ends the session", () =>
    Effect.gen(function*() {
      const { baseUrl, file, fs, run, token } = yield* loggedIn
      const logout = yield* run("logout")
      assert.strictEqual(logout.exitCode, 0, logout.stderr)
      assert.isFalse(yield* fs.exists(file))
      const signedOut = yield* run("whoami", "--base-url", baseUrl, "--token", token)
      assert.strictEqual(signedOut.exitCode, 4)
      assert.match(signedOut.stderr, /^error unauthenticated: /)
    }))
})
