/**
 * The wire rules that live at the router rather than in one area (contract §1 and §4): the `/v1/workspaces` alias,
 * 404/405/415/400 answers and the error envelope, request ids, health, the OpenAPI document and docs page,
 * `Idempotency-Key`, cursor pagination and its misuse, and the event-log write path of a create.
 */
import {
  ChildWorkspace,
  LoginChallenge,
  LoginResult,
  Membership,
  Organization,
  OutboxMessage,
  User,
  WorkspaceRef
} from "@cp/domain"
import { newUuid } from "@cp/server/platform/ids"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { decisionsOf } from "./support/access.ts"
import { dataOf, failed, invalidFields, metaOf, nextCursor, ok, type Res, wire } from "./support/envelope.ts"
import { OpenApiDocument } from "./support/openapi.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signInWithPersonal } from "./support/session.ts"

const serverWithDatabase = testServerOver(databaseLayer("pglite"))

const unique = () => randomUUID().replaceAll("-", "").slice(0, 10)

const Created = { organization: Organization, membership: Membership }
const organizationOf = (res: Res) => ok(res, { organization: Organization }).organization
const organizationsOf = (res: Res) => ok(res, { organizations: Schema.Array(Organization) }).organizations

/** An event row as the event log stores it. */
interface EventRow {
  readonly id: string
  readonly type: string
  readonly actorType: string
  readonly actorId: string
  readonly requestId: string | null
  readonly subjectKind: string
  readonly subjectId: string
  readonly subjectName: string | null
  readonly data: Record<string, unknown>
}

/** An audit row as the audit log stores it. */
interface AuditRow {
  readonly eventId: string
  readonly eventType: string
  readonly category: string
  readonly actorType: string
  readonly actorId: string
  readonly requestId: string | null
  readonly subjectKind: string
  readonly subjectId: string
}

