/**
 * Agent provider connections end to end over real HTTP (spec "Agent provider connections"; integrations-agents.md §4;
 * contract §3 SECRETS_KEK, AGENT_* variables, `/dev` simulators, §4 `provider_unavailable`): each provider verified
 * through its simulator's API shape, `key_rejected` (nothing stored) and `unverified` outcomes, a provider that is
 * down, times out or fails, the list (bare array, workspace rows first, platform rows, provider filter), the
 * `platform-` name check before custody, 409 `provider_connection_conflict`, PATCH with a re-verified key, verify,
 * DELETE with crypto-shredding, read-only platform rows, events and audit without key material, the plaintext scan
 * (database, responses, logs), and KEK rotation end to end across server restarts on one database.
 */
import { AgentProviderConnection, KekRotation, Organization } from "@cp/domain"
import { Database } from "@cp/persistence"
import { sha256Hex } from "@cp/server/platform/crypto"
import { open } from "@cp/server/platform/secretBox"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes, randomUUID } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlRun, printedAs, tokenEnv } from "./support/cli.ts"
import { failed, invalidFields, ok, type Res } from "./support/envelope.ts"
import { assertNotInDatabase, captured, CaptureLogs } from "./support/plaintext.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const kekOf = (base64: string) => ({ id: sha256Hex(base64).slice(0, 12), key: Buffer.from(base64, "base64") })
const KEK_BASE64 = randomBytes(32).toString("base64")
const kek = kekOf(KEK_BASE64)
const ADMIN_EMAIL = freshEmail("operator")

/** A local HTTP server with a fixed behaviour, standing in for a provider that misbehaves. */
const fakeProvider = (behaviour: "hang" | "fail") =>
  new Promise<{ readonly server: Server; readonly url: string }>((resolve) => {
    const server = createServer((_request, response) => {
      if (behaviour === "fail") {
        response.writeHead(503, { "content-type": "application/json" })
        response.end(JSON.stringify({ error: "overloaded" }))
      }
      // "hang": never answers.
    })
    server.listen(
      0,
      "127.0.0.1",
      () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
    )
  })
const hanging = await fakeProvider("hang")
const failing = await fakeProvider("fail")
/** A port nothing listens on: a provider that is down. */
const DOWN_URL = "http://127.0.0.1:9"

const connectionOf = (res: Res) => ok(res, { connection: AgentProviderConnection }).connection
const listOf = (res: Res) => Schema.decodeUnknownSync(Schema.Array(AgentProviderConnection))(ok(res))

const newWorld = Effect.gen(function*() {
  const { baseUrl } = yield* TestServer
  const session = yield* signIn(baseUrl, { email: freshEmail("agents") })
  const [personal] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }), {
    organizations: Schema.Array(Organization)
  }).organizations
  assert.isDefined(personal)
  const prefix = `/v1/organizations/${personal.id}/agents/providers`
  const api = (method: string, path: string, body?: unknown) =>
    call(
      baseUrl,
      method,
      `${prefix}${path}`,
      body === undefined ? { token: session.token } : {
        token: session.token,
        body
      }
    )
  return { baseUrl, orgId: personal.id, token: session.token, prefix, api }
})

/** A key the simulator accepts, unique per call so a scan can look for it. */
const goodKey = (label = "key") => `sk-${label}-${randomUUID()}`

