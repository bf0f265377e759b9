/**
 * The audit read path on memory repositories under `TestClock` (time starts at 0 and moves only when a test moves
 * it): entries as the write path records them, every filter alone and combined, inclusive `from`/`to` at the exact
 * millisecond, keyset walks, cursor binding, the audit rate-limit family (120 per principal, 600 per workspace, per
 * 60 s) and write-time redaction. Also the query schema itself: what is a malformed filter, what is an empty one.
 */
import {
  type Actor,
  AuditEntry,
  AuditListQuery,
  type AuditListQuery as AuditListQueryType,
  type OrgId,
  RateLimited,
  type ResolvedWorkspace,
  ValidationFailed
} from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Result, Schema, SchemaIssue } from "effect"
import { TestClock } from "effect/testing"
import { AuditService } from "../../src/audit/service.ts"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { type EventActor, EventLog, type NewEvent } from "../../src/platform/events.ts"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { RateLimiter } from "../../src/platform/rateLimit.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { fieldsOf } from "../support/errors.ts"

const SECOND = 1000
const MINUTE = 60 * SECOND

/** The services of `app.ts` that the audit path uses, on fresh memory repositories, in test mode. */
const TestLayer = AuditService.layer.pipe(
  Layer.provideMerge(WorkspacesService.layer),
  Layer.provideMerge(Layer.mergeAll(EventLog.layer, RateLimiter.layer, Cursors.layer)),
  Layer.provideMerge(ServerKeys.layer),
  Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
  Layer.provideMerge(RepositoriesMemory)
)

const newUser = (): Extract<Actor, { kind: "user" }> => ({
  kind: "user",
  userId: mint.user(0),
  sessionId: mint.session(0)
})

/** A workspace created the real way (its creation is audited), resolved as the edge would hand it over. */
const newWorkspace = (owner: Extract<Actor, { kind: "user" }>, name = "Audited") =>
  Effect.gen(function*() {
    const { organization } = yield* (yield* WorkspacesService).create(owner, { name })
    const workspace: ResolvedWorkspace = { organization, grants: [] }
    return workspace
  })

const list = (actor: Actor, workspace: ResolvedWorkspace, query: AuditListQueryType = {}) =>
  Effect.flatMap(AuditService, (audit) => audit.list(actor, workspace, query))

const entriesOf = (actor: Actor, workspace: ResolvedWorkspace, query: AuditListQueryType = {}) =>
  Effect.map(list(actor, workspace, { limit: 100, ...query }), (page) => page.data.auditEntries)

const record = (orgId: OrgId, event: Omit<NewEvent, "orgId" | "description"> & { readonly description?: string }) =>
  Effect.flatMap(EventLog, (log) => log.record({ orgId, description: `${event.type} happened`, ...event }))

const ids = (entries: ReadonlyArray<AuditEntry>) => entries.map((entry) => entry.id)

/** Every page of a walk at `limit`, following cursors to the end. */
const walk = (actor: Actor, workspace: ResolvedWorkspace, query: AuditListQueryType, limit: number) =>
  Effect.gen(function*() {
    const seen: Array<AuditEntry> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const page: { data: { auditEntries: ReadonlyArray<AuditEntry> }; cursor: string | null } = yield* list(
        actor,
        workspace,
        { ...query, limit, ...(cursor === null ? {} : { cursor }) }
      )
      assert.isAtMost(page.data.auditEntries.length, limit)
      seen.push(...page.data.auditEntries)
      cursor = page.cursor
      assert.isBelow(++pages, 100, "the walk ends")
    } while (cursor !== null)
    return seen
  })

/**
 * A varied log in one workspace, one entry per millisecond from t = 1000 ms except two sharing a millisecond:
 * each actor type, several categories, subjects and event types.
 */
