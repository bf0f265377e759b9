/**
 * The real `cpctl` executable against `ControlPlaneApi` served over HTTP by tiny in-test handlers: what a
 * user sees on stdout and stderr, the exit code, and the credentials file.
 */
import {
  Authentication,
  Authorization,
  ChallengeId,
  Conflict,
  ControlPlaneApi,
  CurrentActor,
  LoginChallenge,
  Membership,
  NotFound,
  Organization,
  OrgId,
  PreconditionFailed,
  RequestValidation,
  SessionId,
  Unauthenticated,
  UserId,
  validationFailed,
  WorkspaceRef,
  wireError
} from "@cp/domain"
import { NodeHttpServer, NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Redacted, Schema, Stream } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApiBuilder, HttpApiMiddleware } from "effect/http-api"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"
import { StoredCredentials } from "../src/credentials.ts"

const ulid = (n: number) => String(n).padStart(26, "0")
const TOKEN = "tok_valid"
const EMAIL = "ada@example.com"
const CODE = "123456"
const at = new Date("2030-01-02T03:04:05.000Z")
const user = { id: UserId.make(`usr_${ulid(1)}`), email: EMAIL, displayName: "Ada" }
const sessionId = SessionId.make(`ses_${ulid(1)}`)
const challengeId = ChallengeId.make(`chl_${ulid(1)}`)
const organizations = new Map<string, Organization>()

const unused = () => Effect.die("not called by cpctl")

const ServerLive = HttpRouter.serve(
  HttpApiBuilder.layer(ControlPlaneApi).pipe(
    Layer.provide([
      HttpApiBuilder.group(ControlPlaneApi, "system", (h) => h.handle("health", unused).handle("outbox", unused)),
      HttpApiBuilder.group(ControlPlaneApi, "identity", (h) =>
        h
          .handle("loginStart", () =>
            Effect.succeed({
              challengeId,
              expiresAt: at,
              delivery: { mode: "email" as const, emailHint: "a***@example.com" }
            }))
          .handle("loginComplete", ({ payload }) =>
            payload.challengeId === challengeId && payload.code === CODE
              ? Effect.succeed({ token: TOKEN, tokenType: "bearer" as const, expiresAt: at, user })
              : Effect.fail(wireError(PreconditionFailed, "The code is wrong or has expired")))
          .handle("oauthProviders", unused)
          .handle("oauthStart", unused)
          .handle("oauthCallback", unused)),
      HttpApiBuilder.group(ControlPlaneApi, "session", (h) =>
        h
          .handle("session", () =>
            Effect.succeed({
              session: { id: sessionId, expiresAt: at, createdAt: at },
              user: { ...user, lastOrgSlug: null }
            }))
          .handle("logout", () => Effect.succeed({ success: true as const }))
          .handle("getProfile", unused)
          .handle("updateProfile", unused)
          .handle("securityEvents", unused)),
      HttpApiBuilder.group(ControlPlaneApi, "workspaces", (h) =>
        h
          .handle("create", ({ payload }) => {
            const slug = payload.slug ?? payload.name.toLowerCase()
            if ([...organizations.values()].some((organization) => organization.slug === slug)) {
              return Effect.fail(wireError(Conflict, "Slug is taken", { slug }))
            }
            const n = organizations.size + 1
            const organization = {
              id: OrgId.make(`org_${ulid(n)}`),
              workspaceRef: WorkspaceRef.make(`ws_${ulid(n)}`),
              accountId: WorkspaceRef.make(`ws_${ulid(n)}`),
              name: payload.name,
              slug,
              kind: "account",
              isAccountRoot: true,
              createdAt: at
            }
            organizations.set(slug, organization)
            return Effect.succeed({ organization, membership: { role: "owner" as const, joinedAt: at } })
          })
          .handle("list", () => Effect.succeed({ data: { organizations: [...organizations.values()] }, cursor: null }))
          .handle("get", ({ params }) => {
            const organization = organizations.get(params.orgId)
            return organization === undefined
              ? Effect.fail(wireError(NotFound, "Workspace not found"))
              : Effect.succeed({ organization })
          })
          .handle("children", unused)
          .handle("effectiveAccess", unused))
    ]),
    Layer.provide([
      Layer.succeed(Authentication)({
        bearer: (httpEffect, { credential }) =>
          Redacted.value(credential) === TOKEN
            ? Effect.provideService(httpEffect, CurrentActor, { kind: "user", userId: user.id, sessionId })
            : Effect.fail(wireError(Unauthenticated, "Missing or invalid bearer token"))
      }),
      Layer.succeed(Authorization)((httpEffect) => httpEffect),
      HttpApiMiddleware.layerSchemaErrorTransform(
        RequestValidation,
        (error) => Effect.fail(validationFailed({ [error.kind]: ["is invalid"] }))
      )
    ])
  ),
  { disableLogger: true, disableListenLog: true }
).pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))

const bin = fileURLToPath(new URL("../src/bin.ts", import.meta.url))

/** Decodes what `--json` printed (or a file holds) with the domain's own schema. */
const parse = <S extends Schema.Codec<unknown, unknown>>(schema: S, json: string): S["Type"] =>
  Schema.decodeUnknownSync(Schema.fromJsonString(schema))(json)

