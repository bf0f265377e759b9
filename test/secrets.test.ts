/**
 * Secrets end to end over real HTTP and the typed client (spec: secret resource, "Configuration (under {scope})"
 * secrets rows, States and transitions; contract §3 SECRETS_KEK, §4 validation phrases, Idempotency-Key, response
 * data shapes): every route at workspace, project and environment scope, every error (both `scope` messages), an
 * Idempotency-Key replay on create, and the point of it all: the plaintext is nowhere — not in any table of the
 * database, any response body, any event or audit row, nor any log line — while the stored ciphertext opens to it
 * under the server's KEK. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 */
import { Secret } from "@cp/domain"
import { sha256Hex } from "@cp/server/platform/crypto"
import { newId } from "@cp/server/platform/ids"
import { open } from "@cp/server/platform/secretBox"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Cause, Effect, Layer, Logger, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes, randomUUID } from "node:crypto"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlRun, tokenEnv } from "./support/cli.ts"
import { failed, ok, type Res } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const backends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** The server's KEK, set explicitly so the test can open what it stored. */
const KEK_BASE64 = randomBytes(32).toString("base64")
const kek = { id: sha256Hex(KEK_BASE64).slice(0, 12), key: Buffer.from(KEK_BASE64, "base64") }

/** Everything the server (and anything else in this worker) logs: Effect loggers and raw stdout/stderr writes. */
const captured: Array<string> = []
const CaptureLogs = Logger.layer([
  Logger.make(({ cause, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    captured.push(
      [...parts.map((part) => typeof part === "string" ? part : JSON.stringify(part)), Cause.pretty(cause)].join(" ")
    )
  })
])
for (const stream of [process.stdout, process.stderr]) {
  const write = stream.write.bind(stream) as (...args: Array<unknown>) => boolean
  stream.write = ((chunk: unknown, ...rest: Array<unknown>) => {
    captured.push(typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8"))
    return write(chunk, ...rest)
  }) as typeof stream.write
}

/** Runs `cpctl` with a token and optional stdin; collects its output and exit code. */
const cpctl = (baseUrl: string, token: string, args: ReadonlyArray<string>, stdin?: string) =>
  cpctlRun(tokenEnv(baseUrl, token), args, stdin)

for (const backend of backends) {
  layer(
    // SMTP_URL names a closed port: every sign-in mail fails to send and the server logs it, which proves the
    // capture sees the server's own log lines.
    Layer.merge(
      testServerOver(databaseLayer(backend), { SECRETS_KEK: KEK_BASE64, SMTP_URL: "smtp://127.0.0.1:9" }),
      NodeServices.layer
    )
      .pipe(Layer.provideMerge(CaptureLogs)),
    { excludeTestServices: true, timeout: 60_000 }
  )(`secrets [${backend}]`, (it) => {
    /** Every response body the suite saw, for the plaintext scan. */
    const bodies: Array<string> = []
    const record = (res: Res) => {
      bodies.push(res.text)
      return res
    }

    /** A fresh owner with its `Personal` workspace, one project and one environment seeded into the database. */
    const newWorld = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const session = yield* signIn(baseUrl, { email: freshEmail("secrets") })
      const orgId: string =
        ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token })).organizations[0].id
      const sql = yield* SqlClient.SqlClient
      const now = new Date()
      const projectId = newId("prj_", now.getTime())
      const environmentId = newId("env_", now.getTime())
      yield* sql`insert into projects ${
        sql.insert({
          id: projectId,
          orgId,
          name: "App",
          slug: `app-${randomUUID().slice(0, 8)}`,
          status: "active",
          createdAt: now,
          updatedAt: now,
          archivedAt: null
        })
      }`.pipe(Effect.orDie)
      yield* sql`insert into environments ${
        sql.insert({
          id: environmentId,
          orgId,
          projectId,
          name: "Production",
          slug: "production",
          status: "active",
          createdAt: now,
          updatedAt: now,
          archivedAt: null,
          lastActiveAt: null
        })
      }`.pipe(Effect.orDie)
      const prefixes = {
        organization: `/v1/organizations/${orgId}`,
        project: `/v1/organizations/${orgId}/projects/${projectId}`,
        environment: `/v1/organizations/${orgId}/projects/${projectId}/environments/${environmentId}`
      }
      const as = (token: string) => (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
        Effect.map(
          call(baseUrl, method, path, {
            token,
            ...(body === undefined ? {} : { body }),
            ...(headers === undefined ? {} : { headers })
          }),
          record
        )
      return { baseUrl, session, orgId, projectId, environmentId, prefixes, api: as(session.token), as }
    })

    it.effect("create, list, rotate and revoke at each scope answer metadata only", () =>
      Effect.gen(function*() {
        const { api, orgId, projectId, environmentId, prefixes, session } = yield* newWorld
        for (const [scopeKind, prefix] of Object.entries(prefixes)) {
          const created = ok(
            yield* api("POST", `${prefix}/config/secrets`, {
              secretKey: "DATABASE_URL",
              value: `value-at-${scopeKind}`,
              displayName: "Database"
            })
          ).secret
          assert.deepStrictEqual(Object.keys(created).sort(), [
            "createdAt",
            "createdBy",
            "displayName",
            "environmentId",
            "expiresAt",
            "id",
            "lastRotatedAt",
            "orgId",
            "projectId",
            "rotationPolicy",
            "scopeKind",
            "secretKey",
            "status",
            "updatedAt",
            "version"
          ])
          assert.match(created.id, /^sec_[0-9A-HJKMNP-TV-Z]{26}$/)
          assert.match(created.createdAt, ISO_MS)
          assert.include(created, {
            orgId,
            projectId: scopeKind === "organization" ? null : projectId,
            environmentId: scopeKind === "environment" ? environmentId : null,
            scopeKind,
            secretKey: "DATABASE_URL",
            displayName: "Database",
            status: "active",
            version: 1,
            rotationPolicy: null,
            lastRotatedAt: null,
            expiresAt: null,
            createdBy: session.user.id
          })

          const listed = ok(yield* api("GET", `${prefix}/config/secrets`))
          assert.deepStrictEqual(listed.secrets, [created])

          const rotated =
            ok(yield* api("POST", `${prefix}/config/secrets/${created.id}/rotate`, { value: `rotated-${scopeKind}` }))
              .secret
          assert.strictEqual(rotated.version, 2)
          assert.match(rotated.lastRotatedAt, ISO_MS)
          assert.strictEqual(rotated.updatedAt, rotated.lastRotatedAt)

          const revoked = ok(yield* api("DELETE", `${prefix}/config/secrets/${created.id}`)).secret
          assert.deepStrictEqual(revoked, { ...rotated, status: "revoked", updatedAt: revoked.updatedAt })
          // Revoking again answers the same final state; rotating a revoked secret is 409.
          assert.deepStrictEqual(ok(yield* api("DELETE", `${prefix}/config/secrets/${created.id}`)).secret, revoked)
          failed(
            yield* api("POST", `${prefix}/config/secrets/${created.id}/rotate`, { value: "again" }),
            409,
            "conflict"
          )
          assert.deepStrictEqual(
            ok(yield* api("GET", `${prefix}/config/secrets`)).secrets,
            [],
            "a revoked secret is not listed"
          )
        }
      }))

    it.effect("scope=all lists every scope of the workspace, paged with cursors bound to the filter; both scope messages", () =>
      Effect.gen(function*() {
        const { api, prefixes } = yield* newWorld
        const ids: Array<string> = []
        for (
          const [i, prefix] of [prefixes.organization, prefixes.project, prefixes.environment, prefixes.project]
            .entries()
        ) {
          ids.push(
            ok(yield* api("POST", `${prefix}/config/secrets`, { secretKey: `KEY_${i}`, value: "v", displayName: "k" }))
              .secret.id
          )
        }
        const newestFirst = [...ids].reverse()
        const all = ok(yield* api("GET", `${prefixes.organization}/config/secrets?scope=all`))
        assert.deepStrictEqual(all.secrets.map((s: any) => s.id), newestFirst)
        assert.deepStrictEqual(
          ok(yield* api("GET", `${prefixes.organization}/config/secrets`)).secrets.map((s: any) => s.id),
          [ids[0]]
        )

        const first = yield* api("GET", `${prefixes.organization}/config/secrets?scope=all&limit=3`)
        const page1 = first.json as any
        assert.deepStrictEqual(page1.data.secrets.map((s: any) => s.id), newestFirst.slice(0, 3))
        assert.isString(page1.meta.cursor)
        const cursor = encodeURIComponent(page1.meta.cursor)
        const page2 = (yield* api("GET", `${prefixes.organization}/config/secrets?scope=all&limit=3&cursor=${cursor}`))
          .json as any
        assert.deepStrictEqual(page2.data.secrets.map((s: any) => s.id), newestFirst.slice(3))
        assert.isNull(page2.meta.cursor)
        const unbound = failed(
          yield* api("GET", `${prefixes.organization}/config/secrets?limit=3&cursor=${cursor}`),
          422,
          "validation_failed"
        )
        assert.property(unbound.details.fields, "cursor")

        const notAll = failed(
          yield* api("GET", `${prefixes.organization}/config/secrets?scope=project`),
          422,
          "validation_failed"
        )
        assert.deepStrictEqual(Object.keys(notAll.details.fields), ["scope"])
        assert.include(notAll.details.fields.scope[0], "must be 'all' when present")
        for (const prefix of [prefixes.project, prefixes.environment]) {
          const allHere = failed(yield* api("GET", `${prefix}/config/secrets?scope=all`), 422, "validation_failed")
          assert.deepStrictEqual(Object.keys(allHere.details.fields), ["scope"])
          assert.include(allHere.details.fields.scope[0], "'all' is valid only on the organization scope")
        }
      }))

    it.effect("every error: validation, duplicate key, missing project/environment/secret, other scope, other workspace", () =>
      Effect.gen(function*() {
        const { api, prefixes, orgId, projectId, as, baseUrl } = yield* newWorld
        const path = `${prefixes.organization}/config/secrets`
        const invalid = failed(
          yield* api("POST", path, { secretKey: "lower-case", value: "", displayName: "" }),
          422,
          "validation_failed"
        )
        assert.includeMembers(Object.keys(invalid.details.fields), ["secretKey", "value", "displayName"])
        const missing = failed(yield* api("POST", path, {}), 422, "validation_failed")
        assert.includeMembers(Object.keys(missing.details.fields), ["secretKey", "value", "displayName"])
        failed(
          yield* api("POST", path, { secretKey: "A".repeat(129), value: "v", displayName: "d" }),
          422,
          "validation_failed"
        )

        const created =
          ok(yield* api("POST", path, { secretKey: "STRIPE_KEY", value: "v", displayName: "Stripe" })).secret
        const duplicate = failed(
          yield* api("POST", path, { secretKey: "STRIPE_KEY", value: "w", displayName: "Again" }),
          409,
          "conflict"
        )
        assert.notInclude(JSON.stringify(duplicate), "\"w\"")
        failed(yield* api("POST", `${path}/${created.id}/rotate`, {}), 422, "validation_failed")

        const otherProject = newId("prj_", Date.now())
        const otherEnv = newId("env_", Date.now())
        failed(
          yield* api("POST", `/v1/organizations/${orgId}/projects/${otherProject}/config/secrets`, {
            secretKey: "K",
            value: "v",
            displayName: "d"
          }),
          404,
          "not_found"
        )
        failed(
          yield* api("GET", `/v1/organizations/${orgId}/projects/${otherProject}/config/secrets`),
          404,
          "not_found"
        )
        failed(
          yield* api("GET", `/v1/organizations/${orgId}/projects/${projectId}/environments/${otherEnv}/config/secrets`),
          404,
          "not_found"
        )
        // A secret is reachable only under its own scope.
        failed(
          yield* api("POST", `${prefixes.project}/config/secrets/${created.id}/rotate`, { value: "x" }),
          404,
          "not_found"
        )
        failed(yield* api("DELETE", `${prefixes.environment}/config/secrets/${created.id}`), 404, "not_found")
        failed(yield* api("DELETE", `${path}/${newId("sec_", Date.now())}`), 404, "not_found")
        failed(yield* api("DELETE", `${path}/not-a-secret-id`), 404, "not_found")

        // Another user: the workspace is not visible (404); a viewer may read but not write (403).
        const stranger = yield* signIn(baseUrl, { email: freshEmail("stranger") })
        failed(yield* as(stranger.token)("GET", path), 404, "not_found")
        const viewer = yield* signIn(baseUrl, { email: freshEmail("viewer") })
        yield* seedMember(orgId, viewer.user.id, "viewer")
        ok(yield* as(viewer.token)("GET", path))
        const denied = failed(
          yield* as(viewer.token)("POST", path, { secretKey: "K", value: "v", displayName: "d" }),
          403,
          "forbidden"
        )
        assert.strictEqual(denied.details.permission, "organization.config.write")
        failed(yield* call(baseUrl, "GET", path), 401, "unauthenticated")
      }))

    it.effect("Idempotency-Key replays the create answer and creates one secret", () =>
      Effect.gen(function*() {
        const { api, prefixes } = yield* newWorld
        const path = `${prefixes.environment}/config/secrets`
        const headers = { "idempotency-key": `secret-${randomUUID()}` }
        const body = { secretKey: "REPLAYED", value: "idempotent-value", displayName: "Replayed" }
        const first = yield* api("POST", path, body, headers)
        const replay = yield* api("POST", path, {
          displayName: "Replayed",
          value: "idempotent-value",
          secretKey: "REPLAYED"
        }, headers)
        assert.strictEqual(replay.status, first.status)
        assert.strictEqual(replay.text, first.text)
        assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
        assert.isNull(first.headers.get("idempotent-replayed"))
        const reused = failed(
          yield* api("POST", path, { ...body, value: "another" }, headers),
          422,
          "validation_failed"
        )
        assert.strictEqual(reused.details.reason, "key_reused")
        assert.lengthOf(ok(yield* api("GET", path)).secrets, 1)
      }))

    it.effect("the typed client speaks every route", () =>
      Effect.gen(function*() {
        const { baseUrl, session, orgId, projectId, environmentId } = yield* newWorld
        const client = yield* clientFor(baseUrl, session.token)
        const input = { secretKey: "TYPED", value: "typed-value", displayName: "Typed" }
        const ws = (yield* client.secrets.create({ params: { orgId }, payload: input })).secret
        assert.instanceOf(ws.createdAt, Date)
        assert.isTrue(Schema.is(Secret)(ws))
        const pr =
          (yield* client.projectSecrets.create({ params: { orgId, projectId: projectId as never }, payload: input }))
            .secret
        const env = (yield* client.environmentSecrets.create({
          params: { orgId, projectId: projectId as never, environmentId: environmentId as never },
          payload: input
        })).secret
        const all = yield* client.secrets.list({ params: { orgId }, query: { scope: "all" } })
        assert.deepStrictEqual(all.data.secrets.map((s) => s.id), [env.id, pr.id, ws.id])
        assert.strictEqual(
          (yield* client.projectSecrets.rotate({
            params: { orgId, projectId: projectId as never, secretId: pr.id },
            payload: { value: "v2" }
          }))
            .secret.version,
          2
        )
        assert.strictEqual(
          (yield* client.environmentSecrets.revoke({
            params: { orgId, projectId: projectId as never, environmentId: environmentId as never, secretId: env.id }
          }))
            .secret.status,
          "revoked"
        )
        assert.lengthOf(
          (yield* client.projectSecrets.list({ params: { orgId, projectId: projectId as never }, query: {} })).data
            .secrets,
          1
        )
        assert.lengthOf(
          (yield* client.environmentSecrets.list({
            params: { orgId, projectId: projectId as never, environmentId: environmentId as never },
            query: {}
          }))
            .data.secrets,
          0
        )
        assert.strictEqual(
          (yield* client.secrets.rotate({ params: { orgId, secretId: ws.id }, payload: { value: "v3" } })).secret
            .version,
          2
        )
        assert.strictEqual(
          (yield* client.secrets.revoke({ params: { orgId, secretId: ws.id } })).secret.status,
          "revoked"
        )
        const error = yield* Effect.flip(client.secrets.list({ params: { orgId }, query: { scope: "everything" } }))
        assert.strictEqual((error as any).error.code, "validation_failed")
      }))

    it.effect("cpctl secrets set/rotate read the value from stdin, list and delete", () =>
      Effect.gen(function*() {
        const { baseUrl, session, orgId, projectId } = yield* newWorld
        const value = `cli-plaintext-${randomUUID()}`
        const set = yield* cpctl(baseUrl, session.token, [
          "secrets",
          "set",
          "CLI_KEY",
          "--workspace",
          orgId,
          "--project",
          projectId,
          "--display-name",
          "From CLI",
          "--json"
        ], `${value}\n`)
        assert.strictEqual(set.exitCode, 0, set.stderr)
        const secret = JSON.parse(set.stdout).secret
        assert.strictEqual(secret.secretKey, "CLI_KEY")
        assert.strictEqual(secret.projectId, projectId)
        const rotated = yield* cpctl(baseUrl, session.token, [
          "secrets",
          "rotate",
          secret.id,
          "--workspace",
          orgId,
          "--project",
          projectId,
          "--json"
        ], `${value}-2`)
        assert.strictEqual(rotated.exitCode, 0, rotated.stderr)
        assert.strictEqual(JSON.parse(rotated.stdout).secret.version, 2)
        const listed = yield* cpctl(baseUrl, session.token, ["secrets", "list", "--workspace", orgId, "--all"])
        assert.strictEqual(listed.exitCode, 0, listed.stderr)
        assert.include(listed.stdout, secret.id)
        assert.include(listed.stdout, "CLI_KEY")
        const deleted = yield* cpctl(baseUrl, session.token, [
          "secrets",
          "delete",
          secret.id,
          "--workspace",
          orgId,
          "--project",
          projectId,
          "--json"
        ])
        assert.strictEqual(deleted.exitCode, 0, deleted.stderr)
        assert.strictEqual(JSON.parse(deleted.stdout).secret.status, "revoked")
        const empty = yield* cpctl(baseUrl, session.token, ["secrets", "set", "EMPTY", "--workspace", orgId], "")
        assert.notStrictEqual(empty.exitCode, 0)
        for (const output of [set, rotated, listed, deleted]) {
          assert.notInclude(output.stdout + output.stderr, value)
        }
      }))

    it.effect("the plaintext is in no table, response, event, audit row or log line; the ciphertext opens under the KEK", () =>
      Effect.gen(function*() {
        const { api, prefixes, orgId } = yield* newWorld
        const plaintext = `PLAINTEXT-${randomUUID()}-needle`
        const rotatedPlaintext = `ROTATED-${randomUUID()}-needle`
        const made: Array<{ id: string; prefix: string }> = []
        for (const prefix of Object.values(prefixes)) {
          const created = ok(
            yield* api("POST", `${prefix}/config/secrets`, {
              secretKey: "NEEDLE",
              value: plaintext,
              displayName: "Needle"
            }, {
              "idempotency-key": `needle-${randomUUID()}`
            })
          ).secret
          made.push({ id: created.id, prefix })
        }
        const [first, second] = made
        ok(yield* api("POST", `${first!.prefix}/config/secrets/${first!.id}/rotate`, { value: rotatedPlaintext }))
        ok(yield* api("DELETE", `${second!.prefix}/config/secrets/${second!.id}`))
        // Make every read route answer too, so their bodies are scanned.
        for (const prefix of Object.values(prefixes)) ok(yield* api("GET", `${prefix}/config/secrets`))
        ok(yield* api("GET", `${prefixes.organization}/config/secrets?scope=all`))
        const audit = ok(yield* api("GET", `${prefixes.organization}/audit`))
        assert.isAbove(JSON.stringify(audit).split("secrets.updated").length - 1, 0, "the audit log shows the changes")
        yield* Effect.logInfo("log capture probe")

        const sql = yield* SqlClient.SqlClient
        const columns = yield* sql<{ tableName: string; columnName: string }>`
          select table_name, column_name from information_schema.columns
          where table_schema = current_schema()
            and data_type in ('text', 'character varying', 'character', 'jsonb', 'json', 'bytea', 'ARRAY')`.pipe(
          Effect.orDie
        )
        assert.isAbove(columns.length, 20)
        assert.isTrue(columns.some((c) => c.tableName === "secrets" && c.columnName === "sealed_value"))
        for (const { tableName, columnName } of columns) {
          for (const needle of [plaintext, rotatedPlaintext, Buffer.from(plaintext).toString("base64")]) {
            const hits = yield* sql<{ n: number }>`
              select count(*)::int as n from ${sql(tableName)} where ${sql(columnName)}::text like ${`%${needle}%`}`
              .pipe(Effect.orDie)
            assert.strictEqual(hits[0]!.n, 0, `${tableName}.${columnName} holds the plaintext`)
          }
        }
        for (const body of bodies) {
          assert.notInclude(body, plaintext)
          assert.notInclude(body, rotatedPlaintext)
        }
        assert.isTrue(captured.some((line) => line.includes("log capture probe")), "logs are captured")
        assert.isTrue(
          captured.some((line) => line.includes("Mail could not be sent")),
          "the server's logs are captured"
        )
        for (const line of captured) {
          assert.notInclude(line, plaintext)
          assert.notInclude(line, rotatedPlaintext)
        }

        const rows = yield* sql<{ id: string; sealedValue: string; kekId: string; version: number }>`
          select id, sealed_value, kek_id, version from secrets where org_id = ${orgId} and secret_key = 'NEEDLE'`.pipe(
          Effect.orDie
        )
        assert.lengthOf(rows, 3)
        for (const row of rows) {
          assert.strictEqual(row.kekId, kek.id)
          assert.match(row.sealedValue, new RegExp(`^v1\\.${kek.id}\\.`))
          assert.strictEqual(open(kek, row.sealedValue), row.id === first!.id ? rotatedPlaintext : plaintext)
        }
        // Another key opens nothing.
        assert.isUndefined(open({ id: kek.id, key: randomBytes(32) }, rows[0]!.sealedValue))
      }))
  })
}