const seedVariedLog = (orgId: OrgId, user: EventActor) =>
  Effect.gen(function*() {
    const robot: EventActor = { actorType: "service_principal", actorId: "sp_01J00000000000000000000000" }
    const ci: EventActor = { actorType: "workflow", actorId: "wf:deploy main" }
    const system: EventActor = { actorType: "system", actorId: "system" }
    const project = { kind: "project", id: "prj_01J000000000000000000000PA", name: "web" }
    yield* TestClock.setTime(1000)
    yield* record(orgId, { type: "project.created", actor: user, subject: project, data: { name: "web" } })
    yield* TestClock.setTime(1001)
    yield* record(orgId, {
      type: "api_key.created",
      actor: robot,
      subject: { kind: "api_key", id: "0190a000-0000-7000-8000-000000000001", name: "ci key" },
      data: { label: "ci key", role: "builder" }
    })
    yield* TestClock.setTime(1002)
    yield* record(orgId, {
      type: "subscription.updated",
      actor: system,
      subject: { kind: "subscription", id: "sub_1", name: null },
      data: { plan: "pro" }
    })
    // Same millisecond as the previous one: ordered by id, newest minted first.
    yield* record(orgId, { type: "project.archived", actor: ci, subject: project, data: {} })
    yield* TestClock.setTime(1003)
    yield* record(orgId, {
      type: "membership.updated",
      actor: user,
      subject: { kind: "member", id: "mem_01J000000000000000000000MB", name: null },
      data: { from: "viewer", to: "admin" }
    })
  })

/** The workspace `Rockets`, created the real way at 5 s. */
const rocketsCreated = Effect.gen(function*() {
  const owner = newUser()
  yield* TestClock.setTime(5 * SECOND)
  return { owner, workspace: yield* newWorkspace(owner, "Rockets") }
})

/** A workspace with the varied log, and the event types of a filtered list of it. */
const variedLog = Effect.gen(function*() {
  const owner = newUser()
  const workspace = yield* newWorkspace(owner)
  yield* seedVariedLog(workspace.organization.id, { actorType: "user", actorId: owner.userId })
  const types = (query: AuditListQueryType) =>
    Effect.map(entriesOf(owner, workspace, query), (es) => es.map((e) => e.eventType))
  return { owner, workspace, types }
})

