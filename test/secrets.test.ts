/**
 * Secrets end to end over real HTTP and the typed client (spec: secret resource, "Configuration (under {scope})"
 * secrets rows, States and transitions; contract §3 SECRETS_KEK, §4 validation phrases, Idempotency-Key, response
 * data shapes): every route at workspace, project and environment scope, every error (both `scope` messages), an
 * Idempotency-Key replay on create, and the point of it all: the plaintext is nowhere — not in any table of the
 * database, any response body, any event or audit row, nor any log line — while the stored ciphertext opens to it
 * under the server's KEK. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 */
import { EnvironmentId, Organization, ProjectId, Secret, ValidationFailed } from "@cp/domain"
import { sha256Hex } from "@cp/server/platform/crypto"
import { newId } from "@cp/server/platform/ids"
import { open } from "@cp/server/platform/secretBox"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes, randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlRun, printedAs, tokenEnv } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, metaOf, nextCursor, ok, type Res } from "./support/envelope.ts"
import { assertNotInDatabase, captured, CaptureLogs } from "./support/plaintext.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

/** The server's KEK, set explicitly so the test can open what it stored. */
const KEK_BASE64 = randomBytes(32).toString("base64")
const kek = { id: sha256Hex(KEK_BASE64).slice(0, 12), key: Buffer.from(KEK_BASE64, "base64") }

/** Runs `cpctl` with a token and optional stdin; collects its output and exit code. */
const cpctl = (baseUrl: string, token: string, args: ReadonlyArray<string>, stdin?: string) =>
  cpctlRun(tokenEnv(baseUrl, token), args, stdin)

const secretOf = (res: Res) => ok(res, { secret: Secret }).secret
const secretsOf = (res: Res) => ok(res, { secrets: Schema.Array(Secret) }).secrets
const printedSecret = (run: { readonly stdout: string }) => printedAs(run, Secret)