for (const backend of sqlBackends) {
  layer(
    Layer.merge(
      testServerOver(databaseLayer(backend), { SECRETS_KEK: KEK_BASE64, PLATFORM_ADMIN_EMAILS: ADMIN_EMAIL }),
      NodeServices.layer
    ).pipe(Layer.provideMerge(CaptureLogs)),
    { excludeTestServices: true, timeout: 60_000 }
  )(`agent providers [${backend}]`, (it) => {
    it.effect("each provider's key is verified through its simulator and stored verified, with a hint only", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        for (const provider of ["anthropic", "openai", "gemini", "modal"] as const) {
          const apiKey = goodKey(provider)
          const res = yield* api("POST", "", { provider, apiKey, config: { defaultModel: "m-1" } })
          const connection = connectionOf(res)
          assert.strictEqual(connection.provider, provider)
          assert.strictEqual(connection.name, "default")
          assert.strictEqual(connection.status, "verified")
          assert.strictEqual(connection.keyHint, `…${apiKey.slice(-4)}`)
          assert.deepStrictEqual(connection.config, { defaultModel: "m-1" })
          assert.match(connection.id, /^apc_[0-9A-HJKMNP-TV-Z]{26}$/)
          assert.isString(connection.lastVerifiedAt)
          assert.notInclude(res.text, apiKey)
        }
      }))

    it.effect("a rejected key is 412 key_rejected and nothing is stored", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        for (const provider of ["anthropic", "openai", "gemini", "modal"] as const) {
          const rejected = failed(
            yield* api("POST", "", { provider, apiKey: "sk-invalid-key-123" }),
            412,
            "precondition_failed"
          )
          assert.strictEqual(rejected.details["reason"], "key_rejected")
          // Too short for the simulator: rejected as well.
          failed(yield* api("POST", "", { provider, apiKey: "short" }), 412, "precondition_failed")
        }
        assert.deepStrictEqual(listOf(yield* api("GET", "")).filter((row) => row.source !== "platform"), [])
      }))

    it.effect("the list is a bare array: workspace rows newest first, then the platform rows; provider filters", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const first = connectionOf(yield* api("POST", "", { provider: "openai", apiKey: goodKey(), name: "one" }))
        const second = connectionOf(yield* api("POST", "", { provider: "anthropic", apiKey: goodKey(), name: "two" }))
        const res = yield* api("GET", "")
        const rows = listOf(res)
        assert.deepStrictEqual(rows.map((row) => row.id), [
          second.id,
          first.id,
          "apc_platform_anthropic_default",
          "apc_platform_openai_default"
        ])
        assert.deepStrictEqual(Schema.decodeUnknownSync(Schema.Array(Schema.Unknown))(ok(res))[2], {
          id: "apc_platform_anthropic_default",
          provider: "anthropic",
          name: "platform-default",
          config: {},
          keyHint: null,
          status: "verified",
          lastVerifiedAt: "1970-01-01T00:00:00.000Z",
          createdBy: "platform",
          createdAt: "1970-01-01T00:00:00.000Z",
          updatedAt: "1970-01-01T00:00:00.000Z",
          source: "platform"
        })
        assert.isNull(
          Schema.decodeUnknownSync(Schema.Struct({ meta: Schema.Struct({ cursor: Schema.Null }) }))(res.json)
            .meta.cursor
        )
        assert.deepStrictEqual(listOf(yield* api("GET", "?provider=openai")).map((row) => row.id), [
          first.id,
          "apc_platform_openai_default"
        ])
        assert.deepStrictEqual(listOf(yield* api("GET", "?provider=modal")), [])
        assert.property(invalidFields(yield* api("GET", "?provider=nope")), "provider")
      }))

    it.effect("names starting platform- are 422 before the provider is asked (even with a rejected key)", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const fields = invalidFields(
          yield* api("POST", "", { provider: "openai", apiKey: "sk-invalid-and-rejected", name: "platform-x" })
        )
        assert.deepStrictEqual(fields["name"], ["names starting 'platform-' are reserved"])
        const created = connectionOf(yield* api("POST", "", { provider: "openai", apiKey: goodKey(), name: "ok" }))
        assert.property(
          invalidFields(yield* api("PATCH", `/${created.id}`, { name: "platform-default" })),
          "name"
        )
      }))

    it.effect("bad bodies are 422 on their fields", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const fields = invalidFields(yield* api("POST", "", { provider: "acme", name: "", config: [] }))
        for (const field of ["provider", "apiKey", "name", "config"]) assert.property(fields, field)
        assert.property(
          invalidFields(yield* api("POST", "", { provider: "openai", apiKey: "sk with space" })),
          "apiKey"
        )
      }))

    it.effect("a duplicate (provider, name) is 409 provider_connection_conflict; other providers may reuse it", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        connectionOf(yield* api("POST", "", { provider: "openai", apiKey: goodKey() }))
        failed(yield* api("POST", "", { provider: "openai", apiKey: goodKey() }), 409, "provider_connection_conflict")
        connectionOf(yield* api("POST", "", { provider: "gemini", apiKey: goodKey() }))
        const other = connectionOf(yield* api("POST", "", { provider: "openai", apiKey: goodKey(), name: "b" }))
        failed(yield* api("PATCH", `/${other.id}`, { name: "default" }), 409, "provider_connection_conflict")
      }))

    it.effect("PATCH renames and re-configures; a new key is verified first (rejected: 412, nothing changes)", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const created = connectionOf(yield* api("POST", "", { provider: "anthropic", apiKey: goodKey() }))
        const renamed = connectionOf(yield* api("PATCH", `/${created.id}`, { name: "prod", config: { a: 1 } }))
        assert.strictEqual(renamed.name, "prod")
        assert.deepStrictEqual(renamed.config, { a: 1 })
        assert.strictEqual(renamed.keyHint, created.keyHint)
        const rejected = failed(
          yield* api("PATCH", `/${created.id}`, { apiKey: "sk-invalid-new" }),
          412,
          "precondition_failed"
        )
        assert.strictEqual(rejected.details["reason"], "key_rejected")
        const unchanged = listOf(yield* api("GET", "?provider=anthropic")).find((row) => row.id === created.id)
        assert.strictEqual(unchanged?.keyHint, created.keyHint)
        const newKey = goodKey("new")
        const rekeyed = connectionOf(yield* api("PATCH", `/${created.id}`, { apiKey: newKey }))
        assert.strictEqual(rekeyed.keyHint, `…${newKey.slice(-4)}`)
        assert.strictEqual(rekeyed.status, "verified")
        failed(yield* api("PATCH", `/apc_${"0".repeat(26)}`, { name: "x" }), 404, "not_found")
        failed(yield* api("PATCH", "/not-an-id", { name: "x" }), 404, "not_found")
      }))

    it.effect("verify re-checks the stored key: verified, with lastVerifiedAt", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const created = connectionOf(yield* api("POST", "", { provider: "modal", apiKey: goodKey() }))
        const verified = connectionOf(yield* api("POST", `/${created.id}/verify`))
        assert.strictEqual(verified.status, "verified")
        assert.isTrue(Date.parse(verified.lastVerifiedAt ?? "") >= Date.parse(created.lastVerifiedAt ?? ""))
      }))

    it.effect("DELETE shreds custody (key and data key gone) before the row is marked deleted", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const created = connectionOf(yield* api("POST", "", { provider: "openai", apiKey: goodKey() }))
        const deleted = connectionOf(yield* api("DELETE", `/${created.id}`))
        assert.strictEqual(deleted.id, created.id)
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ sealedKey: string | null; wrappedDataKey: string | null; deletedAt: Date | null }>`
          select sealed_key, wrapped_data_key, deleted_at from agent_connections where id = ${created.id}`.pipe(
          Effect.orDie
        )
        assert.isNull(row?.sealedKey)
        assert.isNull(row?.wrappedDataKey)
        assert.isNotNull(row?.deletedAt)
        failed(yield* api("DELETE", `/${created.id}`), 404, "not_found")
        failed(yield* api("POST", `/${created.id}/verify`), 404, "not_found")
        assert.notInclude(listOf(yield* api("GET", "")).map((row) => row.id), created.id)
        // The name is free again.
        connectionOf(yield* api("POST", "", { provider: "openai", apiKey: goodKey() }))
      }))

    it.effect("platform rows are read-only: PATCH, DELETE and verify are 409 conflict", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const id = "apc_platform_openai_default"
        for (
          const [method, path, body] of [["PATCH", `/${id}`, { name: "x" }], ["DELETE", `/${id}`], [
            "POST",
            `/${id}/verify`
          ]] as const
        ) {
          const error = failed(yield* api(method, path, body), 409, "conflict")
          assert.strictEqual(error.details["reason"], "platform_connection_read_only")
        }
        failed(yield* api("DELETE", "/apc_platform_gemini_default"), 404, "not_found")
      }))

    it.effect("events and audit entries name the connection and never its key", () =>
      Effect.gen(function*() {
        const { api, baseUrl, orgId, token } = yield* newWorld
        const apiKey = goodKey("audit")
        const created = connectionOf(yield* api("POST", "", { provider: "gemini", apiKey }))
        const newKey = goodKey("audit2")
        connectionOf(yield* api("PATCH", `/${created.id}`, { apiKey: newKey, name: "renamed" }))
        connectionOf(yield* api("DELETE", `/${created.id}`))
        const audit = yield* call(baseUrl, "GET", `/v1/organizations/${orgId}/audit`, { token })
        for (const type of ["agent_provider.connected", "agent_provider.updated", "agent_provider.disconnected"]) {
          assert.include(audit.text, type)
        }
        assert.notInclude(audit.text, apiKey)
        assert.notInclude(audit.text, newKey)
        const sql = yield* SqlClient.SqlClient
        const events = yield* sql<{ type: string; data: unknown }>`
          select type, data from events where org_id = ${orgId} and type like 'agent_provider.%'`.pipe(Effect.orDie)
        assert.lengthOf(events, 3)
        assert.deepStrictEqual(events.map((event) => event.type).sort(), [
          "agent_provider.connected",
          "agent_provider.disconnected",
          "agent_provider.updated"
        ])
        for (const key of [apiKey, newKey]) assert.notInclude(JSON.stringify(events), key)
      }))

    it.effect("the keys are in no table, no response and no log line; the stored key opens under the KEK", () =>
      Effect.gen(function*() {
        const { api, orgId } = yield* newWorld
        const bodies: Array<string> = []
        const keep = (res: Res) => {
          bodies.push(res.text)
          return res
        }
        const needle = `NEEDLE-${randomUUID()}`
        const rotated = `ROTATED-${randomUUID()}`
        const created = connectionOf(keep(yield* api("POST", "", { provider: "anthropic", apiKey: needle })))
        keep(yield* api("PATCH", `/${created.id}`, { apiKey: rotated }))
        keep(yield* api("POST", `/${created.id}/verify`))
        keep(yield* api("GET", ""))
        // A rejected key is logged nowhere either.
        const rejected = `NEEDLE-invalid-${randomUUID()}`
        keep(yield* api("POST", "", { provider: "openai", apiKey: rejected }))
        for (const body of bodies) {
          for (const key of [needle, rotated, rejected]) assert.notInclude(body, key)
        }
        yield* Effect.logInfo("agents log probe")
        assert.isTrue(captured.some((line) => line.includes("agents log probe")))
        for (const line of captured) {
          for (const key of [needle, rotated, rejected]) assert.notInclude(line, key)
        }
        yield* assertNotInDatabase(
          [needle, rotated, rejected, Buffer.from(rotated).toString("base64")],
          "agent_connections.sealed_key"
        )
        const sql = yield* SqlClient.SqlClient
        // Envelope: the data key opens under the KEK, and the key under the data key.
        const [row] = yield* sql<{ sealedKey: string; wrappedDataKey: string; kekId: string }>`
          select sealed_key, wrapped_data_key, kek_id from agent_connections
          where id = ${created.id} and org_id = ${orgId}`.pipe(Effect.orDie)
        assert.isDefined(row)
        assert.strictEqual(row.kekId, kek.id)
        const dataKey = open(kek, row.wrappedDataKey)
        assert.isDefined(dataKey)
        assert.isUndefined(open(kek, row.sealedKey), "the key is not sealed under the KEK itself")
        assert.strictEqual(open({ id: "dek", key: Buffer.from(dataKey ?? "", "base64") }, row.sealedKey), rotated)
      }))

    it.effect("the simulator exists in test mode, answering in each provider's shape", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const models = yield* call(baseUrl, "GET", "/dev/agents/openai/v1/models", { token: "sk-good-key-1" })
        assert.strictEqual(models.status, 200)
        assert.deepInclude(models.json, { object: "list" })
        const refused = yield* call(baseUrl, "GET", "/dev/agents/anthropic/v1/models", {
          headers: { "x-api-key": "sk-good-key-1" }
        })
        assert.strictEqual(refused.status, 401, "anthropic also wants anthropic-version")
        const gemini = yield* call(baseUrl, "GET", "/dev/agents/gemini/v1beta/models", {
          headers: { "x-goog-api-key": "sk-invalid-1" }
        })
        assert.strictEqual(gemini.status, 403)
      }))

    it.effect("cpctl agents providers: connect (key on stdin), list, update --key, verify, disconnect; admin", () =>
      Effect.gen(function*() {
        const { baseUrl, orgId, token } = yield* newWorld
        const env = tokenEnv(baseUrl, token)
        const run = (args: ReadonlyArray<string>, stdin?: string) => cpctlRun(env, args, stdin)
        const apiKey = goodKey("cli")
        const connected = yield* run(
          ["agents", "providers", "connect", "gemini", "-w", orgId, "--name", "cli", "--config", "{\"a\":1}", "--json"],
          `${apiKey}\n`
        )
        assert.strictEqual(connected.exitCode, 0, connected.stderr)
        const connection = printedAs(connected, AgentProviderConnection)
        assert.strictEqual(connection.keyHint, `…${apiKey.slice(-4)}`)
        assert.deepStrictEqual(connection.config, { a: 1 })
        const listed = yield* run(["agents", "providers", "list", "-w", orgId, "--provider", "gemini", "--json"])
        assert.deepStrictEqual(printedAs(listed, Schema.Array(AgentProviderConnection)).map((row) => row.id), [
          connection.id
        ])
        const table = yield* run(["agents", "providers", "list", "-w", orgId])
        assert.include(table.stdout, "platform-default")
        const newKey = goodKey("cli2")
        const updated = yield* run(
          ["agents", "providers", "update", connection.id, "-w", orgId, "--key", "--json"],
          newKey
        )
        assert.strictEqual(printedAs(updated, AgentProviderConnection).keyHint, `…${newKey.slice(-4)}`)
        const rejected = yield* run(["agents", "providers", "connect", "openai", "-w", orgId], "sk-invalid-cli")
        assert.strictEqual(rejected.exitCode, 1)
        assert.include(rejected.stderr, "error precondition_failed")
        const empty = yield* run(["agents", "providers", "connect", "openai", "-w", orgId], "")
        assert.strictEqual(empty.exitCode, 2)
        const verified = yield* run(["agents", "providers", "verify", connection.id, "-w", orgId, "--json"])
        assert.strictEqual(printedAs(verified, AgentProviderConnection).status, "verified")
        const unconfirmed = yield* run(["agents", "providers", "disconnect", connection.id, "-w", orgId])
        assert.strictEqual(unconfirmed.exitCode, 2)
        const disconnected = yield* run(["agents", "providers", "disconnect", connection.id, "-w", orgId, "--yes"])
        assert.strictEqual(disconnected.exitCode, 0, disconnected.stderr)
        assert.include(disconnected.stdout, `Disconnected ${connection.id}`)
        for (const output of [connected, listed, updated, rejected, verified, disconnected]) {
          for (const key of [apiKey, newKey, "sk-invalid-cli"]) assert.notInclude(output.stdout + output.stderr, key)
        }
        const notOperator = yield* run(["admin", "rotate-kek"])
        assert.strictEqual(notOperator.exitCode, 1)
        assert.include(notOperator.stderr, "error not_found")
        const operator = yield* signIn(baseUrl, { email: ADMIN_EMAIL })
        const rotated = yield* cpctlRun(tokenEnv(baseUrl, operator.token), ["admin", "rotate-kek", "--json"])
        assert.strictEqual(rotated.exitCode, 0, rotated.stderr)
        assert.deepStrictEqual(printedAs(rotated, KekRotation), { kekId: kek.id, rewrapped: 0, remaining: 0 })
      }))

    it.effect("rotate-kek is for operators only: 404 to anyone else", () =>
      Effect.gen(function*() {
        const { baseUrl, token } = yield* newWorld
        failed(yield* call(baseUrl, "POST", "/v1/admin/kek/rotate", { token }), 404, "not_found")
        failed(yield* call(baseUrl, "POST", "/v1/admin/kek/rotate"), 401, "unauthenticated")
        const operator = yield* signIn(baseUrl, { email: ADMIN_EMAIL })
        const rotation = ok(yield* call(baseUrl, "POST", "/v1/admin/kek/rotate", { token: operator.token }), {
          rotation: KekRotation
        }).rotation
        assert.deepStrictEqual(rotation, { kekId: kek.id, rewrapped: 0, remaining: 0 })
      }))
  })

  /** Providers that are down, hang past the timeout, or fail (503): `unverified` on create, 502 on verify. */
  layer(
    testServerOver(databaseLayer(backend), {
      AGENT_ANTHROPIC_BASE_URL: DOWN_URL,
      AGENT_OPENAI_BASE_URL: hanging.url,
      AGENT_GEMINI_BASE_URL: failing.url,
      AGENT_PROVIDER_TIMEOUT_MS: "300"
    }).pipe(Layer.provideMerge(CaptureLogs)),
    { excludeTestServices: true, timeout: 60_000 }
  )(`agent providers that cannot answer [${backend}]`, (it) => {
    it.effect("down, timed out or failing: the connection is stored unverified; verify answers 502", () =>
      Effect.gen(function*() {
        const { api } = yield* newWorld
        const keys: Array<string> = []
        for (const provider of ["anthropic", "openai", "gemini"] as const) {
          const apiKey = goodKey(provider)
          keys.push(apiKey)
          const created = connectionOf(yield* api("POST", "", { provider, apiKey }))
          assert.strictEqual(created.status, "unverified", provider)
          assert.isNull(created.lastVerifiedAt)
          failed(yield* api("POST", `/${created.id}/verify`), 502, "provider_unavailable")
          const again = goodKey("again")
          keys.push(again)
          const rekeyed = connectionOf(yield* api("PATCH", `/${created.id}`, { apiKey: again }))
          assert.strictEqual(rekeyed.status, "unverified")
        }
        // The server logged each failure (provider and reason only), never a key.
        assert.isAtLeast(captured.filter((line) => line.includes("Agent provider could not verify a key")).length, 9)
        for (const line of captured) for (const key of keys) assert.notInclude(line, key)
        // The simulator still serves modal on this server.
        assert.strictEqual(
          connectionOf(yield* api("POST", "", { provider: "modal", apiKey: goodKey() })).status,
          "verified"
        )
      }))
  })

  describe(`KEK rotation across restarts [${backend}]`, () => {
    layer(Layer.mergeAll(databaseLayer(backend), NodeServices.layer), { excludeTestServices: true, timeout: 120_000 })(
      "one database, three server generations",
      (it) => {
        /** Runs `body` against a whole server over the shared database with `env`, then stops that server. */
        const withServer = <A>(
          env: Record<string, string>,
          body: (baseUrl: string) => Effect.Effect<A, never, SqlClient.SqlClient>
        ) =>
          Effect.gen(function*() {
            const database = yield* Effect.context<Database.Database>()
            const scope = yield* Scope.make()
            const built = yield* Layer.buildWithScope(
              testServerOver(Layer.succeedContext(database), env),
              scope
            ).pipe(Effect.orDie)
            const { baseUrl } = Context.get(built, TestServer)
            const result = yield* body(baseUrl)
            yield* Scope.close(scope, Exit.void)
            return result
          })

        it.effect("old KEK reads until rotation re-wraps every data key; then the old KEK is no longer needed", () =>
          Effect.gen(function*() {
            const oldKek = randomBytes(32).toString("base64")
            const newKek = randomBytes(32).toString("base64")
            const admin = freshEmail("kekop")
            const sql = yield* SqlClient.SqlClient
            const keyIds = () =>
              sql<{ kekId: string | null }>`select kek_id from agent_connections where deleted_at is null`.pipe(
                Effect.map((rows) => rows.map((row) => row.kekId)),
                Effect.orDie
              )
            // Generation 1: the old KEK; two connections.
            const world = yield* withServer(
              { SECRETS_KEK: oldKek, AGENT_ANTHROPIC_BASE_URL: DOWN_URL },
              (baseUrl) =>
                Effect.gen(function*() {
                  const session = yield* signIn(baseUrl, { email: admin })
                  const [personal] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }), {
                    organizations: Schema.Array(Organization)
                  }).organizations
                  const prefix = `/v1/organizations/${personal!.id}/agents/providers`
                  const ids: Array<string> = []
                  for (const provider of ["openai", "modal"] as const) {
                    const res = yield* call(baseUrl, "POST", prefix, {
                      token: session.token,
                      body: { provider, apiKey: goodKey(provider) }
                    })
                    ids.push(connectionOf(res).id)
                  }
                  // The anthropic API is down: a key it would refuse is stored unverified, found invalid later.
                  const unverified = connectionOf(
                    yield* call(baseUrl, "POST", prefix, {
                      token: session.token,
                      body: { provider: "anthropic", apiKey: "sk-invalid-stored-while-down" }
                    })
                  )
                  assert.strictEqual(unverified.status, "unverified")
                  // An Idempotency-Key answer, stored sealed under the old KEK.
                  const first = yield* call(baseUrl, "POST", prefix, {
                    token: session.token,
                    body: { provider: "gemini", apiKey: "sk-idempotent-key" },
                    headers: { "idempotency-key": "kek-rotation-replay" }
                  })
                  ids.push(connectionOf(first).id)
                  return { token: session.token, prefix, ids, unverifiedId: unverified.id, first }
                })
            )
            assert.deepStrictEqual(yield* keyIds(), Array(4).fill(kekOf(oldKek).id))
            // A stray generation under a KEK nobody configures later: its key cannot be re-wrapped.
            const strayKek = randomBytes(32).toString("base64")
            const strayId = yield* withServer({ SECRETS_KEK: strayKek }, (baseUrl) =>
              Effect.map(
                call(baseUrl, "POST", world.prefix, {
                  token: world.token,
                  body: { provider: "openai", apiKey: goodKey("stray"), name: "stray" }
                }),
                (res) => connectionOf(res).id
              ))
            // Generation 2: the new KEK, the old one still accepted for reads; verify opens keys under the old one.
            yield* withServer(
              { SECRETS_KEK: newKek, SECRETS_KEK_PREVIOUS: oldKek, PLATFORM_ADMIN_EMAILS: admin },
              (baseUrl) =>
                Effect.gen(function*() {
                  // The stored answer still opens under the previous KEK: replayed byte for byte.
                  const replay = yield* call(baseUrl, "POST", world.prefix, {
                    token: world.token,
                    body: { provider: "gemini", apiKey: "sk-idempotent-key" },
                    headers: { "idempotency-key": "kek-rotation-replay" }
                  })
                  assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
                  assert.strictEqual(replay.text, world.first.text)
                  for (const id of world.ids) {
                    const verified = connectionOf(
                      yield* call(baseUrl, "POST", `${world.prefix}/${id}/verify`, { token: world.token })
                    )
                    assert.strictEqual(verified.status, "verified")
                  }
                  const rotation = ok(
                    yield* call(baseUrl, "POST", "/v1/admin/kek/rotate", { token: world.token }),
                    { rotation: KekRotation }
                  ).rotation
                  assert.deepStrictEqual(rotation, { kekId: kekOf(newKek).id, rewrapped: 4, remaining: 1 })
                  const again = ok(
                    yield* call(baseUrl, "POST", "/v1/admin/kek/rotate", { token: world.token }),
                    { rotation: KekRotation }
                  ).rotation
                  assert.deepStrictEqual(again, { kekId: kekOf(newKek).id, rewrapped: 0, remaining: 1 })
                })
            )
            assert.deepStrictEqual(
              (yield* keyIds()).sort(),
              [...Array(4).fill(kekOf(newKek).id), kekOf(strayKek).id].sort()
            )
            // Generation 3: only the new KEK; every key still opens.
            yield* withServer({ SECRETS_KEK: newKek }, (baseUrl) =>
              Effect.gen(function*() {
                for (const id of world.ids) {
                  const verified = connectionOf(
                    yield* call(baseUrl, "POST", `${world.prefix}/${id}/verify`, { token: world.token })
                  )
                  assert.strictEqual(verified.status, "verified")
                }
                // The simulator answers now, and refuses the key stored while the provider was down.
                const invalid = connectionOf(
                  yield* call(baseUrl, "POST", `${world.prefix}/${world.unverifiedId}/verify`, { token: world.token })
                )
                assert.strictEqual(invalid.status, "invalid")
                assert.isString(invalid.lastVerifiedAt)
                // Disconnecting needs no KEK: the stray key is shredded, and nothing is left to rotate.
                connectionOf(yield* call(baseUrl, "DELETE", `${world.prefix}/${strayId}`, { token: world.token }))
              }))
          }))
      }
    )
  })
}
