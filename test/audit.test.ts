/**
 * The audit log end to end over real HTTP (spec: Audit entry, Audit, Limits "Rate limit, audit family"; contract §4
 * Lists, Cursor misuse, Validation errors, Rate limits; §5 `audit.read` belongs to owner and admin): what workspace
 * creation records, every filter alone and combined, inclusive bounds at the exact millisecond, malformed and empty
 * filters, cursor binding and keyset walks, who may read, the 121st request of a minute, the typed client and
 * `cpctl audit list`. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 *
 * Only workspace creation writes audit entries so far, so the cases that need a varied log write rows straight into
 * `events` and `audit_entries` (the rows `EventLog.record` writes), and the cases that need a second member write the
 * role binding straight into the database (the rows an accepted invitation would write).
 */
import { AuditEntry, Organization, WorkspaceRef } from "@cp/domain"
import { redact } from "@cp/server/platform/events"
import { newUuid } from "@cp/server/platform/ids"
import { NodeServices } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { assert, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctl } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, metaOf, nextCursor, ok, type Res, wire } from "./support/envelope.ts"
import { OpenApiDocument, OpenApiOperation } from "./support/openapi.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ENTRY_FIELDS = [
  "actorId",
  "actorType",
  "category",
  "correlationId",
  "description",
  "environmentId",
  "eventId",
  "eventType",
  "id",
  "occurredAt",
  "orgId",
  "payload",
  "projectId",
  "requestId",
  "source",
  "subject"
]