for (const backend of sqlBackends) {
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
      const [personal] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }), {
        organizations: Schema.Array(Organization)
      }).organizations
      assert.isDefined(personal)
      const orgId = personal.id
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

    /** One "DATABASE_URL" secret created at each scope: the scope kind, its prefix and the create answer. */
    const oneAtEachScope = Effect.gen(function*() {
      const world = yield* newWorld
      const made = []
      const { prefixes } = world
      for (
        const [scopeKind, prefix] of [
          ["organization", prefixes.organization],
          ["project", prefixes.project],
          ["environment", prefixes.environment]
        ] as const
      ) {
        const created = secretOf(
          yield* world.api("POST", `${prefix}/config/secrets`, {
            secretKey: "DATABASE_URL",
            value: `value-at-${scopeKind}`,
            displayName: "Database"
          })
        )
        made.push({ scopeKind, prefix, created })
      }
      return { ...world, made }
    })

    it.effect("a created secret answers metadata only, in the wire shape, at each scope; the list shows it", () =>
      Effect.gen(function*() {
        const { api, environmentId, made, orgId, projectId, session } = yield* oneAtEachScope
        for (const { created, prefix, scopeKind } of made) {
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
          assert.deepStrictEqual(secretsOf(yield* api("GET", `${prefix}/config/secrets`)), [created])
        }
      }))

    /** The secret at each scope, rotated once: the rotate answer beside each. */
    const rotatedAtEachScope = Effect.gen(function*() {
      const world = yield* oneAtEachScope
      const rotations = []
      for (const made of world.made) {
        const rotated = secretOf(
          yield* world.api("POST", `${made.prefix}/config/secrets/${made.created.id}/rotate`, {
            value: `rotated-${made.scopeKind}`
          })
        )
        rotations.push({ ...made, rotated })
      }
      return { ...world, rotations }
    })

    it.effect("rotating a secret bumps its version and stamps lastRotatedAt, at each scope", () =>
      Effect.gen(function*() {
        const { rotations } = yield* rotatedAtEachScope
        for (const { rotated } of rotations) {
          assert.strictEqual(rotated.version, 2)
          assert.match(rotated.lastRotatedAt ?? "", ISO_MS)
          assert.strictEqual(rotated.updatedAt, rotated.lastRotatedAt)
        }
      }))

    it.effect("revoke answers the final state, again the same; a revoked secret is unlisted, not rotated (409)", () =>
      Effect.gen(function*() {
        const { api, rotations } = yield* rotatedAtEachScope
        for (const { created, prefix, rotated } of rotations) {
          const revoked = secretOf(yield* api("DELETE", `${prefix}/config/secrets/${created.id}`))
          assert.deepStrictEqual(revoked, { ...rotated, status: "revoked", updatedAt: revoked.updatedAt })
          assert.deepStrictEqual(secretOf(yield* api("DELETE", `${prefix}/config/secrets/${created.id}`)), revoked)
          failed(
            yield* api("POST", `${prefix}/config/secrets/${created.id}/rotate`, { value: "again" }),
            409,
            "conflict"
          )
          assert.deepStrictEqual(
            secretsOf(yield* api("GET", `${prefix}/config/secrets`)),
            [],
            "a revoked secret is not listed"
          )
        }
      }))

    /** Four secrets: at the workspace, the project, the environment and the project again; their ids in that order. */
    const fourSecrets = Effect.gen(function*() {
      const world = yield* newWorld
      const { api, prefixes } = world
      const ids: Array<string> = []
      for (
        const [i, prefix] of [prefixes.organization, prefixes.project, prefixes.environment, prefixes.project]
          .entries()
      ) {
        ids.push(
          secretOf(
            yield* api("POST", `${prefix}/config/secrets`, { secretKey: `KEY_${i}`, value: "v", displayName: "k" })
          )
            .id
        )
      }
      return { ...world, ids, newestFirst: [...ids].reverse() }
    })

    it.effect("scope=all lists every scope of the workspace, newest first; without it, only the workspace's own", () =>
      Effect.gen(function*() {
        const { api, ids, newestFirst, prefixes } = yield* fourSecrets
        const all = secretsOf(yield* api("GET", `${prefixes.organization}/config/secrets?scope=all`))
        assert.deepStrictEqual(all.map((s) => s.id), newestFirst)
        assert.deepStrictEqual(
          secretsOf(yield* api("GET", `${prefixes.organization}/config/secrets`)).map((s) => s.id),
          [
            ids[0]
          ]
        )
      }))

    it.effect("scope=all pages with a cursor bound to the filter", () =>
      Effect.gen(function*() {
        const { api, newestFirst, prefixes } = yield* fourSecrets
        const first = yield* api("GET", `${prefixes.organization}/config/secrets?scope=all&limit=3`)
        assert.deepStrictEqual(secretsOf(first).map((s) => s.id), newestFirst.slice(0, 3))
        const cursor = encodeURIComponent(nextCursor(first))
        const page2 = yield* api("GET", `${prefixes.organization}/config/secrets?scope=all&limit=3&cursor=${cursor}`)
        assert.deepStrictEqual(secretsOf(page2).map((s) => s.id), newestFirst.slice(3))
        assert.isNull(metaOf(page2).cursor)
        const unbound = invalidFields(
          yield* api("GET", `${prefixes.organization}/config/secrets?limit=3&cursor=${cursor}`)
        )
        assert.property(unbound, "cursor")
      }))

    it.effect("a scope other than all, or all below the workspace, is 422 with the spec's two messages", () =>
      Effect.gen(function*() {
        const { api, prefixes } = yield* newWorld
        const notAll = invalidFields(yield* api("GET", `${prefixes.organization}/config/secrets?scope=project`))
        assert.deepStrictEqual(Object.keys(notAll), ["scope"])
        assert.include(notAll["scope"]?.[0], "must be 'all' when present")
        for (const prefix of [prefixes.project, prefixes.environment]) {
          const allHere = invalidFields(yield* api("GET", `${prefix}/config/secrets?scope=all`))
          assert.deepStrictEqual(Object.keys(allHere), ["scope"])
          assert.include(allHere["scope"]?.[0], "'all' is valid only on the organization scope")
        }
      }))

    it.effect("create: bad or missing fields are 422 naming each; an overlong key is 422", () =>
      Effect.gen(function*() {
        const { api, prefixes } = yield* newWorld
        const path = `${prefixes.organization}/config/secrets`
        const invalid = invalidFields(yield* api("POST", path, { secretKey: "lower-case", value: "", displayName: "" }))
        assert.includeMembers(Object.keys(invalid), ["secretKey", "value", "displayName"])
        const missing = invalidFields(yield* api("POST", path, {}))
        assert.includeMembers(Object.keys(missing), ["secretKey", "value", "displayName"])
        failed(
          yield* api("POST", path, { secretKey: "A".repeat(129), value: "v", displayName: "d" }),
          422,
          "validation_failed"
        )
      }))

    /** A fresh world with the workspace secret STRIPE_KEY. */
    const withStripeKey = Effect.gen(function*() {
      const world = yield* newWorld
      const path = `${world.prefixes.organization}/config/secrets`
      const created = secretOf(
        yield* world.api("POST", path, { secretKey: "STRIPE_KEY", value: "v", displayName: "Stripe" })
      )
      return { ...world, path, created }
    })

    it.effect("a duplicate key is 409 without echoing the value; a rotation without a value is 422", () =>
      Effect.gen(function*() {
        const { api, created, path } = yield* withStripeKey
        const duplicate = failed(
          yield* api("POST", path, { secretKey: "STRIPE_KEY", value: "w", displayName: "Again" }),
          409,
          "conflict"
        )
        assert.notInclude(JSON.stringify(duplicate), "\"w\"")
        failed(yield* api("POST", `${path}/${created.id}/rotate`, {}), 422, "validation_failed")
      }))

    it.effect("a project or environment that is not in the workspace: 404", () =>
      Effect.gen(function*() {
        const { api, orgId, projectId } = yield* newWorld
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
      }))

    it.effect("a secret is reachable only under its own scope; unknown and malformed secret ids are 404", () =>
      Effect.gen(function*() {
        const { api, created, path, prefixes } = yield* withStripeKey
        failed(
          yield* api("POST", `${prefixes.project}/config/secrets/${created.id}/rotate`, { value: "x" }),
          404,
          "not_found"
        )
        failed(yield* api("DELETE", `${prefixes.environment}/config/secrets/${created.id}`), 404, "not_found")
        failed(yield* api("DELETE", `${path}/${newId("sec_", Date.now())}`), 404, "not_found")
        failed(yield* api("DELETE", `${path}/not-a-secret-id`), 404, "not_found")
      }))

    it.effect("a stranger gets 404; a viewer reads but may not write (403 naming the permission); no token 401", () =>
      Effect.gen(function*() {
        const { as, baseUrl, orgId, prefixes } = yield* newWorld
        const path = `${prefixes.organization}/config/secrets`
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
        assert.strictEqual(denied.details["permission"], "organization.config.write")
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
        assert.strictEqual(reused.details["reason"], "key_reused")
        assert.lengthOf(secretsOf(yield* api("GET", path)), 1)
      }))

    /** A fresh world, its owner's typed client, a "TYPED" secret at each scope, and each scope's client params. */
    const typedSecrets = Effect.gen(function*() {
      const { baseUrl, environmentId, orgId, projectId, session } = yield* newWorld
      const client = yield* clientFor(baseUrl, session.token)
      const input = { secretKey: "TYPED", value: "typed-value", displayName: "Typed" }
      const atProject = { orgId, projectId: ProjectId.make(projectId) }
      const atEnvironment = { ...atProject, environmentId: EnvironmentId.make(environmentId) }
      const ws = (yield* client.secrets.create({ params: { orgId }, payload: input })).secret
      const pr = (yield* client.projectSecrets.create({ params: atProject, payload: input })).secret
      const env = (yield* client.environmentSecrets.create({ params: atEnvironment, payload: input })).secret
      return { client, orgId, atProject, atEnvironment, ws, pr, env }
    })

    it.effect("typed client: create at each scope, decoded; scope=all lists them all", () =>
      Effect.gen(function*() {
        const { client, env, orgId, pr, ws } = yield* typedSecrets
        assert.instanceOf(ws.createdAt, Date)
        assert.isTrue(Schema.is(Secret)(ws))
        const all = yield* client.secrets.list({ params: { orgId }, query: { scope: "all" } })
        assert.deepStrictEqual(all.data.secrets.map((s) => s.id), [env.id, pr.id, ws.id])
      }))

    it.effect("typed client: rotate and revoke at each scope; the lists follow", () =>
      Effect.gen(function*() {
        const { atEnvironment, atProject, client, env, orgId, pr, ws } = yield* typedSecrets
        assert.strictEqual(
          (yield* client.projectSecrets.rotate({
            params: { ...atProject, secretId: pr.id },
            payload: { value: "v2" }
          }))
            .secret.version,
          2
        )
        assert.strictEqual(
          (yield* client.environmentSecrets.revoke({ params: { ...atEnvironment, secretId: env.id } })).secret.status,
          "revoked"
        )
        assert.lengthOf((yield* client.projectSecrets.list({ params: atProject, query: {} })).data.secrets, 1)
        assert.lengthOf((yield* client.environmentSecrets.list({ params: atEnvironment, query: {} })).data.secrets, 0)
        assert.strictEqual(
          (yield* client.secrets.rotate({ params: { orgId, secretId: ws.id }, payload: { value: "v3" } })).secret
            .version,
          2
        )
        assert.strictEqual(
          (yield* client.secrets.revoke({ params: { orgId, secretId: ws.id } })).secret.status,
          "revoked"
        )
      }))

    it.effect("typed client: a scope other than all fails with ValidationFailed", () =>
      Effect.gen(function*() {
        const { baseUrl, orgId, session } = yield* newWorld
        const client = yield* clientFor(baseUrl, session.token)
        const error = yield* Effect.flip(client.secrets.list({ params: { orgId }, query: { scope: "everything" } }))
        assert.instanceOf(error, ValidationFailed)
      }))

    it.effect("cpctl secrets set and rotate read the value from stdin and never print it", () =>
      Effect.gen(function*() {
        const { baseUrl, orgId, projectId, session } = yield* newWorld
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
        const secret = printedSecret(set)
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
        assert.strictEqual(printedSecret(rotated).version, 2)
        for (const output of [set, rotated]) {
          assert.notInclude(output.stdout + output.stderr, value)
        }
      }))

    it.effect("cpctl secrets list --all-scopes, delete by id alone, never printing the value; empty stdin fails", () =>
      Effect.gen(function*() {
        const { api, baseUrl, orgId, prefixes, session } = yield* newWorld
        const value = `cli-plaintext-${randomUUID()}`
        const secret = secretOf(
          yield* api("POST", `${prefixes.project}/config/secrets`, {
            secretKey: "CLI_KEY",
            value,
            displayName: "From CLI"
          })
        )
        const listed = yield* cpctl(baseUrl, session.token, ["secrets", "list", "--workspace", orgId, "--all-scopes"])
        assert.strictEqual(listed.exitCode, 0, listed.stderr)
        assert.include(listed.stdout, secret.id)
        assert.include(listed.stdout, "CLI_KEY")
        const deleted = yield* cpctl(baseUrl, session.token, [
          "secrets",
          "delete",
          secret.id,
          "--workspace",
          orgId,
          "--yes",
          "--json"
        ])
        assert.strictEqual(deleted.exitCode, 0, deleted.stderr)
        assert.strictEqual(printedSecret(deleted).status, "revoked")
        const empty = yield* cpctl(baseUrl, session.token, ["secrets", "set", "EMPTY", "--workspace", orgId], "")
        assert.notStrictEqual(empty.exitCode, 0)
        for (const output of [listed, deleted]) {
          assert.notInclude(output.stdout + output.stderr, value)
        }
      }))

    /**
     * A "NEEDLE" secret at each scope (each create with an Idempotency-Key); the first rotated to a second plaintext,
     * the second revoked; then every read route and the audit log read, so their bodies are recorded too.
     */
    const needles = Effect.gen(function*() {
      const world = yield* newWorld
      const { api, prefixes } = world
      const plaintext = `PLAINTEXT-${randomUUID()}-needle`
      const rotatedPlaintext = `ROTATED-${randomUUID()}-needle`
      const made: Array<{ id: string; prefix: string }> = []
      for (const prefix of Object.values(prefixes)) {
        const created = secretOf(
          yield* api("POST", `${prefix}/config/secrets`, {
            secretKey: "NEEDLE",
            value: plaintext,
            displayName: "Needle"
          }, {
            "idempotency-key": `needle-${randomUUID()}`
          })
        )
        made.push({ id: created.id, prefix })
      }
      const [first, second] = made
      assert.isDefined(first)
      assert.isDefined(second)
      ok(yield* api("POST", `${first.prefix}/config/secrets/${first.id}/rotate`, { value: rotatedPlaintext }))
      ok(yield* api("DELETE", `${second.prefix}/config/secrets/${second.id}`))
      for (const prefix of Object.values(prefixes)) ok(yield* api("GET", `${prefix}/config/secrets`))
      ok(yield* api("GET", `${prefixes.organization}/config/secrets?scope=all`))
      const audit = ok(yield* api("GET", `${prefixes.organization}/audit`))
      return { ...world, plaintext, rotatedPlaintext, first, audit }
    })

    it.effect("the plaintext is in no table of the database", () =>
      Effect.gen(function*() {
        const { plaintext, rotatedPlaintext } = yield* needles
        yield* assertNotInDatabase(
          [plaintext, rotatedPlaintext, Buffer.from(plaintext).toString("base64")],
          "secrets.sealed_value"
        )
      }))

    it.effect("the plaintext is in no response body, the audit log's included", () =>
      Effect.gen(function*() {
        const { audit, plaintext, rotatedPlaintext } = yield* needles
        assert.isAbove(JSON.stringify(audit).split("secrets.updated").length - 1, 0, "the audit log shows the changes")
        for (const body of bodies) {
          assert.notInclude(body, plaintext)
          assert.notInclude(body, rotatedPlaintext)
        }
      }))

    it.effect("the plaintext is in no log line, the server's own included", () =>
      Effect.gen(function*() {
        const { plaintext, rotatedPlaintext } = yield* needles
        yield* Effect.logInfo("log capture probe")
        assert.isTrue(captured.some((line) => line.includes("log capture probe")), "logs are captured")
        assert.isTrue(
          captured.some((line) => line.includes("Mail could not be sent")),
          "the server's logs are captured"
        )
        for (const line of captured) {
          assert.notInclude(line, plaintext)
          assert.notInclude(line, rotatedPlaintext)
        }
      }))

    it.effect("the stored ciphertext opens to the plaintext under the server's KEK, and under no other key", () =>
      Effect.gen(function*() {
        const { first, orgId, plaintext, rotatedPlaintext } = yield* needles
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ id: string; sealedValue: string; kekId: string; version: number }>`
          select id, sealed_value, kek_id, version from secrets where org_id = ${orgId} and secret_key = 'NEEDLE'`.pipe(
          Effect.orDie
        )
        assert.lengthOf(rows, 3)
        for (const row of rows) {
          assert.strictEqual(row.kekId, kek.id)
          assert.match(row.sealedValue, new RegExp(`^v1\\.${kek.id}\\.`))
          assert.strictEqual(open(kek, row.sealedValue), row.id === first.id ? rotatedPlaintext : plaintext)
        }
        assert.isUndefined(open({ id: kek.id, key: randomBytes(32) }, rows[0]!.sealedValue))
      }))
  })
}
