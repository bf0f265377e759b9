/**
 * API keys end to end over real HTTP (spec: API key, API keys endpoints, States and transitions for API key,
 * Authentication 4–6, Events): create with the secret shown once, the key authenticating as its service principal,
 * list without secret material, revoke, expiry, project scoping, workspace pinning, validation, who may mint which
 * role, the audit and security-event trail, and the `cpctl api-keys` commands. Runs on PGlite, and on PostgreSQL
 * too when `DATABASE_URL` is set.
 *
 * Sharing a workspace with a second user needs invitations, which live in another area, so the cases that need an
 * admin, builder or viewer write the role binding straight into the database (the row an accepted invitation
 * writes). An expired key is seeded the same way rather than waiting for a real expiry.
 */
import { ApiKey, CreatedApiKey, Organization, RevokedApiKey, SecurityEvent } from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomBytes, randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { decisionByAction } from "./support/access.ts"
import { cpctlAs } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, metaOf, nextCursor, ok, type Res, ULID } from "./support/envelope.ts"
import { seedBinding } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const API_KEY_FIELDS = [
  "createdAt",
  "expiresAt",
  "id",
  "label",
  "lastUsedAt",
  "prefix",
  "revokedAt",
  "servicePrincipal"
]
const sha256 = (value: string) => createHash("sha256").update(value).digest("hex")
const projectId = () => newId("prj_", Date.now())

const createdKeyOf = (res: Res) => ok(res, { apiKey: CreatedApiKey }).apiKey
const keysOf = (res: Res) => ok(res, { apiKeys: Schema.Array(ApiKey) }).apiKeys
const organizationOf = (res: Res) => ok(res, { organization: Organization }).organization