/** Every entry has exactly the spec's fields, well formed, and a payload with no sensitive value left in it. */
const assertEntryShape = (entry: typeof AuditEntry.Encoded) => {
  assert.deepStrictEqual(Object.keys(entry).sort(), ENTRY_FIELDS)
  assert.deepStrictEqual(Object.keys(entry.subject).sort(), ["id", "kind", "name"])
  assert.match(entry.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  assert.match(entry.eventId, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  assert.match(entry.orgId, /^org_/)
  assert.include(["user", "service_principal", "workflow", "system"], entry.actorType)
  assert.match(entry.occurredAt, ISO_MS)
  assert.isObject(entry.payload)
  assert.deepStrictEqual(redact(entry.payload), entry.payload, "sensitive fields are redacted")
}

const entriesIn = (res: Res) => ok(res, { auditEntries: Schema.Array(AuditEntry) }).auditEntries

const T0 = Date.parse("2025-06-01T12:00:00.000Z")
const iso = (ms: number) => new Date(ms).toISOString()
const PROJECT = "prj_01J000000000000000000000PA"
const ROBOT = "sp_01J00000000000000000000000"
const CI = "wf:deploy main"

interface Seeded {
  readonly at: number
  readonly actorType: string
  readonly actorId: string
  readonly category: string
  readonly eventType: string
  readonly subject: { readonly kind: string; readonly id: string; readonly name: string | null }
  readonly payload?: Record<string, unknown>
}

/** Five entries before the workspace existed, two of them in the same millisecond (minted in this order). */
const variedLog = (ownerId: string): ReadonlyArray<Seeded> => [
  {
    at: T0,
    actorType: "user",
    actorId: ownerId,
    category: "projects",
    eventType: "project.created",
    subject: { kind: "project", id: PROJECT, name: "web" }
  },
  {
    at: T0 + 1,
    actorType: "service_principal",
    actorId: ROBOT,
    category: "api_keys",
    eventType: "api_key.created",
    subject: { kind: "api_key", id: randomUUID(), name: "ci" },
    payload: { label: "ci", secret: "[REDACTED]" }
  },
  {
    at: T0 + 2,
    actorType: "system",
    actorId: "system",
    category: "billing",
    eventType: "subscription.updated",
    subject: { kind: "subscription", id: "sub_1", name: null }
  },
  {
    at: T0 + 2,
    actorType: "workflow",
    actorId: CI,
    category: "projects",
    eventType: "project.archived",
    subject: { kind: "project", id: PROJECT, name: "web" }
  },
  {
    at: T0 + 3,
    actorType: "user",
    actorId: ownerId,
    category: "membership",
    eventType: "member.role_changed",
    subject: { kind: "member", id: "mem_01J000000000000000000000MB", name: null },
    payload: { from: "viewer", to: "admin" }
  }
]

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `audit [${backend}]`,
    (it) => {
      /** A fresh user and its `Personal` workspace. */
      const newUser = (baseUrl: string, prefix = "audit") => signInWithPersonal(baseUrl, prefix)

      const newWorkspace = (baseUrl: string, token: string, name = "Audited") =>
        Effect.map(call(baseUrl, "POST", "/v1/organizations", { token, body: { name } }), (res) => ({
          organization: ok(res, { organization: Organization }).organization,
          requestId: metaOf(res).requestId
        }))

      /** `GET /v1/organizations/{ref}/audit?{query}`. */
      const audit = (baseUrl: string, token: string | undefined, ref: string, query = "") =>
        call(
          baseUrl,
          "GET",
          `/v1/organizations/${ref}/audit${query === "" ? "" : `?${query}`}`,
          token === undefined ? {} : { token }
        )

      const entriesOf = (baseUrl: string, token: string, ref: string, query = "") =>
        Effect.map(audit(baseUrl, token, ref, query), (res) => {
          const entries = entriesIn(res)
          entries.forEach(assertEntryShape)
          return entries
        })

      /** What an accepted invitation would write: a membership and one workspace-scoped role binding. */
      const grant = (orgId: string, userId: string, role: string) => seedMember(orgId, userId, role)

      /** The rows `EventLog.record` writes for one event: the event and its audit entry. Returns the entry ids. */
      const seed = (orgId: string, rows: ReadonlyArray<Seeded>) =>
        Effect.gen(function*() {
          const sql = yield* PgClient.PgClient
          const ids: Array<string> = []
          for (const row of rows) {
            const eventId = newUuid(Date.now())
            const id = newUuid(Date.now())
            const common = {
              orgId,
              actorType: row.actorType,
              actorId: row.actorId,
              subjectKind: row.subject.kind,
              subjectId: row.subject.id,
              subjectName: row.subject.name,
              projectId: null,
              environmentId: null,
              occurredAt: new Date(row.at),
              requestId: "req_seeded",
              correlationId: "req_seeded"
            }
            const data = sql.json(row.payload ?? {})
            yield* sql`insert into events ${
              sql.insert({ id: eventId, type: row.eventType, data, traceContext: null, ...common })
            }`
            yield* sql`insert into audit_entries ${
              sql.insert({
                id,
                eventId,
                eventType: row.eventType,
                source: "api",
                category: row.category,
                description: `${row.eventType} (seeded)`,
                payload: data,
                ...common
              })
            }`
            ids.push(id)
          }
          return ids
        }).pipe(Effect.orDie)

      /** A workspace whose log holds its creation (now) and the varied log (2025). */
      const variedWorkspace = (baseUrl: string) =>
        Effect.gen(function*() {
          const owner = yield* newUser(baseUrl)
          const { organization } = yield* newWorkspace(baseUrl, owner.token, "Varied")
          const seeded = yield* seed(organization.id, variedLog(owner.user.id))
          return { owner, organization, seeded }
        })

      /** A fresh user, its workspace "Audited" with the request id that created it, and that workspace's log. */
      const auditedWorkspace = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const { organization: org, requestId } = yield* newWorkspace(baseUrl, user.token, "Audited")
        const entries = yield* entriesOf(baseUrl, user.token, org.id)
        return { baseUrl, user, org, requestId, entries }
      })

      it.effect("workspace creation: both entries, with actor, subject and category, newest first", () =>
        Effect.gen(function*() {
          const { baseUrl, org, requestId, user } = yield* auditedWorkspace
          const res = yield* audit(baseUrl, user.token, org.id)
          const data = ok(res, { auditEntries: Schema.Array(AuditEntry) })
          assert.deepStrictEqual(Object.keys(data), ["auditEntries"])
          assert.isNull(metaOf(res).cursor)
          const entries = data.auditEntries
          entries.forEach(assertEntryShape)
          assert.deepStrictEqual(entries.map((e) => e.eventType), ["membership.added", "organization.created"])
          const [added, created] = entries
          assert.isDefined(added)
          assert.isDefined(created)
          assert.isAtLeast(Date.parse(added.occurredAt), Date.parse(created.occurredAt))
          for (const entry of entries) {
            assert.match(entry.id, UUID)
            assert.deepInclude(entry, {
              orgId: org.id,
              projectId: null,
              environmentId: null,
              actorType: "user",
              actorId: user.user.id,
              source: "api",
              requestId
            })
            assert.isString(entry.description)
            assert.isAbove(entry.description.length, 0)
          }
          assert.strictEqual(created.category, "organization")
          assert.deepStrictEqual(created.subject, { kind: "organization", id: org.id, name: "Audited" })
          // webhooks.md §1: the workspace as the API returns it.
          assert.deepInclude(created.payload, {
            organization: org
          })
          assert.strictEqual(added.category, "membership")
          assert.strictEqual(added.subject.kind, "member")
          assert.match(added.subject.id, /^mem_/)
          assert.deepInclude(added.payload["member"], {
            subjectType: "user",
            subjectId: user.user.id,
            status: "active",
            roles: [{ role: "owner", scopeKind: "organization" }]
          })
          assert.notStrictEqual(added.eventId, created.eventId)
        }))

      it.effect("any spelling of the workspace reference lists the same page; the alias adds workspaceId", () =>
        Effect.gen(function*() {
          const { baseUrl, entries, org, user } = yield* auditedWorkspace
          for (const ref of [org.slug, org.workspaceRef]) {
            assert.deepStrictEqual(entriesIn(yield* audit(baseUrl, user.token, ref)), entries)
          }
          const aliased = ok(yield* call(baseUrl, "GET", `/v1/workspaces/${org.slug}/audit`, { token: user.token }), {
            auditEntries: Schema.Array(Schema.Struct({ ...AuditEntry.fields, workspaceId: WorkspaceRef }))
          })
          assert.deepStrictEqual(aliased.auditEntries.map((e) => e.workspaceId), [
            org.workspaceRef,
            org.workspaceRef
          ])
        }))

      it.effect("the Personal workspace of the first sign-in is audited the same way", () =>
        Effect.gen(function*() {
          const { baseUrl, user } = yield* auditedWorkspace
          const personal = yield* entriesOf(baseUrl, user.token, user.personal.id)
          assert.deepStrictEqual(personal.map((e) => [e.eventType, e.actorId]), [
            ["membership.added", user.user.id],
            ["organization.created", user.user.id]
          ])
        }))

      it.effect("the typed client decodes the same page, and narrows by category and an exact instant", () =>
        Effect.gen(function*() {
          const { baseUrl, entries, org, user } = yield* auditedWorkspace
          const created = entries[1]
          assert.isDefined(created)
          const client = yield* clientFor(baseUrl, user.token)
          const typed = yield* client.audit.list({ params: { orgId: org.slug }, query: {} })
          assert.isNull(typed.cursor)
          assert.deepStrictEqual(typed.data.auditEntries.map((e) => e.id), entries.map((e) => e.id))
          assert.instanceOf(typed.data.auditEntries[0]?.occurredAt, Date)
          const encoded = Schema.encodeSync(Schema.Array(AuditEntry))(typed.data.auditEntries)
          assert.deepStrictEqual(JSON.parse(JSON.stringify(encoded)), entries)
          const narrowed = yield* client.audit.list({
            params: { orgId: org.id },
            query: { category: "organization", from: new Date(created.occurredAt), to: new Date(created.occurredAt) }
          })
          assert.deepStrictEqual(narrowed.data.auditEntries.map((e) => e.eventType), ["organization.created"])
        }))

      /** The varied workspace and its whole log, newest first. */
      const variedWithAll = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const varied = yield* variedWorkspace(baseUrl)
        const all = yield* entriesOf(baseUrl, varied.owner.token, varied.organization.id, "limit=100")
        return { baseUrl, ...varied, all }
      })

      it.effect("the varied log lists newest first, seeded entries after the workspace's own", () =>
        Effect.gen(function*() {
          const { all, seeded } = yield* variedWithAll
          assert.deepStrictEqual(all.map((e) => e.eventType), [
            "membership.added",
            "organization.created",
            "member.role_changed",
            "project.archived",
            "subscription.updated",
            "api_key.created",
            "project.created"
          ])
          assert.deepStrictEqual(all.slice(2).map((e) => e.id), [...seeded].reverse())
        }))

      it.effect("each filter narrows alone", () =>
        Effect.gen(function*() {
          const { all, baseUrl, organization: org, owner } = yield* variedWithAll
          const cases: ReadonlyArray<readonly [string, (e: typeof AuditEntry.Encoded) => boolean]> = [
            ["category=projects", (e) => e.category === "projects"],
            ["category=api_keys", (e) => e.category === "api_keys"],
            ["category=membership", (e) => e.category === "membership"],
            [`actorId=${owner.user.id}`, (e) => e.actorId === owner.user.id],
            [`actorId=${encodeURIComponent(CI)}`, (e) => e.actorId === CI],
            ["actorType=user", (e) => e.actorType === "user"],
            ["actorType=service_principal", (e) => e.actorType === "service_principal"],
            ["actorType=workflow", (e) => e.actorType === "workflow"],
            ["actorType=system", (e) => e.actorType === "system"],
            ["subjectKind=project", (e) => e.subject.kind === "project"],
            [`subjectId=${PROJECT}`, (e) => e.subject.id === PROJECT],
            [`subjectId=${org.id}`, (e) => e.subject.id === org.id],
            ["eventType=member.role_changed", (e) => e.eventType === "member.role_changed"],
            [`from=${iso(T0 + 2)}`, (e) => Date.parse(e.occurredAt) >= T0 + 2],
            [`to=${iso(T0 + 1)}`, (e) => Date.parse(e.occurredAt) <= T0 + 1]
          ]
          for (const [query, keep] of cases) {
            const got = yield* entriesOf(baseUrl, owner.token, org.id, query)
            const expected = all.filter(keep)
            assert.isAbove(expected.length, 0, query)
            assert.isBelow(expected.length, all.length, query)
            assert.deepStrictEqual(got.map((e) => e.id), expected.map((e) => e.id), query)
          }
        }))

      it.effect("filters combine with AND", () =>
        Effect.gen(function*() {
          const { baseUrl, organization: org, owner } = yield* variedWithAll
          const combined: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
            ["category=projects&actorType=workflow", ["project.archived"]],
            ["category=projects&actorType=user", ["project.created"]],
            [`actorId=${owner.user.id}&category=membership`, ["membership.added", "member.role_changed"]],
            [`subjectKind=project&subjectId=${PROJECT}&eventType=project.created`, ["project.created"]],
            [`category=projects&from=${iso(T0 + 1)}&to=${iso(T0 + 3)}`, ["project.archived"]],
            [`actorType=user&from=${iso(T0 + 3)}&subjectKind=member`, ["membership.added", "member.role_changed"]],
            ["category=billing&actorType=user", []],
            ["eventType=membership.updated", []]
          ]
          for (const [query, types] of combined) {
            const got = yield* entriesOf(baseUrl, owner.token, org.id, query)
            assert.deepStrictEqual(got.map((e) => e.eventType), [...types], query)
          }
        }))

      it.effect("from and to are inclusive bounds at the exact millisecond, in any offset", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { owner, organization: org } = yield* variedWorkspace(baseUrl)
          const types = (query: string) =>
            Effect.map(entriesOf(baseUrl, owner.token, org.id, query), (es) => es.map((e) => e.eventType))
          const between = (from: number, to: number) => types(`from=${iso(from)}&to=${iso(to)}`)

          assert.deepStrictEqual(yield* between(T0 + 2, T0 + 2), ["project.archived", "subscription.updated"])
          assert.deepStrictEqual(yield* between(T0 + 1, T0 + 2), [
            "project.archived",
            "subscription.updated",
            "api_key.created"
          ])
          assert.deepStrictEqual(yield* between(T0, T0), ["project.created"])
          assert.deepStrictEqual(yield* between(T0 - 1, T0 - 1), [])
          assert.deepStrictEqual(yield* between(T0 + 3, T0 + 3), ["member.role_changed"])
          assert.deepStrictEqual(yield* between(T0 + 4, T0 + 999), [])
          assert.deepStrictEqual(yield* types(`to=${iso(T0 - 1)}`), [])
          assert.deepStrictEqual(yield* types(`from=${iso(T0 + 4)}`), ["membership.added", "organization.created"])
          // The same instant written with an offset (the `+` URL-encoded).
          const plusTwo = encodeURIComponent("2025-06-01T14:00:00.002+02:00")
          assert.deepStrictEqual(yield* types(`from=${plusTwo}&to=${plusTwo}`), [
            "project.archived",
            "subscription.updated"
          ])
          // from after to: no instant satisfies both, so the page is empty (not an error).
          assert.deepStrictEqual(yield* between(T0 + 3, T0 + 1), [])
        }))

      it.effect("each malformed filter is 422 naming that field alone", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          const malformed: ReadonlyArray<readonly [string, string]> = [
            ["category", "API_keys"],
            ["category", "api keys"],
            ["category", "a".repeat(65)],
            ["category", "billing*"],
            ["category", "ünicode"],
            ["actorId", "usr/1"],
            ["actorId", "x".repeat(129)],
            ["actorId", "a;b"],
            ["subjectKind", "<script>"],
            ["subjectId", "id\"quote"],
            ["eventType", "project.*"],
            ["eventType", "a,b"],
            ["actorType", "robot"],
            ["actorType", "User"],
            ["from", "2026-01-01"],
            ["from", "2026-01-01T00:00:00Z"],
            ["from", "2026-01-01T00:00:00.0000Z"],
            ["from", "2026-01-01T00:00:00.000"],
            ["from", "2026-02-30T00:00:00.000Z"],
            ["from", "2026-01-01T25:00:00.000Z"],
            ["to", "1700000000000"],
            ["to", "yesterday"],
            ["to", "2026-13-01T00:00:00.000Z"],
            ["limit", "0"],
            ["limit", "101"],
            ["limit", "1.5"],
            ["limit", "ten"],
            ["limit", ""],
            ["cursor", "garbage"],
            ["cursor", ""]
          ]
          for (const [field, value] of malformed) {
            const query = `${field}=${encodeURIComponent(value)}`
            const fields = invalidFields(yield* audit(baseUrl, owner.token, owner.personal.id, query))
            assert.deepStrictEqual(Object.keys(fields), [field], query)
            assert.isString(fields[field]?.[0], query)
          }
        }))

      it.effect("all malformed fields at once are named, a well-formed one beside them not; a filter twice 422", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl)
          const ref = owner.personal.id
          const many = invalidFields(
            yield* audit(baseUrl, owner.token, ref, "category=X&actorType=robot&from=now&to=later&actorId=ok&limit=0")
          )
          assert.deepStrictEqual(Object.keys(many).sort(), [
            "actorType",
            "category",
            "from",
            "limit",
            "to"
          ])
          const twice = invalidFields(yield* audit(baseUrl, owner.token, ref, "category=a&category=b"))
          assert.deepStrictEqual(Object.keys(twice), ["category"])
        }))

      it.effect("a malformed filter is refused before anything is charged or queried", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const sql = yield* SqlClient.SqlClient
          const owner = yield* newUser(baseUrl)
          const ref = owner.personal.id
          // More malformed requests than the identity bucket holds, and none of them was charged.
          for (let i = 0; i < 130; i++) {
            failed(yield* audit(baseUrl, owner.token, ref, "actorType=robot"), 422, "validation_failed")
          }
          const bucket = sql<
            { count: number }
          >`select count from rate_limit_buckets where key = ${`audit:identity:${owner.user.id}`}`
          assert.deepStrictEqual(yield* bucket, [])
          ok(yield* audit(baseUrl, owner.token, ref))
          assert.deepStrictEqual((yield* bucket).map((row) => row.count), [1])
        }).pipe(Effect.orDie))

      it.effect("empty filters are ignored: ?category= is the same list, and the same walk, as no filter", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { owner, organization: org } = yield* variedWorkspace(baseUrl)
          const empty = "category=&actorId=&actorType=&subjectKind=&subjectId=&eventType=&from=&to="
          const all = yield* entriesOf(baseUrl, owner.token, org.id)
          assert.lengthOf(all, 7)
          assert.deepStrictEqual(yield* entriesOf(baseUrl, owner.token, org.id, empty), all)
          assert.deepStrictEqual(
            (yield* entriesOf(baseUrl, owner.token, org.id, "category=&actorType=user")).map((e) => e.id),
            (yield* entriesOf(baseUrl, owner.token, org.id, "actorType=user")).map((e) => e.id)
          )
          // A cursor from the unfiltered list continues with empty filters, and the other way round.
          const first = yield* audit(baseUrl, owner.token, org.id, "limit=2")
          const cursor = encodeURIComponent(nextCursor(first))
          const second = yield* entriesOf(baseUrl, owner.token, org.id, `${empty}&limit=2&cursor=${cursor}`)
          assert.deepStrictEqual(second.map((e) => e.id), all.slice(2, 4).map((e) => e.id))
          const emptyFirst = yield* audit(baseUrl, owner.token, org.id, `${empty}&limit=2`)
          const again = yield* entriesOf(
            baseUrl,
            owner.token,
            org.id,
            `limit=2&cursor=${encodeURIComponent(nextCursor(emptyFirst))}`
          )
          assert.deepStrictEqual(again.map((e) => e.id), all.slice(2, 4).map((e) => e.id))
        }))

      /** The varied workspace and the cursor after the first of its `category=projects` entries (limit 1). */
      const projectsCursor = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const varied = yield* variedWorkspace(baseUrl)
        const first = yield* audit(baseUrl, varied.owner.token, varied.organization.id, "category=projects&limit=1")
        assert.deepStrictEqual(entriesIn(first).map((e) => e.eventType), ["project.archived"])
        const raw = nextCursor(first)
        return { baseUrl, ...varied, raw, cursor: encodeURIComponent(raw) }
      })

      it.effect("cursor misuse: other filters, another workspace, another list, tampered: 422 on cursor", () =>
        Effect.gen(function*() {
          const { baseUrl, cursor, organization: org, owner, raw } = yield* projectsCursor
          const orgsCursor = encodeURIComponent(
            nextCursor(yield* call(baseUrl, "GET", "/v1/organizations?limit=1", { token: owner.token }))
          )
          const tampered = encodeURIComponent(raw.slice(0, -2) + (raw.endsWith("A") ? "BB" : "AA"))
          const misuses: ReadonlyArray<readonly [string, string]> = [
            [org.id, `cursor=${cursor}`],
            [org.id, `category=billing&cursor=${cursor}`],
            [org.id, `category=projects&actorType=workflow&cursor=${cursor}`],
            [org.id, `category=projects&from=${iso(T0)}&cursor=${cursor}`],
            [owner.personal.id, `category=projects&cursor=${cursor}`],
            [org.id, `category=projects&cursor=${orgsCursor}`],
            [org.id, `category=projects&cursor=${tampered}`]
          ]
          for (const [ref, query] of misuses) {
            assert.deepStrictEqual(Object.keys(invalidFields(yield* audit(baseUrl, owner.token, ref, query))), [
              "cursor"
            ], query)
          }
          // An audit cursor on another list is refused there too.
          const elsewhere = invalidFields(
            yield* call(baseUrl, "GET", `/v1/organizations?cursor=${cursor}`, { token: owner.token })
          )
          assert.deepStrictEqual(Object.keys(elsewhere), ["cursor"])
        }))

      it.effect("a cursor goes on with the same filters in any order and another limit", () =>
        Effect.gen(function*() {
          const { baseUrl, cursor, organization: org, owner } = yield* projectsCursor
          const next = yield* audit(baseUrl, owner.token, org.id, `limit=5&cursor=${cursor}&category=projects`)
          assert.deepStrictEqual(entriesIn(next).map((e) => e.eventType), ["project.created"])
          assert.isNull(metaOf(next).cursor)
        }))

      it.effect("a walk with limit=1 sees every entry exactly once, despite an insert mid-walk", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { owner, organization: org } = yield* variedWorkspace(baseUrl)
          const all = (yield* entriesOf(baseUrl, owner.token, org.id)).map((e) => e.id)
          const walk = (query: string, midWalk?: Effect.Effect<unknown, never, PgClient.PgClient>) =>
            Effect.gen(function*() {
              const seen: Array<string> = []
              let cursor: string | null = null
              let pages = 0
              do {
                const page: Res = yield* audit(
                  baseUrl,
                  owner.token,
                  org.id,
                  `${query}&limit=1${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`
                )
                const entries = entriesIn(page)
                assert.isAtMost(entries.length, 1)
                seen.push(...entries.map((e) => e.id))
                cursor = metaOf(page).cursor
                if (++pages === 3 && midWalk !== undefined) yield* midWalk
                assert.isBelow(pages, 20)
              } while (cursor !== null)
              return seen
            })
          const newest = seed(org.id, [{
            at: Date.now() + 60_000,
            actorType: "system",
            actorId: "system",
            category: "projects",
            eventType: "project.created",
            subject: { kind: "project", id: "prj_01J000000000000000000000ZZ", name: null }
          }])
          assert.deepStrictEqual(yield* walk("", newest), all, "every entry once, in order; the newer one not mid-walk")
          const projects = yield* walk("category=projects")
          assert.lengthOf(projects, 3)
          assert.strictEqual(new Set(projects).size, 3)
          assert.lengthOf(yield* entriesOf(baseUrl, owner.token, org.id), all.length + 1)
        }))

      it.effect("an admin reads what the owner reads, and goes on with the owner's cursor", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { owner, organization: org } = yield* variedWorkspace(baseUrl)
          const admin = yield* newUser(baseUrl, "admin")
          yield* grant(org.id, admin.user.id, "admin")
          const ownerPage = yield* audit(baseUrl, owner.token, org.id, "limit=1")
          assert.deepStrictEqual(ok(yield* audit(baseUrl, admin.token, org.id, "limit=1")), ok(ownerPage))
          // The owner's cursor is bound to the workspace and filters, not to the owner.
          const next = yield* audit(
            baseUrl,
            admin.token,
            org.id,
            `limit=1&cursor=${encodeURIComponent(nextCursor(ownerPage))}`
          )
          assert.lengthOf(entriesIn(next), 1)
        }))

      it.effect("viewer, builder, billing_admin: 403 naming audit.read, before validation; their own log reads", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { organization: org } = yield* variedWorkspace(baseUrl)
          for (const role of ["viewer", "builder", "billing_admin"]) {
            const member = yield* newUser(baseUrl, role.replace("_", "-"))
            yield* grant(org.id, member.user.id, role)
            ok(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: member.token }))
            const error = failed(yield* audit(baseUrl, member.token, org.id), 403, "forbidden")
            assert.strictEqual(error.details["permission"], "audit.read", role)
            // Permission comes before validation: a malformed filter does not reveal more.
            failed(yield* audit(baseUrl, member.token, org.slug, "actorType=robot"), 403, "forbidden")
            // Its own workspace's log is readable.
            ok(yield* audit(baseUrl, member.token, member.personal.id))
          }
        }))

      it.effect("a stranger is 404 by any reference, even with a bad filter; no or a bad token 401; POST 405", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const { owner, organization: org } = yield* variedWorkspace(baseUrl)
          const stranger = yield* newUser(baseUrl, "stranger")
          for (const ref of [org.id, org.slug, org.workspaceRef]) {
            failed(yield* audit(baseUrl, stranger.token, ref), 404, "not_found")
            failed(yield* audit(baseUrl, stranger.token, ref, "actorType=robot"), 404, "not_found")
          }
          failed(yield* audit(baseUrl, owner.token, "no-such-workspace"), 404, "not_found")
          failed(yield* audit(baseUrl, undefined, org.id), 401, "unauthenticated")
          failed(yield* audit(baseUrl, "sps_ses_nope.nope", org.id), 401, "unauthenticated")
          failed(
            yield* call(baseUrl, "POST", `/v1/organizations/${org.id}/audit`, { token: owner.token, body: {} }),
            405,
            "unsupported"
          )
        }))

      it.effect("the OpenAPI document lists the audit route with every filter", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const spec = yield* call(baseUrl, "GET", "/openapi.json")
          const doc = wire(OpenApiDocument, spec.json, spec.text)
          const operation = wire(OpenApiOperation, doc.paths["/v1/organizations/{orgId}/audit"]?.["get"])
          assert.isObject(operation)
          const query = operation.parameters.filter((p) => p.in === "query")
          assert.sameMembers(query.map((p) => p.name), [
            "category",
            "actorId",
            "actorType",
            "subjectKind",
            "subjectId",
            "eventType",
            "from",
            "to",
            "limit",
            "cursor"
          ])
          assert.isTrue(query.every((p) => p.required === false))
          assert.includeMembers(Object.keys(operation.responses), ["200", "401", "403", "404", "422", "429"])
        }))

      it.effect("the 121st request of a minute from one principal is 429 scope identity, with Retry-After", () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* newUser(baseUrl, "busy")
          const { organization: org } = yield* newWorkspace(baseUrl, owner.token)
          for (let i = 0; i < 120; i++) {
            const res = yield* audit(baseUrl, owner.token, org.id, "limit=1")
            assert.strictEqual(res.status, 200, `request ${i + 1}: ${res.text}`)
          }
          for (let i = 0; i < 2; i++) {
            const res = yield* audit(baseUrl, owner.token, org.id, "limit=1")
            const error = failed(res, 429, "rate_limited")
            assert.strictEqual(error.details["scope"], "identity")
            const seconds = error.details["retryAfterSeconds"]
            assert.isTrue(
              typeof seconds === "number" && Number.isInteger(seconds) && seconds >= 1 && seconds <= 60,
              String(seconds)
            )
            assert.strictEqual(res.headers.get("retry-after"), String(seconds))
          }
          // The identity is the principal, across workspaces.
          failed(yield* audit(baseUrl, owner.token, owner.personal.id), 429, "rate_limited")
          // Another principal on the same workspace still reads (the workspace bucket holds 600).
          const admin = yield* newUser(baseUrl, "calm")
          yield* grant(org.id, admin.user.id, "admin")
          ok(yield* audit(baseUrl, admin.token, org.id))
          // Other routes are not in the audit family.
          ok(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}`, { token: owner.token }))
        }))

      if (backend === "pglite") {
        /** The varied workspace, and `cpctl` as its owner against the suite's server. */
        const cliOnVaried = Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const { baseUrl } = yield* TestServer
          const varied = yield* variedWorkspace(baseUrl)
          const env = {
            CP_BASE_URL: baseUrl,
            CP_TOKEN: varied.owner.token,
            CP_CONFIG_DIR: yield* fs.makeTempDirectoryScoped()
          }
          const run = (...args: ReadonlyArray<string>) => cpctl(env, ...args)
          return { baseUrl, ...varied, env, run }
        })

        it.effect("cpctl audit list --json with filters as flags decodes as the domain's AuditEntry", () =>
          Effect.gen(function*() {
            const { organization: org, run } = yield* cliOnVaried
            const json = yield* run(
              "audit",
              "list",
              "-w",
              org.slug,
              "--category",
              "projects",
              "--actor-type",
              "workflow",
              "--json"
            )
            assert.strictEqual(json.exitCode, 0, json.stderr)
            const entries = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(AuditEntry)))(json.stdout)
            assert.deepStrictEqual(entries.map((e) => [e.eventType, e.actorId]), [["project.archived", CI]])
            assert.strictEqual(json.stderr, "")
          }))

        it.effect("cpctl audit list prints a table, every filter a flag", () =>
          Effect.gen(function*() {
            const { organization: org, owner, run } = yield* cliOnVaried
            const filtered = yield* run(
              "audit",
              "list",
              "--workspace",
              org.id,
              "--actor-id",
              owner.user.id,
              "--subject-kind",
              "project",
              "--subject-id",
              PROJECT,
              "--event-type",
              "project.created",
              "--from",
              iso(T0),
              "--to",
              iso(T0)
            )
            assert.strictEqual(filtered.exitCode, 0, filtered.stderr)
            const lines = filtered.stdout.trimEnd().split("\n")
            assert.match(lines[0] ?? "", /^OCCURRED\s+EVENT\s+CATEGORY\s+ACTOR\s+SUBJECT\s+DESCRIPTION$/)
            assert.lengthOf(lines, 2)
            assert.include(lines[1], iso(T0))
            assert.include(lines[1], `project.created  projects  user:${owner.user.id}  project:${PROJECT}`)
          }))

        it.effect("cpctl audit list --limit: the paging hint repeats the filters the cursor is bound to", () =>
          Effect.gen(function*() {
            const { organization: org, run } = yield* cliOnVaried
            const first = yield* run("audit", "list", "-w", org.workspaceRef, "--category", "projects", "--limit", "1")
            assert.strictEqual(first.exitCode, 0, first.stderr)
            const more = first.stderr.trimEnd()
            assert.match(
              more,
              new RegExp(`^More: cpctl audit list -w ${org.workspaceRef} --category projects --limit 1 --cursor \\S+$`)
            )
            assert.include(first.stdout, "project.archived")
            const second = yield* run(...more.replace(/^More: cpctl /, "").split(" ").filter((word) => word !== ""))
            assert.strictEqual(second.exitCode, 0, second.stderr)
            assert.include(second.stdout, "project.created")
            assert.notInclude(second.stdout + second.stderr, "More:")
          }))

        it.effect("cpctl audit list: a malformed filter is refused before any request; wire errors print a code", () =>
          Effect.gen(function*() {
            const { baseUrl, env, organization: org, run } = yield* cliOnVaried
            const bad = yield* run("audit", "list", "-w", org.id, "--from", "yesterday")
            assert.notStrictEqual(bad.exitCode, 0)
            assert.include(bad.stdout + bad.stderr, "--from")
            const viewer = yield* newUser(baseUrl, "cli-viewer")
            yield* grant(org.id, viewer.user.id, "viewer")
            const forbidden = yield* cpctl({ ...env, CP_TOKEN: viewer.token }, "audit", "list", "-w", org.id)
            assert.deepStrictEqual(forbidden, {
              stdout: "",
              stderr: "error forbidden: Missing permission audit.read\ndetails: {\"permission\":\"audit.read\"}\n",
              exitCode: 1
            })
          }))
      }
    }
  )
}