layer(serverWithDatabase, { excludeTestServices: true })("wire", (it) => {
  const newUser = (baseUrl: string) => signInWithPersonal(baseUrl, "wire")

  describe("alias", () => {
    /** A fresh user and the workspace "Aliased" it created through `POST /v1/workspaces`. */
    const aliased = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const user = yield* newUser(baseUrl)
      const created = ok(
        yield* call(baseUrl, "POST", "/v1/workspaces", { token: user.token, body: { name: "Aliased" } }),
        Created
      )
      return { baseUrl, user, created }
    })

    it.effect("alias: create and list under /v1/workspaces answer as the canonical routes", () =>
      Effect.gen(function*() {
        const { baseUrl, created, user } = yield* aliased
        assert.strictEqual(created.organization.accountId, user.personal.workspaceRef)
        assert.strictEqual(created.membership.role, "owner")
        const aliasList = ok(yield* call(baseUrl, "GET", "/v1/workspaces", { token: user.token }), {
          organizations: Schema.Array(Organization)
        })
        const canonicalList = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
        assert.deepStrictEqual(aliasList, canonicalList, "no orgId in a list of organizations: identical")
        assert.deepStrictEqual(aliasList.organizations.map((o) => o.id), [
          created.organization.id,
          user.personal.id
        ])
      }))

    it.effect("alias: get by every reference; children carry workspaceId beside every orgId; effective access", () =>
      Effect.gen(function*() {
        const { baseUrl, created, user } = yield* aliased
        for (const ref of [created.organization.id, created.organization.workspaceRef, created.organization.slug]) {
          const got = ok(yield* call(baseUrl, "GET", `/v1/workspaces/${ref}`, { token: user.token }))
          assert.deepStrictEqual(got, { organization: created.organization })
        }

        const children = `/${user.personal.slug}/workspaces`
        const aliasChildren = ok(yield* call(baseUrl, "GET", `/v1/workspaces${children}`, { token: user.token }), {
          workspaces: Schema.Array(Schema.Struct({ ...ChildWorkspace.fields, workspaceId: WorkspaceRef }))
        })
        assert.deepStrictEqual(aliasChildren.workspaces, [{
          orgId: created.organization.id,
          workspaceId: created.organization.workspaceRef,
          workspaceRef: created.organization.workspaceRef,
          name: "Aliased"
        }])
        const canonicalChildren = ok(
          yield* call(baseUrl, "GET", `/v1/organizations${children}`, { token: user.token }),
          { workspaces: Schema.Array(ChildWorkspace) }
        )
        assert.deepStrictEqual(canonicalChildren.workspaces, [{
          orgId: created.organization.id,
          workspaceRef: created.organization.workspaceRef,
          name: "Aliased"
        }])

        const access = decisionsOf(
          yield* call(baseUrl, "GET", `/v1/workspaces/${created.organization.slug}/effective-access`, {
            token: user.token
          })
        )
        assert.isTrue(access.every((d) => d.allow))
      }))

    it.effect("alias: errors are the same envelope; only the exact prefix is an alias", () =>
      Effect.gen(function*() {
        const { baseUrl, user } = yield* aliased
        failed(yield* call(baseUrl, "GET", "/v1/workspaces/no-such-workspace", { token: user.token }), 404, "not_found")
        failed(yield* call(baseUrl, "GET", "/v1/workspaces", {}), 401, "unauthenticated")
        failed(yield* call(baseUrl, "GET", "/v1/workspacesx", { token: user.token }), 404, "not_found")
        failed(yield* call(baseUrl, "DELETE", "/v1/workspaces", { token: user.token }), 405, "unsupported")
      }))
  })

  describe("errors", () => {
    it.effect("unknown routes: 404 envelope, with or without a token", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        for (const [method, path] of [["GET", "/v1/nope"], ["GET", "/nope"], ["POST", "/v1/nope"], ["GET", "/v1"]]) {
          failed(yield* call(baseUrl, method!, path!), 404, "not_found")
          failed(yield* call(baseUrl, method!, path!, { token: user.token }), 404, "not_found")
        }
        failed(
          yield* call(baseUrl, "GET", `/v1/organizations/${user.personal.id}/no-such-thing`, { token: user.token }),
          404,
          "not_found"
        )
      }))

    it.effect("a known path with a method it lacks: 405 unsupported with Allow", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const cases: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
          ["DELETE", "/v1/organizations", ["GET", "POST"]],
          ["PUT", "/health", ["GET"]],
          ["GET", "/v1/auth/login/start", ["POST"]],
          ["POST", `/v1/organizations/${user.personal.id}`, ["GET"]],
          ["DELETE", "/v1/auth/profile", ["GET", "PATCH"]]
        ]
        for (const [method, path, allowed] of cases) {
          const res = yield* call(baseUrl, method, path, { token: user.token })
          failed(res, 405, "unsupported")
          const allow = (res.headers.get("allow") ?? "").split(",").map((m) => m.trim()).sort()
          assert.deepStrictEqual(allow, [...allowed].sort(), `${method} ${path}`)
        }
      }))

    it.effect("a body that is not application/json: 415; application/json with a charset is JSON", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        for (const contentType of ["text/plain", "application/x-www-form-urlencoded"]) {
          failed(
            yield* call(baseUrl, "POST", "/v1/organizations", {
              token: user.token,
              body: JSON.stringify({ name: "Typed" }),
              headers: { "content-type": contentType }
            }),
            415,
            "unsupported"
          )
        }
        failed(
          yield* call(baseUrl, "POST", "/v1/auth/login/start", {
            body: JSON.stringify({ email: freshEmail() }),
            headers: { "content-type": "text/plain" }
          }),
          415,
          "unsupported"
        )
        ok(
          yield* call(baseUrl, "POST", "/v1/organizations", {
            token: user.token,
            body: JSON.stringify({ name: "Charset" }),
            headers: { "content-type": "application/json; charset=utf-8" }
          })
        )
      }))

    it.effect("malformed JSON: 400; a JSON value of the wrong shape: 422", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        for (const body of ["{\"name\":", "{name: 'x'}", "not json"]) {
          failed(yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body }), 400, "bad_request")
        }
        failed(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: "{" }), 400, "bad_request")
        // A JSON value of the wrong shape is a validation failure, not a bad request.
        const fields = invalidFields(
          yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: "[]" })
        )
        assert.isObject(fields)
      }))

    // Architecture: an infrastructure failure is a defect that renders as 500 internal_error with the request id,
    // wherever it happens: in the handler, or at the edge (token, workspace reference, idempotency slot).
    it.effect("a database failure anywhere answers 500 internal_error in the envelope", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const sql = yield* SqlClient.SqlClient
        const user = yield* newUser(baseUrl)
        const broken = (table: string, request: Effect.Effect<Res>) =>
          Effect.acquireUseRelease(
            sql.unsafe(`alter table ${table} rename to ${table}_away`),
            () => request,
            () => Effect.orDie(sql.unsafe(`alter table ${table}_away rename to ${table}`))
          )
        const cases: ReadonlyArray<readonly [string, string, Effect.Effect<Res>]> = [
          ["handler", "members", call(baseUrl, "GET", "/v1/organizations", { token: user.token })],
          ["bearer token", "sessions", call(baseUrl, "GET", "/v1/organizations", { token: user.token })],
          [
            "workspace reference",
            "role_bindings",
            call(baseUrl, "GET", `/v1/organizations/${user.personal.id}`, { token: user.token })
          ],
          [
            "idempotency slot",
            "idempotency_keys",
            call(baseUrl, "POST", "/v1/organizations", {
              token: user.token,
              body: { name: "Never" },
              headers: { "idempotency-key": `broken-${unique()}` }
            })
          ]
        ]
        const answers: Array<string> = []
        for (const [where, table, request] of cases) {
          const res = yield* broken(table, request)
          answers.push(`${where}: ${res.status} ${res.text === "" ? "(empty body)" : res.text.slice(0, 60)}`)
          if (res.status === 500 && res.json !== undefined) failed(res, 500, "internal_error")
        }
        assert.deepStrictEqual(answers.filter((a) => !a.includes("internal_error")), [], answers.join("\n"))
      }).pipe(Effect.orDie))

    it.effect("request ids: one per response, in the body and in x-request-id", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const ids = new Set<string>()
        for (let i = 0; i < 3; i++) {
          const res = yield* call(baseUrl, "GET", "/health")
          ok(res)
          ids.add(metaOf(res).requestId)
          ids.add(failed(yield* call(baseUrl, "GET", "/v1/organizations"), 401, "unauthenticated").requestId)
        }
        assert.strictEqual(ids.size, 6)
      }))
  })

  describe("health and docs", () => {
    it.effect("GET /health answers the contract's shape", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const res = yield* call(baseUrl, "GET", "/health")
        assert.strictEqual(res.status, 200)
        const { requestId } = metaOf(res)
        assert.deepStrictEqual(res.json, {
          data: { status: "ok", database: "ok" },
          meta: { requestId, cursor: null }
        })
        assert.strictEqual(res.headers.get("x-request-id"), requestId)
      }))

    it.effect("GET /openapi.json and GET /docs, without credentials", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const spec = yield* call(baseUrl, "GET", "/openapi.json")
        assert.strictEqual(spec.status, 200)
        const doc = wire(OpenApiDocument, spec.json, spec.text)
        assert.match(doc.openapi, /^3\./)
        assert.isString(doc.info.title)
        for (
          const path of [
            "/v1/auth/login/start",
            "/v1/auth/login/complete",
            "/v1/auth/session",
            "/v1/auth/logout",
            "/v1/organizations",
            "/v1/organizations/{orgId}",
            "/v1/organizations/{orgId}/workspaces",
            "/v1/organizations/{orgId}/effective-access"
          ]
        ) {
          assert.property(doc.paths, path)
        }
        assert.property(doc.paths["/v1/organizations"], "post")
        assert.property(doc.paths["/v1/organizations"], "get")
        const docs = yield* call(baseUrl, "GET", "/docs")
        assert.strictEqual(docs.status, 200)
        assert.match(docs.headers.get("content-type") ?? "", /^text\/html/)
        assert.match(docs.text, /<html/i)
      }))
  })

  describe("idempotency", () => {
    const post = (baseUrl: string, path: string, token: string | undefined, key: string, body: string) =>
      call(baseUrl, "POST", path, {
        ...(token === undefined ? {} : { token }),
        body,
        headers: { "idempotency-key": key }
      })

    /** A fresh user and the first answer of a create under a fresh Idempotency-Key. */
    const firstUnderKey = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const user = yield* newUser(baseUrl)
      const key = `key-${unique()}`
      const slug = `idem-${unique()}`
      const first = yield* post(baseUrl, "/v1/organizations", user.token, key, JSON.stringify({ name: "Idem", slug }))
      return { baseUrl, user, key, slug, first }
    })

    it.effect("Idempotency-Key: a repeat replays the stored answer byte for byte and changes nothing", () =>
      Effect.gen(function*() {
        const { baseUrl, first, key, slug, user } = yield* firstUnderKey
        const created = ok(first, Created)
        assert.isNull(first.headers.get("idempotent-replayed"))
        // Same JSON, other key order and spacing.
        const again = yield* post(
          baseUrl,
          "/v1/organizations",
          user.token,
          key,
          `{ "slug" : "${slug}",\n "name": "Idem" }`
        )
        assert.strictEqual(again.status, 200)
        assert.strictEqual(again.text, first.text)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(again.headers.get("x-request-id"), metaOf(first).requestId)
        // The alias resolves to the same canonical path, hence the same slot.
        const aliased = yield* post(baseUrl, "/v1/workspaces", user.token, key, JSON.stringify({ name: "Idem", slug }))
        assert.strictEqual(aliased.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(dataOf(aliased, { organization: Organization }).organization.id, created.organization.id)
        const list = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
        assert.deepStrictEqual(list.map((o) => o.slug), [slug, user.personal.slug])
      }))

    it.effect("Idempotency-Key: a different body under the same key is 422 key_reused", () =>
      Effect.gen(function*() {
        const { baseUrl, key, slug, user } = yield* firstUnderKey
        const reused = failed(
          yield* post(baseUrl, "/v1/organizations", user.token, key, JSON.stringify({ name: "Other", slug })),
          422,
          "validation_failed"
        )
        assert.deepInclude(reused.details, { header: "Idempotency-Key", reason: "key_reused" })
      }))

    it.effect("Idempotency-Key: malformed keys are 422 with details.header and details.reason", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const slug = `never-${unique()}`
        for (const key of ["", "has space", "a".repeat(256), "bang!", "slash/key", "é"]) {
          const error = failed(
            yield* call(baseUrl, "POST", "/v1/organizations", {
              token: user.token,
              body: { name: "Never", slug },
              headers: { "idempotency-key": Buffer.from(key, "utf8").toString("latin1") }
            }),
            422,
            "validation_failed"
          )
          assert.strictEqual(error.details["header"], "Idempotency-Key", JSON.stringify(key))
          assert.isString(error.details["reason"])
        }
        failed(yield* call(baseUrl, "GET", `/v1/organizations/${slug}`, { token: user.token }), 404, "not_found")
        // The longest and the most varied valid keys are accepted.
        for (const key of ["A-z_0.9:".padEnd(255, "x"), "k"]) {
          ok(
            yield* post(baseUrl, "/v1/organizations", user.token, key, JSON.stringify({ name: `Valid ${key.length}` }))
          )
        }
      }))

    it.effect("Idempotency-Key: slots are per principal and per path", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const alice = yield* newUser(baseUrl)
        const bob = yield* newUser(baseUrl)
        const key = `shared-${unique()}`
        const body = JSON.stringify({ name: "Same key" })
        const a = yield* post(baseUrl, "/v1/organizations", alice.token, key, body)
        const b = yield* post(baseUrl, "/v1/organizations", bob.token, key, body)
        assert.isNull(b.headers.get("idempotent-replayed"))
        assert.notStrictEqual(organizationOf(b).id, organizationOf(a).id)
        assert.strictEqual(organizationOf(b).accountId, bob.personal.workspaceRef)
        // Same principal and key, another path (and another body): a slot of its own.
        const profile = yield* call(baseUrl, "PATCH", "/v1/auth/profile", {
          token: alice.token,
          body: { displayName: "Alice" },
          headers: { "idempotency-key": key }
        })
        assert.strictEqual(ok(profile, { user: User }).user.displayName, "Alice")
        assert.isNull(profile.headers.get("idempotent-replayed"))
        // Reads ignore the header.
        const read = yield* call(baseUrl, "GET", "/v1/organizations", {
          token: alice.token,
          headers: { "idempotency-key": key }
        })
        ok(read)
        assert.isNull(read.headers.get("idempotent-replayed"))
      }))

    it.effect("Idempotency-Key: a 4xx answer is remembered too", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const invalidKey = `invalid-${unique()}`
        const invalid = JSON.stringify({ name: "Bad", slug: "Bad Slug" })
        const first = yield* post(baseUrl, "/v1/organizations", user.token, invalidKey, invalid)
        const firstError = failed(first, 422, "validation_failed")
        const again = yield* post(baseUrl, "/v1/organizations", user.token, invalidKey, invalid)
        assert.strictEqual(again.status, 422)
        assert.strictEqual(again.text, first.text)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(again.headers.get("x-request-id"), firstError.requestId)

        // A 409 is remembered the same way.
        const conflictKey = `conflict-${unique()}`
        const taken = JSON.stringify({ name: "Taken", slug: user.personal.slug })
        const conflict = yield* post(baseUrl, "/v1/organizations", user.token, conflictKey, taken)
        failed(conflict, 409, "conflict")
        const replayed = yield* post(baseUrl, "/v1/organizations", user.token, conflictKey, taken)
        assert.strictEqual(replayed.text, conflict.text)
        assert.strictEqual(replayed.headers.get("idempotent-replayed"), "true")
      }))

    it.effect("Idempotency-Key on an unauthenticated route: login start replays, sending no second code", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const email = freshEmail("idem")
        const key = `login-${unique()}`
        const first = yield* post(baseUrl, "/v1/auth/login/start", undefined, key, JSON.stringify({ email }))
        const again = yield* post(baseUrl, "/v1/auth/login/start", undefined, key, JSON.stringify({ email }))
        assert.strictEqual(again.text, first.text)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        const outbox = ok(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`), {
          messages: Schema.Array(OutboxMessage)
        })
        assert.lengthOf(outbox.messages, 1)
      }))

    it.effect("Idempotency-Key: a stored answer that carries a secret (a session token) is sealed at rest", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const sql = yield* SqlClient.SqlClient
        const email = freshEmail("sealed")
        const challenge = ok(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), LoginChallenge)
        const outbox = ok(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`), {
          messages: Schema.Array(OutboxMessage)
        })
        const body = JSON.stringify({ challengeId: challenge.challengeId, code: outbox.messages[0]?.data["code"] })
        const key = `complete-${unique()}`
        const first = ok(yield* post(baseUrl, "/v1/auth/login/complete", undefined, key, body), LoginResult)
        const again = yield* post(baseUrl, "/v1/auth/login/complete", undefined, key, body)
        assert.strictEqual(ok(again, LoginResult).token, first.token)
        const stored = yield* sql<{ body: string }>`select body from idempotency_keys where idempotency_key = ${key}`
        assert.lengthOf(stored, 1)
        assert.notInclude(stored[0]?.body ?? "", first.token)
        assert.match(stored[0]?.body ?? "", /^v1\./)
      }))
  })

  describe("pagination", () => {
    it.effect("cursor walk of GET /v1/organizations with limit=1: every workspace exactly once, despite inserts", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        for (const name of ["P1", "P2", "P3"]) {
          ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name } }))
        }
        const before = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
          .map((o) => o.id)
        assert.lengthOf(before, 4)

        const seen: Array<string> = []
        let cursor: string | null = null
        let pages = 0
        do {
          const query: string = `?limit=1${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`
          const res: Res = yield* call(baseUrl, "GET", `/v1/organizations${query}`, { token: user.token })
          const organizations = organizationsOf(res)
          assert.isAtMost(organizations.length, 1)
          seen.push(...organizations.map((o) => o.id))
          cursor = metaOf(res).cursor
          if (++pages === 2) {
            // Inserted mid-walk: must not make the walk skip or repeat anything.
            ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name: "Mid walk" } }))
          }
          assert.isBelow(pages, 10)
        } while (cursor !== null)
        assert.strictEqual(new Set(seen).size, seen.length, "no workspace twice")
        for (const id of before) assert.include(seen, id)
      }))

    it.effect("the limit may change between the pages of a walk", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        for (const name of ["P1", "P2", "P3", "P4"]) {
          ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name } }))
        }
        const first = yield* call(baseUrl, "GET", "/v1/organizations?limit=2", { token: user.token })
        const rest = organizationsOf(
          yield* call(
            baseUrl,
            "GET",
            `/v1/organizations?limit=100&cursor=${encodeURIComponent(nextCursor(first))}`,
            {
              token: user.token
            }
          )
        )
        assert.lengthOf([...organizationsOf(first), ...rest], 5)
      }))

    it.effect("cursor misuse: another endpoint, another workspace, another caller, tampered: 422 on cursor", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const other = yield* newUser(baseUrl)
        const c1 = organizationOf(
          yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name: "C1" } })
        )
        ok(yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name: "C2" } }))
        const cursorOf = (path: string, token: string) =>
          Effect.map(call(baseUrl, "GET", path, { token }), (res) => {
            ok(res)
            return encodeURIComponent(nextCursor(res))
          })
        const security = yield* cursorOf("/v1/auth/security-events?limit=1", user.token)
        const orgs = yield* cursorOf("/v1/organizations?limit=1", user.token)
        const children = yield* cursorOf(`/v1/organizations/${user.personal.id}/workspaces?limit=1`, user.token)
        const tampered = orgs.slice(0, -2) + (orgs.endsWith("A") ? "BB" : "AA")

        const misuses: ReadonlyArray<readonly [string, string]> = [
          [`/v1/organizations?cursor=${security}`, user.token],
          [`/v1/organizations?cursor=${children}`, user.token],
          [`/v1/auth/security-events?cursor=${orgs}`, user.token],
          [`/v1/organizations/${user.personal.id}/workspaces?cursor=${orgs}`, user.token],
          [`/v1/organizations/${c1.id}/workspaces?cursor=${children}`, user.token],
          [`/v1/organizations?cursor=${orgs}`, other.token],
          [`/v1/organizations?cursor=${tampered}`, user.token],
          ["/v1/organizations?cursor=garbage", user.token],
          ["/v1/organizations?cursor=", user.token]
        ]
        for (const [path, token] of misuses) {
          assert.deepStrictEqual(
            Object.keys(invalidFields(yield* call(baseUrl, "GET", path, { token }))),
            ["cursor"],
            path
          )
        }
        ok(yield* call(baseUrl, "GET", `/v1/organizations?cursor=${orgs}`, { token: user.token }))
      }))

    it.effect("limit outside 1..100 or not an integer: 422 on limit", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        for (const limit of ["0", "101", "abc", "1.5", "-1", ""]) {
          for (
            const path of [
              "/v1/organizations",
              `/v1/organizations/${user.personal.id}/workspaces`,
              "/v1/auth/security-events"
            ]
          ) {
            const fields = invalidFields(yield* call(baseUrl, "GET", `${path}?limit=${limit}`, { token: user.token }))
            assert.deepStrictEqual(Object.keys(fields), ["limit"], `${path} limit=${limit}`)
          }
        }
        ok(yield* call(baseUrl, "GET", "/v1/organizations?limit=100", { token: user.token }))
        ok(yield* call(baseUrl, "GET", "/v1/organizations?limit=1", { token: user.token }))
      }))
  })

  describe("event log", () => {
    /** A fresh user's create of the workspace "Logged": the workspace, the request id, and the rows it wrote. */
    const logged = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const sql = yield* SqlClient.SqlClient
      const user = yield* newUser(baseUrl)
      const res = yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name: "Logged" } })
      const { organization: org } = ok(res, Created)
      const requestId = metaOf(res).requestId
      const events = yield* sql<EventRow>`select * from events where org_id = ${org.id}`
      return { baseUrl, sql, user, org, requestId, events }
    }).pipe(Effect.orDie)

    it.effect("event log: a create writes organization.created and membership.added, with actor and subject", () =>
      Effect.gen(function*() {
        const { events, org, requestId, user } = yield* logged
        assert.sameMembers(events.map((e) => e.type), ["organization.created", "membership.added"])
        for (const event of events) {
          assert.strictEqual(event.actorType, "user")
          assert.strictEqual(event.actorId, user.user.id)
          assert.strictEqual(event.requestId, requestId)
        }
        const created = events.find((e) => e.type === "organization.created")
        const added = events.find((e) => e.type === "membership.added")
        assert.isDefined(created)
        assert.isDefined(added)
        assert.strictEqual(created.subjectKind, "organization")
        assert.strictEqual(created.subjectId, org.id)
        assert.strictEqual(created.subjectName, "Logged")
        assert.deepNestedInclude(created.data, {
          "organization.id": org.id,
          "organization.workspaceRef": org.workspaceRef,
          "organization.slug": org.slug,
          "organization.accountId": org.accountId
        })
        assert.strictEqual(added.subjectKind, "member")
        assert.match(added.subjectId, /^mem_/)
        assert.deepNestedInclude(added.data, {
          "member.subjectType": "user",
          "member.subjectId": user.user.id,
          "member.roles[0].role": "owner"
        })
      }))

    it.effect("event log: each event of a create has its audit entry", () =>
      Effect.gen(function*() {
        const { events, org, requestId, sql, user } = yield* logged
        const audit = yield* sql<AuditRow>`select * from audit_entries where org_id = ${org.id}`
        assert.lengthOf(audit, 2)
        for (const event of events) {
          const entry = audit.find((a) => a.eventId === event.id)
          assert.isDefined(entry, event.type)
          assert.strictEqual(entry.eventType, event.type)
          assert.strictEqual(entry.category, event.type === "organization.created" ? "organization" : "membership")
          assert.strictEqual(entry.actorType, "user")
          assert.strictEqual(entry.actorId, user.user.id)
          assert.strictEqual(entry.requestId, requestId)
          assert.strictEqual(entry.subjectKind, event.subjectKind)
          assert.strictEqual(entry.subjectId, event.subjectId)
        }
      }).pipe(Effect.orDie))

    it.effect("event log: the Personal workspace of the first sign-in is logged the same way, by the new user", () =>
      Effect.gen(function*() {
        const { sql, user } = yield* logged
        const personal = yield* sql<
          { type: string; actorId: string }
        >`select type, actor_id from events where org_id = ${user.personal.id}`
        assert.sameDeepMembers(personal.map((e) => [e.type, e.actorId]), [
          ["organization.created", user.user.id],
          ["membership.added", user.user.id]
        ])
      }).pipe(Effect.orDie))

    it.effect("event log: a failed create logs nothing", () =>
      Effect.gen(function*() {
        const { baseUrl, org, sql, user } = yield* logged
        const count = sql<{ n: number }>`select count(*)::int as n from events`
        const before = (yield* count)[0]!.n
        failed(
          yield* call(baseUrl, "POST", "/v1/organizations", { token: user.token, body: { name: "x", slug: org.slug } }),
          409,
          "conflict"
        )
        assert.strictEqual((yield* count)[0]!.n, before)
      }).pipe(Effect.orDie))

    // Contract §4: UUIDs are UUIDv7 "so they sort by time". The event log and audit are read in (occurredAt, id)
    // order, and one request writes several events in the same millisecond (organization.created, then
    // membership.added), so ids minted within one millisecond must sort in minting order too.
    it.effect("event ids minted in the same millisecond sort in minting order", () =>
      Effect.sync(() => {
        const now = Date.now()
        const ids = Array.from({ length: 50 }, () => newUuid(now))
        assert.deepStrictEqual([...ids].sort(), ids)
      }))
  })
})