/** An API key row as the service writes it, with the given expiry, straight into the database: its secret. */
const seedKey = (orgId: string, expiresAt: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const secret = `sk_${randomBytes(32).toString("hex")}`
    const now = new Date()
    const principal = newId("sp_", now.getTime())
    yield* sql`insert into service_principals ${
      sql.insert({
        id: principal,
        orgId,
        displayName: "API Key: seeded",
        createdAt: now
      })
    }`
    yield* sql`insert into api_keys ${
      sql.insert({
        id: randomUUID(),
        orgId,
        servicePrincipalId: principal,
        label: "seeded",
        prefix: secret.slice(0, 12),
        secretHash: sha256(secret),
        role: "viewer",
        projectId: null,
        createdAt: now,
        expiresAt,
        lastUsedAt: null,
        revokedAt: null
      })
    }`
    yield* seedBinding(orgId, "service_principal", principal, "viewer")
    return secret
  }).pipe(Effect.orDie)

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `api keys [${backend}]`,
    (it) => {
      /** A fresh user and its `Personal` workspace (where it is owner). */
      const newUser = (baseUrl: string, prefix = "user") => signInWithPersonal(baseUrl, prefix)

      const createKey = (baseUrl: string, token: string, orgRef: string, body: unknown) =>
        call(baseUrl, "POST", `/v1/organizations/${orgRef}/api-keys`, { token, body })
      const listKeys = (baseUrl: string, token: string, orgRef: string, query = "") =>
        call(baseUrl, "GET", `/v1/organizations/${orgRef}/api-keys${query}`, { token })
      const revokeKey = (baseUrl: string, token: string, orgRef: string, id: string) =>
        call(baseUrl, "DELETE", `/v1/organizations/${orgRef}/api-keys/${id}`, { token })

      /** A key created by `token` on `orgRef`: the create answer's `apiKey`. */
      const mint = (baseUrl: string, token: string, orgRef: string, body: Record<string, unknown>) =>
        Effect.map(
          createKey(baseUrl, token, orgRef, { label: `key ${randomUUID().slice(0, 8)}`, ...body }),
          createdKeyOf
        )

      /** A fresh owner and the answer to its creating a viewer key labelled "  CI deploy  " on its workspace. */
      const ciDeployKey = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const data = ok(
          yield* createKey(baseUrl, owner.token, owner.personal.slug, { label: "  CI deploy  ", role: "viewer" }),
          { apiKey: CreatedApiKey }
        )
        return { baseUrl, owner, data, key: data.apiKey }
      })

      it.effect("create answers the key with its secret, once, in the wire shape; the principal names the label", () =>
        Effect.gen(function*() {
          const { data, key } = yield* ciDeployKey
          assert.deepStrictEqual(Object.keys(data), ["apiKey"])
          assert.deepStrictEqual(Object.keys(key).sort(), [...API_KEY_FIELDS, "secret"].sort())
          assert.match(key.id, UUID_V7)
          assert.match(key.secret, /^sk_[0-9a-f]{64}$/)
          assert.strictEqual(key.prefix, key.secret.slice(0, 12))
          assert.strictEqual(key.label, "CI deploy", "the label is trimmed")
          assert.match(key.createdAt, ISO_MS)
          assert.deepStrictEqual([key.expiresAt, key.lastUsedAt, key.revokedAt], [null, null, null])
          assert.match(key.servicePrincipal.id, new RegExp(`^sp_${ULID}$`))
          assert.deepStrictEqual(key.servicePrincipal, {
            id: key.servicePrincipal.id,
            displayName: "API Key: CI deploy",
            role: "viewer",
            projectId: null
          })
        }))

      it.effect("stored: the SHA-256 of the secret, never the secret; the principal and its one role binding", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { key, owner } = yield* ciDeployKey
          const [row] = yield* sql`select * from api_keys where id = ${key.id}`.pipe(Effect.orDie)
          assert.strictEqual(row?.["secretHash"], sha256(key.secret))
          assert.notInclude(JSON.stringify(row), key.secret.slice(12))
          const principals = yield* sql`select * from service_principals where id = ${key.servicePrincipal.id}`.pipe(
            Effect.orDie
          )
          assert.deepStrictEqual(principals.map((p) => [p["orgId"], p["displayName"]]), [[
            owner.personal.id,
            "API Key: CI deploy"
          ]])
          const bindings = yield* sql`select * from role_bindings where subject_id = ${key.servicePrincipal.id}`.pipe(
            Effect.orDie
          )
          assert.deepStrictEqual(
            bindings.map((b) => [b["orgId"], b["subjectType"], b["role"], b["scopeKind"], b["scopeRef"]]),
            [[owner.personal.id, "service_principal", "viewer", "organization", null]]
          )
        }))

      it.effect("the key authenticates as its principal: what a viewer reads, by any workspace reference, only", () =>
        Effect.gen(function*() {
          const { baseUrl, key, owner } = yield* ciDeployKey
          for (const ref of [owner.personal.id, owner.personal.workspaceRef, owner.personal.slug]) {
            assert.deepStrictEqual(
              ok(yield* call(baseUrl, "GET", `/v1/organizations/${ref}`, { token: key.secret })),
              { organization: owner.personal }
            )
          }
          const listed = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: key.secret }), {
            organizations: Schema.Array(Organization)
          })
          assert.deepStrictEqual(listed.organizations, [owner.personal])
          const byAction = decisionByAction(
            yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}/effective-access`, {
              token: key.secret
            })
          )
          assert.deepStrictEqual(byAction("organization.read").via, {
            kind: "direct",
            role: "viewer",
            scopeKind: "organization",
            scopeRef: null
          })
          assert.isFalse(byAction("organization.api_key.list").allow)
          failed(yield* listKeys(baseUrl, key.secret, owner.personal.id), 403, "forbidden")
          failed(
            yield* createKey(baseUrl, key.secret, owner.personal.id, { label: "x", role: "viewer" }),
            403,
            "forbidden"
          )
        }))

      it.effect("using the key stamps lastUsedAt", () =>
        Effect.gen(function*() {
          const { baseUrl, key, owner } = yield* ciDeployKey
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}`, { token: key.secret }))
          const [seen] = keysOf(yield* listKeys(baseUrl, owner.token, owner.personal.id))
          assert.isDefined(seen)
          assert.strictEqual(seen.id, key.id)
          assert.match(seen.lastUsedAt ?? "", ISO_MS)
          assert.isAtLeast(Date.parse(seen.lastUsedAt ?? ""), Date.parse(key.createdAt))
        }))

      it.effect("lastUsedAt is written at most once a minute", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const sql = yield* SqlClient.SqlClient
          const owner = yield* newUser(baseUrl)
          const key = yield* mint(baseUrl, owner.token, owner.personal.id, { role: "viewer" })
          const lastUsed = Effect.map(
            sql<{ lastUsedAt: Date | null }>`select last_used_at from api_keys where id = ${key.id}`.pipe(Effect.orDie),
            (rows) => rows[0]?.lastUsedAt
          )
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}`, { token: key.secret }))
          const first = yield* lastUsed
          assert.instanceOf(first, Date)
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}`, { token: key.secret }))
          assert.deepStrictEqual(yield* lastUsed, first, "a second use within the minute writes nothing")
          // Ten minutes later (as far as the row knows), the next use moves it on.
          const tenMinutesAgo = new Date(Date.now() - 10 * 60_000)
          yield* sql`update api_keys set last_used_at = ${tenMinutesAgo} where id = ${key.id}`.pipe(Effect.orDie)
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}`, { token: key.secret }))
          assert.isAbove((yield* lastUsed)?.getTime() ?? 0, tenMinutesAgo.getTime() + 9 * 60_000)
        }))

      it.effect("the typed client creates, lists and revokes", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          const client = yield* clientFor(baseUrl, owner.token)
          const expiresAt = new Date(Date.now() + 86_400_000)
          const { apiKey: created } = yield* client.apiKeys.create({
            params: { orgId: owner.personal.slug },
            payload: { label: "builder bot", role: "builder", expiresAt }
          })
          assert.match(created.secret, /^sk_[0-9a-f]{64}$/)
          assert.deepStrictEqual(created.expiresAt, expiresAt)
          assert.strictEqual(created.servicePrincipal.role, "builder")

          // A builder key may list keys (builders hold organization.api_key.list): no secret anywhere.
          const asKey = yield* clientFor(baseUrl, created.secret)
          const page = yield* asKey.apiKeys.list({ params: { orgId: owner.personal.id }, query: {} })
          assert.strictEqual(page.cursor, null)
          const { secret, ...withoutSecret } = created
          assert.deepStrictEqual(page.data.apiKeys.map((key) => ({ ...key, lastUsedAt: null })), [withoutSecret])
          assert.notInclude(JSON.stringify(page), secret)

          const { apiKey: revoked } = yield* client.apiKeys.revoke({
            params: { orgId: owner.personal.id, apiKeyId: created.id }
          })
          assert.deepStrictEqual(Object.keys(revoked).sort(), ["id", "label", "prefix", "revokedAt"])
          assert.deepStrictEqual([revoked.id, revoked.label, revoked.prefix], [
            created.id,
            "builder bot",
            created.prefix
          ])
          assert.instanceOf(revoked.revokedAt, Date)
        }))

      /** A fresh owner with two projects and six keys of every kind, oldest first. */
      const sixKeys = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const org = owner.personal.id
        const [projectA, projectB] = [
          yield* createProject(baseUrl, owner.token, org),
          yield* createProject(baseUrl, owner.token, org)
        ]
        const created: Array<typeof CreatedApiKey.Encoded> = []
        for (
          const body of [
            { role: "viewer" },
            { role: "project_viewer", projectId: projectA },
            { role: "builder" },
            { role: "project_builder", projectId: projectB },
            { role: "project_admin", projectId: projectA },
            { role: "admin" }
          ]
        ) {
          created.push(yield* mint(baseUrl, owner.token, org, body))
        }
        const list = (query = "") => listKeys(baseUrl, owner.token, org, query)
        return { baseUrl, owner, org, projectA, projectB, created, newestFirst: [...created].reverse(), list }
      })

      it.effect("list: newest first, never secret material; an entry equals the create answer without the secret", () =>
        Effect.gen(function*() {
          const { created, list, newestFirst } = yield* sixKeys
          const all = yield* list()
          const entries = keysOf(all)
          assert.deepStrictEqual(entries.map((key) => key.id), newestFirst.map((key) => key.id))
          for (const entry of entries) assert.deepStrictEqual(Object.keys(entry).sort(), API_KEY_FIELDS)
          for (const key of created) {
            assert.notInclude(all.text, key.secret.slice(12))
            assert.notInclude(all.text, sha256(key.secret))
          }
          assert.isNull(metaOf(all).cursor)
          const { secret: _, ...firstWithoutSecret } = created[0] ?? assert.fail("no key")
          assert.deepStrictEqual(entries[entries.length - 1], firstWithoutSecret)
        }))

      it.effect("list: walking two at a time returns every key once, in order", () =>
        Effect.gen(function*() {
          const { list, newestFirst } = yield* sixKeys
          const walked: Array<string> = []
          let cursor: string | null = null
          do {
            const query: string = `?limit=2${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`
            const page = yield* list(query)
            walked.push(...keysOf(page).map((key) => key.id))
            cursor = metaOf(page).cursor
          } while (cursor !== null)
          assert.deepStrictEqual(walked, newestFirst.map((key) => key.id))
        }))

      it.effect("list: the projectId filter; a cursor is valid only with its filter and in its workspace", () =>
        Effect.gen(function*() {
          const { baseUrl, created, list, projectA, projectB } = yield* sixKeys
          const inA = keysOf(yield* list(`?projectId=${projectA}`))
          assert.deepStrictEqual(inA.map((key) => key.id), [created[4]?.id, created[1]?.id])
          const cursorOfA = nextCursor(yield* list(`?projectId=${projectA}&limit=1`))
          const secondOfA = keysOf(yield* list(`?projectId=${projectA}&limit=1&cursor=${cursorOfA}`))
          assert.deepStrictEqual(secondOfA.map((key) => key.id), [created[1]?.id])
          for (const query of [`?cursor=${cursorOfA}`, `?projectId=${projectB}&cursor=${cursorOfA}`]) {
            assert.deepStrictEqual(Object.keys(invalidFields(yield* list(query))), ["cursor"])
          }
          // Another workspace's cursor is refused too.
          const other = yield* newUser(baseUrl)
          failed(
            yield* listKeys(baseUrl, other.token, other.personal.id, `?projectId=${projectA}&cursor=${cursorOfA}`),
            422,
            "validation_failed"
          )
        }))

      it.effect("list: a malformed projectId or a limit outside 1..100 is 422 on that field", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          for (
            const [query, field] of [["?projectId=prj_nope", "projectId"], ["?limit=0", "limit"], [
              "?limit=101",
              "limit"
            ]]
          ) {
            const fields = invalidFields(yield* listKeys(baseUrl, owner.token, owner.personal.id, query))
            assert.deepStrictEqual(Object.keys(fields), [field], query)
          }
        }))

      /** A fresh owner and its admin key "doomed", used once. */
      const doomedKey = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const org = owner.personal.id
        const key = yield* mint(baseUrl, owner.token, org, { label: "doomed", role: "admin" })
        ok(yield* call(baseUrl, "GET", `/v1/organizations/${org}`, { token: key.secret }))
        return { baseUrl, owner, org, key }
      })

      it.effect("revoke answers the final state; the key is 401 at once and stays listed; revoking again is 409", () =>
        Effect.gen(function*() {
          const { baseUrl, key, org, owner } = yield* doomedKey
          const revoked = ok(yield* revokeKey(baseUrl, owner.token, owner.personal.slug, key.id), {
            apiKey: RevokedApiKey
          })
          assert.deepStrictEqual(Object.keys(revoked), ["apiKey"])
          assert.deepStrictEqual(Object.keys(revoked.apiKey).sort(), ["id", "label", "prefix", "revokedAt"])
          assert.deepStrictEqual([revoked.apiKey.id, revoked.apiKey.label, revoked.apiKey.prefix], [
            key.id,
            "doomed",
            key.prefix
          ])
          assert.match(revoked.apiKey.revokedAt, ISO_MS)

          for (const path of [`/v1/organizations/${org}`, "/v1/organizations", `/v1/organizations/${org}/api-keys`]) {
            failed(yield* call(baseUrl, "GET", path, { token: key.secret }), 401, "unauthenticated")
          }
          const [listed] = keysOf(yield* listKeys(baseUrl, owner.token, org))
          assert.strictEqual(listed?.revokedAt, revoked.apiKey.revokedAt, "revoked keys stay listed")

          const again = failed(yield* revokeKey(baseUrl, owner.token, org, key.id), 409, "conflict")
          assert.isString(again.message)
        }))

      it.effect("revoke: unknown, malformed and another workspace's key ids are 404", () =>
        Effect.gen(function*() {
          const { baseUrl, key, org, owner } = yield* doomedKey
          failed(yield* revokeKey(baseUrl, owner.token, org, randomUUID()), 404, "not_found")
          for (const malformed of ["not-a-uuid", key.id.toUpperCase(), `${key.id}x`]) {
            failed(yield* revokeKey(baseUrl, owner.token, org, malformed), 404, "not_found")
          }
          // Another workspace's key: unknown here, and that workspace is not visible.
          const other = yield* newUser(baseUrl)
          const theirs = yield* mint(baseUrl, other.token, other.personal.id, { role: "viewer" })
          failed(yield* revokeKey(baseUrl, owner.token, org, theirs.id), 404, "not_found")
          failed(yield* revokeKey(baseUrl, owner.token, other.personal.id, theirs.id), 404, "not_found")
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${other.personal.id}`, { token: theirs.secret }))
        }))

      /** A fresh owner and a key expiring in an hour, seeded: its secret. */
      const liveSeededKey = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const path = `/v1/organizations/${owner.personal.id}`
        const live = yield* seedKey(owner.personal.id, new Date(Date.now() + 3_600_000))
        ok(yield* call(baseUrl, "GET", path, { token: live }))
        return { baseUrl, owner, path, live }
      })

      it.effect("an expired key is 401, like a revoked one, and can still be revoked", () =>
        Effect.gen(function*() {
          const { baseUrl, owner, path } = yield* liveSeededKey
          const expired = yield* seedKey(owner.personal.id, new Date(Date.now() - 1000))
          failed(yield* call(baseUrl, "GET", path, { token: expired }), 401, "unauthenticated")
          failed(yield* call(baseUrl, "GET", "/v1/organizations", { token: expired }), 401, "unauthenticated")
          const expiredRow = keysOf(yield* listKeys(baseUrl, owner.token, owner.personal.id))
            .find((key) => Date.parse(key.expiresAt ?? "") < Date.now())
          assert.isDefined(expiredRow)
          ok(yield* revokeKey(baseUrl, owner.token, owner.personal.id, expiredRow.id))
        }))

      it.effect("an unknown key, or a live key's secret altered or cut to its prefix, is 401", () =>
        Effect.gen(function*() {
          const { baseUrl, live, path } = yield* liveSeededKey
          for (const token of [`sk_${"0".repeat(64)}`, live.toUpperCase(), `${live}0`, live.slice(0, 12)]) {
            failed(yield* call(baseUrl, "GET", path, { token }), 401, "unauthenticated")
          }
        }))

      /** A fresh owner, a project, and a project_admin key on it. */
      const projectKey = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const org = owner.personal.id
        const project = yield* createProject(baseUrl, owner.token, org)
        const key = yield* mint(baseUrl, owner.token, org, { role: "project_admin", projectId: project })
        return { baseUrl, owner, org, project, key }
      })

      it.effect("a project-scoped key's principal and its one binding are on its project", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { key, project } = yield* projectKey
          assert.deepStrictEqual(
            [key.servicePrincipal.role, key.servicePrincipal.projectId],
            ["project_admin", project]
          )
          const bindings = yield* sql`select * from role_bindings where subject_id = ${key.servicePrincipal.id}`.pipe(
            Effect.orDie
          )
          assert.deepStrictEqual(bindings.map((b) => [b["scopeKind"], b["scopeRef"], b["role"]]), [[
            "project",
            project,
            "project_admin"
          ]])
        }))

      it.effect("a project-scoped key acts only inside its project: workspace-level routes are 403", () =>
        Effect.gen(function*() {
          const { baseUrl, key, org, project } = yield* projectKey
          // Workspace-level permissions: 403 (the workspace itself is visible to it, so not 404).
          for (const suffix of ["", "/workspaces", "/api-keys"]) {
            failed(
              yield* call(baseUrl, "GET", `/v1/organizations/${org}${suffix}`, { token: key.secret }),
              403,
              "forbidden"
            )
          }
          const access = (query: string) =>
            Effect.map(
              call(baseUrl, "GET", `/v1/organizations/${org}/effective-access${query}`, { token: key.secret }),
              decisionByAction
            )
          const inProject = yield* access(`?projectId=${project}`)
          assert.deepStrictEqual(inProject("project.read").via, {
            kind: "direct",
            role: "project_admin",
            scopeKind: "project",
            scopeRef: project
          })
          assert.isFalse(inProject("organization.read").allow)
          assert.isFalse((yield* access(""))("project.read").allow)
          // A project the workspace does not have is refused, not answered for (issue 10 item 11).
          const unknown = yield* call(
            baseUrl,
            "GET",
            `/v1/organizations/${org}/effective-access?projectId=${projectId()}`,
            {
              token: key.secret
            }
          )
          assert.property(invalidFields(unknown), "projectId")
        }))

      /** A fresh owner with an owner key on its account root. */
      const ownerKey = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const key = yield* mint(baseUrl, owner.token, owner.personal.id, { role: "owner" })
        return { baseUrl, owner, key }
      })

      it.effect("a key is pinned to its workspace: another (even a child of its account root) is 404", () =>
        Effect.gen(function*() {
          const { baseUrl, key, owner } = yield* ownerKey
          const child = organizationOf(
            yield* call(baseUrl, "POST", "/v1/organizations", {
              token: owner.token,
              body: { name: `Child ${randomUUID().slice(0, 8)}` }
            })
          )
          const stranger = yield* newUser(baseUrl)
          for (const org of [child, stranger.personal]) {
            for (const suffix of ["", "/api-keys", "/effective-access"]) {
              failed(
                yield* call(baseUrl, "GET", `/v1/organizations/${org.id}${suffix}`, { token: key.secret }),
                404,
                "not_found"
              )
            }
          }
        }))

      it.effect("a key is never a user: workspaces, key management and session-only routes are 403", () =>
        Effect.gen(function*() {
          const { baseUrl, key, owner } = yield* ownerKey
          failed(
            yield* call(baseUrl, "POST", "/v1/organizations", { token: key.secret, body: { name: "Nope" } }),
            403,
            "forbidden"
          )
          failed(
            yield* createKey(baseUrl, key.secret, owner.personal.id, { label: "child key", role: "viewer" }),
            403,
            "forbidden"
          )
          failed(yield* revokeKey(baseUrl, key.secret, owner.personal.id, key.id), 403, "forbidden")
          // The session-only routes (spec Authentication 5).
          for (
            const [method, path, body] of [
              ["GET", "/v1/auth/session"],
              ["POST", "/v1/auth/logout"],
              ["GET", "/v1/auth/profile"],
              ["PATCH", "/v1/auth/profile", { displayName: "Bot" }],
              ["GET", "/v1/auth/security-events"]
            ] as const
          ) {
            failed(
              yield* call(baseUrl, method, path, { token: key.secret, ...(body === undefined ? {} : { body }) }),
              403,
              "forbidden"
            )
          }
          // The owner key still reads and lists: none of the refusals above revoked or broke it.
          ok(yield* listKeys(baseUrl, key.secret, owner.personal.id))
        }))

      it.effect("every validation error answers 422 with details.fields naming each bad field; creates nothing", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          const org = owner.personal.id
          const future = new Date(Date.now() + 3_600_000).toISOString()
          const past = new Date(Date.now() - 1000).toISOString()
          const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<string>]> = [
            [{}, ["label", "role"]],
            [{ role: "viewer" }, ["label"]],
            [{ label: "x".repeat(129), role: "viewer" }, ["label"]],
            [{ label: "   ", role: "viewer" }, ["label"]],
            [{ label: 42, role: "viewer" }, ["label"]],
            [{ label: "ok" }, ["role"]],
            [{ label: "ok", role: "superuser" }, ["role"]],
            [{ label: "ok", role: "project_admin" }, ["projectId"]],
            [{ label: "ok", role: "project_viewer", expiresAt: future }, ["projectId"]],
            [{ label: "ok", role: "viewer", projectId: projectId() }, ["projectId"]],
            [{ label: "ok", role: "project_admin", projectId: "proj-1" }, ["projectId"]],
            [{ label: "ok", role: "viewer", expiresAt: past }, ["expiresAt"]],
            [{ label: "ok", role: "viewer", expiresAt: "tomorrow" }, ["expiresAt"]],
            [{ label: "ok", role: "viewer", expiresAt: "Tue, 01 Jan 2030 00:00:00 GMT" }, ["expiresAt"]],
            [{ label: "ok", role: "viewer", expiresAt: "2099-13-01T00:00:00Z" }, ["expiresAt"]],
            [{ label: "ok", role: "viewer", expiresAt: "2099-02-30T00:00:00Z" }, ["expiresAt"]],
            [{ label: "ok", role: "viewer", expiresAt: "2099-01-01T23:60:00Z" }, ["expiresAt"]],
            [{ label: "ok", role: "viewer", expiresAt: 1_900_000_000_000 }, ["expiresAt"]],
            [{ label: "ok", role: "project_builder", expiresAt: past }, ["expiresAt", "projectId"]]
          ]
          for (const [body, fields] of cases) {
            const invalid = invalidFields(yield* createKey(baseUrl, owner.token, org, body))
            assert.deepStrictEqual(Object.keys(invalid).sort(), fields, JSON.stringify(body))
            for (const field of fields) {
              assert.isAbove(invalid[field]?.length ?? 0, 0)
              for (const message of invalid[field] ?? []) assert.isString(message)
            }
          }
          assert.deepStrictEqual(keysOf(yield* listKeys(baseUrl, owner.token, org)), [], "no failed create left a key")
        }))

      it.effect("a project role without projectId is 422 saying required; a past expiry says future", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          const org = owner.personal.id
          const past = new Date(Date.now() - 1000).toISOString()
          const projectRole = invalidFields(
            yield* createKey(baseUrl, owner.token, org, { label: "ok", role: "project_admin" })
          )
          assert.include(projectRole["projectId"]?.[0], "required")
          const expiry = invalidFields(
            yield* createKey(baseUrl, owner.token, org, { label: "ok", role: "viewer", expiresAt: past })
          )
          assert.include(expiry["expiresAt"]?.[0], "future")
        }))

      it.effect("the edges of the valid range: a 128-character label; an expiry with an offset, or a date alone", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          const org = owner.personal.id
          const future = new Date(Date.now() + 3_600_000).toISOString()
          const longest = yield* mint(baseUrl, owner.token, org, {
            label: "y".repeat(128),
            role: "viewer",
            expiresAt: future
          })
          assert.strictEqual(longest.label, "y".repeat(128))
          assert.strictEqual(longest.expiresAt, future)
          const offset = yield* mint(baseUrl, owner.token, org, {
            role: "viewer",
            expiresAt: "2099-06-01T12:00:00+02:00"
          })
          assert.strictEqual(offset.expiresAt, "2099-06-01T10:00:00.000Z")
          const leapDay = yield* mint(baseUrl, owner.token, org, { role: "viewer", expiresAt: "2096-02-29" })
          assert.strictEqual(leapDay.expiresAt, "2096-02-29T00:00:00.000Z")
        }))

      /** A fresh owner with a second workspace holding a project. */
      const withSecondWorkspace = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const second = organizationOf(
          yield* call(baseUrl, "POST", "/v1/organizations", { token: owner.token, body: { name: "Second" } })
        )
        const elsewhere = yield* createProject(baseUrl, owner.token, second.id)
        return { baseUrl, owner, org: owner.personal.id, second, elsewhere }
      })

      it.effect("a project role's projectId must name a project of this workspace: 422 after the other checks", () =>
        Effect.gen(function*() {
          const { baseUrl, elsewhere, org, owner } = yield* withSecondWorkspace
          const before = keysOf(yield* listKeys(baseUrl, owner.token, org))
          // Well-formed, but unknown here: never created, or a project of another workspace the caller owns.
          for (const project of [projectId(), elsewhere]) {
            const invalid = invalidFields(
              yield* createKey(baseUrl, owner.token, org, {
                label: "ghost",
                role: "project_viewer",
                projectId: project
              })
            )
            assert.deepStrictEqual(invalid, { projectId: ["names no project in this workspace"] }, project)
          }
          // The other field checks come first and answer as before.
          const past = new Date(Date.now() - 1000).toISOString()
          const expired = invalidFields(
            yield* createKey(baseUrl, owner.token, org, {
              label: "ghost",
              role: "project_viewer",
              projectId: projectId(),
              expiresAt: past
            })
          )
          assert.deepStrictEqual(Object.keys(expired), ["expiresAt"])
          assert.deepStrictEqual(
            keysOf(yield* listKeys(baseUrl, owner.token, org)),
            before,
            "no refused create left a key"
          )
        }))

      it.effect("an archived project counts for a key's projectId; another workspace's project is fine there", () =>
        Effect.gen(function*() {
          const { baseUrl, elsewhere, org, owner, second } = yield* withSecondWorkspace
          const archived = yield* createProject(baseUrl, owner.token, org)
          ok(yield* call(baseUrl, "DELETE", `/v1/organizations/${org}/projects/${archived}`, { token: owner.token }))
          const key = yield* mint(baseUrl, owner.token, org, { role: "project_viewer", projectId: archived })
          assert.strictEqual(key.servicePrincipal.projectId, archived)
          const there = yield* mint(baseUrl, owner.token, second.id, { role: "project_viewer", projectId: elsewhere })
          assert.strictEqual(there.servicePrincipal.projectId, elsewhere)
        }))

      it.effect("who may mint which role: nobody mints a key stronger than itself", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl, "owner")
          const org = owner.personal.id
          const [admin, builder, viewer] = [
            yield* newUser(baseUrl, "admin"),
            yield* newUser(baseUrl, "builder"),
            yield* newUser(baseUrl, "viewer")
          ]
          yield* seedBinding(org, "user", admin.user.id, "admin")
          yield* seedBinding(org, "user", builder.user.id, "builder")
          yield* seedBinding(org, "user", viewer.user.id, "viewer")

          // The owner may mint every role.
          for (const role of ["owner", "admin", "billing_admin", "builder", "viewer"]) {
            yield* mint(baseUrl, owner.token, org, { role })
          }
          // An admin lacks billing.manage: no owner or billing_admin keys; everything else is fine.
          for (const role of ["owner", "billing_admin"]) {
            const error = failed(yield* createKey(baseUrl, admin.token, org, { label: "up", role }), 403, "forbidden")
            assert.strictEqual(error.details["role"], role)
          }
          const project = yield* createProject(baseUrl, owner.token, org)
          for (
            const body of [{ role: "admin" }, { role: "builder" }, { role: "viewer" }, {
              role: "project_admin",
              projectId: project
            }]
          ) {
            yield* mint(baseUrl, admin.token, org, body)
          }
          // A builder may list keys but create none; a viewer may do neither.
          failed(yield* createKey(baseUrl, builder.token, org, { label: "b", role: "viewer" }), 403, "forbidden")
          assert.lengthOf(keysOf(yield* listKeys(baseUrl, builder.token, org)), 9)
          failed(yield* listKeys(baseUrl, viewer.token, org), 403, "forbidden")
          const anyKey = keysOf(yield* listKeys(baseUrl, owner.token, org))[0]
          assert.isDefined(anyKey)
          failed(yield* revokeKey(baseUrl, builder.token, org, anyKey.id), 403, "forbidden")
          ok(yield* revokeKey(baseUrl, admin.token, org, anyKey.id))
        }))

      /** A fresh owner's project_viewer key "audited", created and revoked, and every form of its key material. */
      const auditedKey = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const project = yield* createProject(baseUrl, owner.token, owner.personal.id)
        const key = yield* mint(baseUrl, owner.token, owner.personal.id, {
          label: "audited",
          role: "project_viewer",
          projectId: project
        })
        ok(yield* revokeKey(baseUrl, owner.token, owner.personal.id, key.id))
        const material = [key.secret, key.secret.slice(3), key.prefix, sha256(key.secret)]
        return { baseUrl, owner, project, key, material }
      })

      it.effect("creation and revocation are on the workspace's audit and event logs, without key material", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { key, material, owner, project } = yield* auditedKey
          const audit = yield* sql`
            select * from audit_entries where org_id = ${owner.personal.id} and subject_id = ${key.id}
            order by occurred_at, id`.pipe(Effect.orDie)
          assert.deepStrictEqual(audit.map((row) => row["eventType"]), ["api_key.created", "api_key.revoked"])
          for (const row of audit) {
            assert.strictEqual(row["category"], "api_keys")
            assert.strictEqual(row["actorType"], "user")
            assert.strictEqual(row["actorId"], owner.user.id)
            assert.strictEqual(row["subjectKind"], "api_key")
            assert.strictEqual(row["subjectName"], "audited")
            assert.strictEqual(row["projectId"], project)
            assert.match(String(row["requestId"]), /^req_/)
            // webhooks.md §1: the key's API metadata, as the API returns it.
            const payload = row["payload"]
            const apiKey = typeof payload === "object" && payload !== null && "apiKey" in payload
              ? payload.apiKey
              : undefined
            assert.deepInclude(apiKey, { id: key.id, label: "audited" })
            assert.deepInclude(
              typeof apiKey === "object" && apiKey !== null && "servicePrincipal" in apiKey
                ? apiKey.servicePrincipal
                : undefined,
              { id: key.servicePrincipal.id, role: "project_viewer", projectId: project }
            )
            for (const secret of material) assert.notInclude(JSON.stringify(row), secret)
          }
          const events = yield* sql`
            select type from events where org_id = ${owner.personal.id} and subject_id = ${key.id}
            order by occurred_at, id`.pipe(Effect.orDie)
          assert.deepStrictEqual(events.map((row) => row["type"]), ["api_key.created", "api_key.revoked"])
        }))

      it.effect("creation and revocation are on the user's security-event log, without key material", () =>
        Effect.gen(function*() {
          const { baseUrl, key, material, owner } = yield* auditedKey
          const log = ok(yield* call(baseUrl, "GET", "/v1/auth/security-events", { token: owner.token }), {
            securityEvents: Schema.Array(SecurityEvent)
          }).securityEvents
          const keyEvents = log.filter((event) => event.eventType.startsWith("api_key."))
          assert.deepStrictEqual(keyEvents.map((event) => event.eventType), ["api_key.revoked", "api_key.created"])
          for (const event of keyEvents) {
            assert.strictEqual(event.outcome, "success")
            assert.match(event.requestId ?? "", /^req_/)
            assert.deepInclude(event.metadata, { keyId: key.id, orgId: owner.personal.id, role: "project_viewer" })
            for (const secret of material) assert.notInclude(JSON.stringify(event), secret)
          }
        }))

      /** A fresh owner, and `cpctl` as that owner against the suite's server. */
      const cliOwner = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const run = (...args: ReadonlyArray<string>) => cpctlAs(baseUrl, owner.token, ...args)
        return { baseUrl, owner, slug: owner.personal.slug, run }
      })

      it.effect("cpctl api-keys create: --json answers a working key; the human view shows the secret once", () =>
        Effect.gen(function*() {
          const { baseUrl, run, slug } = yield* cliOwner
          const created = yield* run(
            "api-keys",
            "create",
            "from the CLI",
            "--workspace",
            slug,
            "--role",
            "builder",
            "--json"
          )
          assert.strictEqual(created.exitCode, 0, created.stderr)
          const apiKey = Schema.decodeUnknownSync(Schema.fromJsonString(CreatedApiKey))(created.stdout)
          assert.strictEqual(apiKey.label, "from the CLI")
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${slug}`, { token: apiKey.secret }))

          const human = yield* run("api-keys", "create", "shown once", "-w", slug, "--role", "viewer")
          assert.strictEqual(human.exitCode, 0, human.stderr)
          assert.match(human.stdout, /^ID\s+LABEL\s+PREFIX\s+ROLE\s+PROJECT\s+CREATED\s+EXPIRES\s+USED\s+REVOKED\n/)
          assert.match(human.stdout, /Secret \(shown only this once; store it now\):\nsk_[0-9a-f]{64}\n$/)
        }))

      it.effect("cpctl api-keys list: a table without secrets; --json with --limit pages", () =>
        Effect.gen(function*() {
          const { baseUrl, owner, run, slug } = yield* cliOwner
          const apiKey = yield* mint(baseUrl, owner.token, slug, { label: "from the CLI", role: "builder" })
          yield* mint(baseUrl, owner.token, slug, { label: "shown once", role: "viewer" })
          const list = yield* run("api-keys", "list", "--workspace", slug)
          assert.strictEqual(list.exitCode, 0, list.stderr)
          assert.include(list.stdout, `${apiKey.id}  from the CLI  ${apiKey.prefix}  builder`)
          assert.notInclude(list.stdout, "sk_" + apiKey.secret.slice(3, 20))
          const json = yield* run("--json", "api-keys", "list", "-w", slug, "--limit", "1")
          // The list itself on stdout; the next page's command on stderr.
          assert.lengthOf(Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(ApiKey)))(json.stdout), 1)
          assert.match(json.stderr, new RegExp(`^More: cpctl api-keys list -w ${slug} --limit 1 --cursor \\S+\n$`))
        }))

      it.effect("cpctl api-keys revoke: the key is 401 at once; again, conflict; a bad create, validation_failed", () =>
        Effect.gen(function*() {
          const { baseUrl, owner, run, slug } = yield* cliOwner
          const apiKey = yield* mint(baseUrl, owner.token, slug, { label: "from the CLI", role: "builder" })
          const revoked = yield* run("api-keys", "revoke", apiKey.id, "--workspace", slug, "--yes")
          assert.strictEqual(revoked.exitCode, 0, revoked.stderr)
          assert.include(revoked.stdout, apiKey.id)
          failed(
            yield* call(baseUrl, "GET", `/v1/organizations/${slug}`, { token: apiKey.secret }),
            401,
            "unauthenticated"
          )
          const again = yield* run("api-keys", "revoke", apiKey.id, "--workspace", slug, "--yes")
          assert.deepStrictEqual(again, {
            stdout: "",
            stderr: "error conflict: This API key is already revoked\n",
            exitCode: 1
          })
          const bad = yield* run("api-keys", "create", "x", "--workspace", slug, "--role", "project_admin")
          assert.strictEqual(bad.exitCode, 1)
          assert.match(bad.stderr, /^error validation_failed: /)
        }))
    }
  )
}