describe("AuditService", () => {
  it.effect("workspace creation writes two entries, newest first, each with exactly the spec's fields", () =>
    Effect.gen(function*() {
      const { owner, workspace } = yield* rocketsCreated
      const page = yield* list(owner, workspace)
      assert.isNull(page.cursor)
      const entries = page.data.auditEntries
      assert.deepStrictEqual(entries.map((e) => e.eventType), ["membership.added", "organization.created"])
      for (const entry of entries) {
        assert.deepStrictEqual(Object.keys(entry).sort(), [
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
        ])
      }
      assert.notStrictEqual(entries[0]?.eventId, entries[1]?.eventId)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("organization.created names its actor, the workspace as subject, its category, payload and time", () =>
    Effect.gen(function*() {
      const { owner, workspace } = yield* rocketsCreated
      const org = workspace.organization
      const created = (yield* entriesOf(owner, workspace, { eventType: "organization.created" }))[0]
      if (created === undefined) return assert.fail("no organization.created entry")
      assert.deepInclude(created, {
        orgId: org.id,
        projectId: null,
        environmentId: null,
        actorType: "user",
        actorId: owner.userId,
        category: "organization",
        source: "api",
        subject: { kind: "organization", id: org.id, name: "Rockets" }
      })
      assert.deepNestedInclude(created.payload, {
        "organization.id": org.id,
        "organization.slug": org.slug,
        "organization.name": "Rockets"
      })
      assert.strictEqual(created.occurredAt.getTime(), 5 * SECOND)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("membership.added names its actor, the membership category and the member as subject", () =>
    Effect.gen(function*() {
      const { owner, workspace } = yield* rocketsCreated
      const added = (yield* entriesOf(owner, workspace, { eventType: "membership.added" }))[0]
      if (added === undefined) return assert.fail("no membership.added entry")
      assert.deepInclude(added, { actorType: "user", actorId: owner.userId, category: "membership" })
      assert.strictEqual(added.subject.kind, "member")
      assert.match(added.subject.id, /^mem_/)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("entries list newest first with their categories; membership.updated reads member.role_changed", () =>
    Effect.gen(function*() {
      const { owner, workspace } = yield* variedLog
      const all = yield* entriesOf(owner, workspace)
      assert.lengthOf(all, 7)
      // Newest first: the creation entries (t = 0) last; the two at 1002 ms in minting order reversed.
      assert.deepStrictEqual(all.map((e) => e.eventType), [
        "member.role_changed",
        "project.archived",
        "subscription.updated",
        "api_key.created",
        "project.created",
        "membership.added",
        "organization.created"
      ])
      assert.deepStrictEqual(all.map((e) => e.category), [
        "membership",
        "projects",
        "billing",
        "api_keys",
        "projects",
        "membership",
        "organization"
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("each filter narrows the list alone", () =>
    Effect.gen(function*() {
      const { owner, types } = yield* variedLog
      assert.deepStrictEqual(yield* types({ category: "projects" }), ["project.archived", "project.created"])
      assert.deepStrictEqual(yield* types({ category: "membership" }), ["member.role_changed", "membership.added"])
      assert.deepStrictEqual(yield* types({ actorId: owner.userId }), [
        "member.role_changed",
        "project.created",
        "membership.added",
        "organization.created"
      ])
      assert.deepStrictEqual(yield* types({ actorType: "service_principal" }), ["api_key.created"])
      assert.deepStrictEqual(yield* types({ actorType: "workflow" }), ["project.archived"])
      assert.deepStrictEqual(yield* types({ actorType: "system" }), ["subscription.updated"])
      assert.deepStrictEqual(yield* types({ actorId: "wf:deploy main" }), ["project.archived"])
      assert.deepStrictEqual(yield* types({ subjectKind: "project" }), ["project.archived", "project.created"])
      assert.deepStrictEqual(yield* types({ subjectId: "sub_1" }), ["subscription.updated"])
      assert.deepStrictEqual(yield* types({ eventType: "member.role_changed" }), ["member.role_changed"])
      assert.deepStrictEqual(yield* types({ eventType: "membership.updated" }), [], "the audit name, not the log's")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("filters combine with AND; another workspace's values find nothing here", () =>
    Effect.gen(function*() {
      const { owner, types } = yield* variedLog
      assert.deepStrictEqual(yield* types({ category: "projects", actorType: "user" }), ["project.created"])
      assert.deepStrictEqual(
        yield* types({
          subjectKind: "project",
          subjectId: "prj_01J000000000000000000000PA",
          eventType: "project.archived"
        }),
        ["project.archived"]
      )
      assert.deepStrictEqual(yield* types({ actorId: owner.userId, category: "membership", from: new Date(1) }), [
        "member.role_changed"
      ])
      assert.deepStrictEqual(yield* types({ category: "billing", actorType: "user" }), [])
      const other = yield* newWorkspace(newUser())
      assert.deepStrictEqual(yield* types({ actorId: other.organization.id }), [])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("from and to are inclusive at the exact millisecond", () =>
    Effect.gen(function*() {
      const owner = newUser()
      yield* TestClock.setTime(0)
      const workspace = yield* newWorkspace(owner)
      yield* seedVariedLog(workspace.organization.id, { actorType: "user", actorId: owner.userId })
      const at = (ms: number) => new Date(ms)
      const types = (query: AuditListQueryType) =>
        Effect.map(entriesOf(owner, workspace, query), (es) => es.map((e) => e.eventType))

      assert.deepStrictEqual(yield* types({ from: at(1002), to: at(1002) }), [
        "project.archived",
        "subscription.updated"
      ])
      assert.deepStrictEqual(yield* types({ from: at(1001), to: at(1002) }), [
        "project.archived",
        "subscription.updated",
        "api_key.created"
      ])
      assert.deepStrictEqual(yield* types({ from: at(1003) }), ["member.role_changed"])
      assert.deepStrictEqual(yield* types({ to: at(1000) }), [
        "project.created",
        "membership.added",
        "organization.created"
      ])
      assert.deepStrictEqual(yield* types({ to: at(999) }), ["membership.added", "organization.created"])
      assert.deepStrictEqual(yield* types({ from: at(1004) }), [])
      // from after to: nothing satisfies both bounds, an empty page rather than an error.
      assert.deepStrictEqual(yield* types({ from: at(1003), to: at(1001) }), [])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a walk with limit=1 sees every entry exactly once, filtered or not, despite inserts mid-walk", () =>
    Effect.gen(function*() {
      const owner = newUser()
      const workspace = yield* newWorkspace(owner)
      const orgId = workspace.organization.id
      yield* seedVariedLog(orgId, { actorType: "user", actorId: owner.userId })
      const all = yield* entriesOf(owner, workspace)

      assert.deepStrictEqual(ids(yield* walk(owner, workspace, {}, 1)), ids(all))
      assert.deepStrictEqual(ids(yield* walk(owner, workspace, {}, 3)), ids(all))
      const projects = all.filter((e) => e.category === "projects")
      assert.deepStrictEqual(ids(yield* walk(owner, workspace, { category: "projects" }, 1)), ids(projects))

      // Two pages in, a newer entry lands: the rest of the walk neither repeats nor skips anything.
      const first = yield* list(owner, workspace, { limit: 2 })
      yield* TestClock.setTime(9 * SECOND)
      yield* record(orgId, {
        type: "project.created",
        actor: { actorType: "user", actorId: owner.userId },
        subject: { kind: "project", id: "prj_new", name: null },
        data: {}
      })
      assert.isString(first.cursor)
      const rest = yield* walk(owner, workspace, { cursor: first.cursor ?? "" }, 1)
      assert.deepStrictEqual([...ids(first.data.auditEntries), ...ids(rest)], ids(all))
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a cursor is bound to the endpoint, the workspace and the filters: anything else is 422 on cursor", () =>
    Effect.gen(function*() {
      const owner = newUser()
      const workspace = yield* newWorkspace(owner)
      const other = yield* newWorkspace(owner, "Other")
      yield* seedVariedLog(workspace.organization.id, { actorType: "user", actorId: owner.userId })
      const page = yield* list(owner, workspace, { category: "projects", limit: 1 })
      const cursor = page.cursor
      assert.isString(cursor)
      if (cursor === null) return

      const misuses: ReadonlyArray<readonly [ResolvedWorkspace, AuditListQueryType]> = [
        [workspace, { cursor }],
        [workspace, { cursor, category: "billing" }],
        [workspace, { cursor, category: "projects", actorType: "user" }],
        [workspace, { cursor, category: "projects", from: new Date(0) }],
        [other, { cursor, category: "projects" }],
        [workspace, { cursor: `${cursor.slice(0, -2)}xx`, category: "projects" }],
        [workspace, { cursor: "garbage", category: "projects" }]
      ]
      for (const [where, query] of misuses) {
        const error = yield* Effect.flip(list(owner, where, query))
        assert.instanceOf(error, ValidationFailed, JSON.stringify(query))
        assert.deepStrictEqual(Object.keys(fieldsOf(error)), ["cursor"])
      }
      // The same filters (limit may change; another caller of the same workspace may continue it).
      const next = yield* list(newUser(), workspace, { cursor, category: "projects", limit: 5 })
      assert.deepStrictEqual(next.data.auditEntries.map((e) => e.eventType), ["project.created"])
      assert.isNull(next.cursor)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a cursor from a list of another endpoint is refused too", () =>
    Effect.gen(function*() {
      const owner = newUser()
      const workspace = yield* newWorkspace(owner)
      const cursors = yield* Cursors
      const foreign = cursors.encode({ endpoint: "organizations.children", scope: workspace.organization.id }, {
        at: new Date(0).toISOString(),
        id: "0190a000-0000-7000-8000-000000000001"
      })
      const error = yield* Effect.flip(list(owner, workspace, { cursor: foreign }))
      assert.instanceOf(error, ValidationFailed)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the identity bucket: 120 per principal per 60 s, then 429 scope identity; refusals do not count", () =>
    Effect.gen(function*() {
      const owner = newUser()
      const workspace = yield* newWorkspace(owner)
      yield* TestClock.setTime(10 * MINUTE)
      for (let i = 0; i < 120; i++) yield* list(owner, workspace, { limit: 1 })
      yield* TestClock.adjust(59 * SECOND)
      for (let i = 0; i < 3; i++) {
        const error = yield* Effect.flip(list(owner, workspace))
        assert.instanceOf(error, RateLimited)
        assert.deepStrictEqual(error.error.details, { scope: "identity", retryAfterSeconds: 1 })
      }
      // Another principal is not held back by this one's bucket.
      yield* list(newUser(), workspace)
      // A 422 cursor is refused before the bucket: it neither counts nor reports 429.
      const invalid = yield* Effect.flip(list(owner, workspace, { cursor: "garbage" }))
      assert.instanceOf(invalid, ValidationFailed)
      // The window resets 60 s after its first request; the refused requests did not extend or fill it.
      yield* TestClock.adjust(1 * SECOND)
      for (let i = 0; i < 120; i++) yield* list(owner, workspace, { limit: 1 })
      const again = yield* Effect.flip(list(owner, workspace))
      assert.instanceOf(again, RateLimited)
      assert.deepStrictEqual(again.error.details, { scope: "identity", retryAfterSeconds: 60 })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the workspace bucket: 600 per workspace per 60 s across principals, then 429 scope org", () =>
    Effect.gen(function*() {
      const owner = newUser()
      const workspace = yield* newWorkspace(owner)
      const elsewhere = yield* newWorkspace(owner, "Elsewhere")
      yield* TestClock.setTime(20 * MINUTE)
      const principals = Array.from({ length: 5 }, newUser)
      for (const principal of principals) {
        for (let i = 0; i < 120; i++) yield* list(principal, workspace, { limit: 1 })
      }
      const error = yield* Effect.flip(list(newUser(), workspace))
      assert.instanceOf(error, RateLimited)
      assert.deepStrictEqual(error.error.details, { scope: "org", retryAfterSeconds: 60 })
      // Another workspace has a bucket of its own.
      yield* list(newUser(), elsewhere)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("payloads are redacted when written: sensitive values never come back, at any depth", () =>
    Effect.gen(function*() {
      const owner = newUser()
      const workspace = yield* newWorkspace(owner)
      const secrets = ["sk_live_plaintext", "hunter2", "ghp_token_value", "123456", "pem-private", "hashed"]
      yield* record(workspace.organization.id, {
        type: "api_key.created",
        actor: { actorType: "user", actorId: owner.userId },
        subject: { kind: "api_key", id: "0190a000-0000-7000-8000-000000000002", name: "deploy" },
        data: {
          label: "deploy",
          secret: secrets[0]!,
          password: secrets[1]!,
          nested: { accessToken: secrets[2]!, list: [{ code: secrets[3]!, privateKey: secrets[4]! }] },
          secretHash: secrets[5]!,
          prefix: "sk_live_pla"
        }
      })
      const [entry] = yield* entriesOf(owner, workspace, { category: "api_keys" })
      assert.isDefined(entry)
      if (entry === undefined) return
      assert.deepStrictEqual(entry.payload, {
        label: "deploy",
        secret: "[REDACTED]",
        password: "[REDACTED]",
        nested: { accessToken: "[REDACTED]", list: [{ code: "[REDACTED]", privateKey: "[REDACTED]" }] },
        secretHash: "[REDACTED]",
        prefix: "sk_live_pla"
      })
      const wire = JSON.stringify(yield* Schema.encodeEffect(Schema.Array(Schema.toCodecJson(AuditEntry)))([entry]))
      for (const secret of secrets) assert.notInclude(wire, secret)
    }).pipe(Effect.provide(TestLayer)))
})

describe("audit query schema", () => {
  const Query = Schema.toCodecArrayFromSingle(Schema.Struct(AuditListQuery))
  const decode = (query: Record<string, string | ReadonlyArray<string>>) =>
    Schema.decodeUnknownResult(Query)(query, { errors: "all" })
  /** The fields a query fails on (empty when it decodes). */
  const failingFields = (query: Record<string, string | ReadonlyArray<string>>): ReadonlyArray<string> => {
    const result = decode(query)
    if (Result.isSuccess(result)) return []
    const { issues } = SchemaIssue.makeFormatterStandardSchemaV1()(result.failure.issue)
    return [...new Set(issues.map((issue) => String(issue.path?.[0] ?? "_")))].sort()
  }

  it("each malformed filter fails on exactly its own field", () => {
    const malformed: ReadonlyArray<readonly [string, string]> = [
      ["category", "API_keys"],
      ["category", "api keys"],
      ["category", "a".repeat(65)],
      ["category", "billing*"],
      ["category", "é"],
      ["actorId", "usr/1"],
      ["actorId", "x".repeat(129)],
      ["actorId", "a;b"],
      ["subjectKind", "<script>"],
      ["subjectId", "id\"quote"],
      ["subjectId", "ü"],
      ["eventType", "project.*"],
      ["eventType", "a,b"],
      ["actorType", "robot"],
      ["actorType", "User"],
      ["actorType", " user"],
      ["from", "2026-01-01"],
      ["from", "2026-01-01T00:00:00Z"],
      ["from", "2026-01-01T00:00:00.0Z"],
      ["from", "2026-01-01T00:00:00.0000Z"],
      ["from", "2026-01-01T00:00:00.000"],
      ["from", "2026-13-01T00:00:00.000Z"],
      ["from", "2026-02-29T00:00:00.000Z"],
      ["from", "2026-01-01T24:00:00.000Z"],
      ["from", "2026-01-01T00:00:00.000+24:00"],
      ["to", "1700000000000"],
      ["to", "yesterday"],
      ["to", "2026-01-01 00:00:00.000Z"],
      ["limit", "0"],
      ["limit", "101"],
      ["limit", "ten"],
      ["limit", ""]
    ]
    for (const [field, value] of malformed) {
      assert.deepStrictEqual(failingFields({ [field]: value }), [field], `${field}=${JSON.stringify(value)}`)
    }
    assert.deepStrictEqual(failingFields({ category: ["a", "b"] }), ["category"], "one value per filter")
    assert.deepStrictEqual(
      failingFields({ category: "X", actorType: "robot", from: "now", to: "later", actorId: "ok", limit: "0" }),
      ["actorType", "category", "from", "limit", "to"],
      "every malformed field is reported at once"
    )
  })

  it("well-formed filters decode", () => {
    const valid = {
      category: "a".repeat(64),
      actorId: "x".repeat(128),
      subjectKind: "Api Key",
      subjectId: "team_01J:sub-part.v2",
      eventType: "member.role_changed",
      actorType: "service_principal",
      from: "2024-02-29T23:59:59.999Z",
      to: "2026-01-01T02:00:00.000+02:00",
      limit: "100",
      cursor: "opaque"
    }
    assert.deepStrictEqual(Result.getOrThrow(decode(valid)), {
      ...valid,
      actorType: "service_principal",
      from: new Date("2024-02-29T23:59:59.999Z"),
      to: new Date("2026-01-01T00:00:00.000Z"),
      limit: 100
    })
  })

  it("empty filters are absent", () => {
    const empty = {
      category: "",
      actorId: "",
      actorType: "",
      subjectKind: "",
      subjectId: "",
      eventType: "",
      from: "",
      to: ""
    }
    assert.deepStrictEqual(Result.getOrThrow(decode(empty)), {})
    assert.deepStrictEqual(Result.getOrThrow(decode({ ...empty, category: "billing", limit: "1" })), {
      category: "billing",
      limit: 1
    })
  })

  it("the typed client sends instants as UTC with milliseconds, and absent filters absent", () => {
    assert.deepStrictEqual(
      Schema.encodeSync(Schema.Struct(AuditListQuery))({ from: new Date(Date.UTC(2026, 0, 1)), category: "billing" }),
      { from: "2026-01-01T00:00:00.000Z", category: "billing" }
    )
  })
})