/** Runs the `cpctl` executable with only the given environment; collects its output and exit code. */
const cpctl = (env: Record<string, string>, ...args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    const handle = yield* spawner.spawn(
      ChildProcess.make(process.execPath, [bin, ...args], { env: { ...env, NO_COLOR: "1" }, extendEnv: false })
    )
    const text = (stream: Stream.Stream<Uint8Array, unknown>) => Stream.mkString(Stream.decodeText(stream))
    const [stdout, stderr, exitCode] = yield* Effect.all([text(handle.stdout), text(handle.stderr), handle.exitCode], {
      concurrency: "unbounded"
    })
    return { stdout, stderr, exitCode }
  }).pipe(Effect.scoped, Effect.orDie)

layer(Layer.merge(ServerLive, NodeServices.layer), { excludeTestServices: true })("cpctl end to end", (it) => {
  it.effect("login stores the session for later commands; logout forgets it", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const baseUrl = yield* HttpServer.addressFormattedWith(Effect.succeed)
      const dir = `${yield* fs.makeTempDirectoryScoped()}/cpctl`
      const run = (...args: ReadonlyArray<string>) => cpctl({ CP_CONFIG_DIR: dir }, ...args)

      // Without a terminal, login stops once the code is sent; --challenge and --code finish it.
      const started = yield* run("login", "--base-url", baseUrl, "--email", EMAIL, "--json")
      assert.strictEqual(started.exitCode, 0, started.stderr)
      assert.deepStrictEqual(parse(Schema.Struct(LoginChallenge), started.stdout), {
        challengeId,
        expiresAt: at,
        delivery: { mode: "email", emailHint: "a***@example.com" }
      })

      const finish = (code: string) => run("login", "--base-url", baseUrl, "--challenge", challengeId, "--code", code)
      assert.deepStrictEqual(yield* finish("000000"), {
        stdout: "",
        stderr: "error precondition_failed: The code is wrong or has expired\n",
        exitCode: 1
      })
      const login = yield* finish(CODE)
      assert.strictEqual(login.exitCode, 0, login.stderr)
      assert.include(login.stdout, `Signed in to ${baseUrl} as ${EMAIL}`)
      const file = `${dir}/credentials.json`
      assert.deepStrictEqual(parse(StoredCredentials, yield* fs.readFileString(file)), { baseUrl, token: TOKEN })
      assert.strictEqual((yield* fs.stat(file)).mode & 0o777, 0o600)
      assert.strictEqual((yield* fs.stat(dir)).mode & 0o777, 0o700)

      // No --base-url from here on: the server comes from the credentials file too.
      const whoami = yield* run("whoami")
      assert.strictEqual(whoami.exitCode, 0, whoami.stderr)
      assert.deepStrictEqual(whoami.stdout.split("\n"), [
        "USER                            EMAIL            NAME  SESSION                         EXPIRES",
        `${user.id}  ${EMAIL}  Ada   ${sessionId}  2030-01-02T03:04:05.000Z`,
        ""
      ])

      const logout = yield* run("logout")
      assert.strictEqual(logout.exitCode, 0, logout.stderr)
      assert.isFalse(yield* fs.exists(file))

      const signedOut = yield* run("whoami", "--base-url", baseUrl)
      assert.deepStrictEqual(signedOut, {
        stdout: "",
        stderr: "error unauthenticated: Missing or invalid bearer token\nhint: sign in with `cpctl login`\n",
        exitCode: 1
      })
    }))

  it.effect("workspaces: tables, --json, and wire errors as `error <code>: <message>`", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const env = {
        CP_BASE_URL: yield* HttpServer.addressFormattedWith(Effect.succeed),
        CP_TOKEN: TOKEN,
        CP_CONFIG_DIR: yield* fs.makeTempDirectoryScoped()
      }

      const created = yield* cpctl(env, "workspaces", "create", "Acme Corp", "--slug", "acme", "--json")
      assert.strictEqual(created.exitCode, 0, created.stderr)
      const Created = Schema.Struct({ organization: Organization, membership: Membership })
      const { organization, membership } = parse(Created, created.stdout)
      assert.deepInclude(organization, { slug: "acme", name: "Acme Corp", createdAt: at })
      assert.strictEqual(membership.role, "owner")

      const list = yield* cpctl(env, "workspaces", "list")
      assert.strictEqual(list.exitCode, 0, list.stderr)
      assert.match(list.stdout, /^ID\s+SLUG\s+NAME\s+REF\s+KIND\s+CREATED\n/)
      assert.include(list.stdout, `${organization.id}  acme  Acme Corp`)

      const got = yield* cpctl(env, "--json", "workspaces", "get", "acme")
      assert.deepStrictEqual(parse(Schema.Struct({ organization: Organization }), got.stdout), { organization })

      assert.deepStrictEqual(yield* cpctl(env, "workspaces", "get", "nope"), {
        stdout: "",
        stderr: "error not_found: Workspace not found\n",
        exitCode: 1
      })
      assert.deepStrictEqual(yield* cpctl(env, "workspaces", "create", "Acme", "--slug", "acme"), {
        stdout: "",
        stderr: "error conflict: Slug is taken\ndetails: {\"slug\":\"acme\"}\n",
        exitCode: 1
      })
      const badToken = yield* cpctl(env, "workspaces", "list", "--token", "tok_wrong")
      assert.strictEqual(badToken.exitCode, 1)
      assert.match(badToken.stderr, /^error unauthenticated: /)
    }))
})
