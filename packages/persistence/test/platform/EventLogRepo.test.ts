import { AuditEntryId, EventId, OrgId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { UniqueViolation } from "../../src/errors.ts"
import {
  type AuditEntryRecord,
  type EventAppend,
  EventLogRepo,
  type EventRecord
} from "../../src/platform/EventLogRepo.ts"
import { describeContract } from "../harness.ts"

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
const newOrgId = () =>
  Schema.decodeSync(OrgId)(
    `org_${Array.from({ length: 26 }, () => CROCKFORD[Math.floor(Math.random() * 32)]).join("")}`
  )
const newEventId = () => Schema.decodeSync(EventId)(crypto.randomUUID())
const newAuditId = () => Schema.decodeSync(AuditEntryId)(crypto.randomUUID())

const t0 = new Date("2030-01-01T00:00:00.000Z")
const minute = (n: number) => new Date(t0.getTime() + n * 60_000)

interface Shape {
  readonly orgId: OrgId
  readonly minute: number
  readonly type?: string
  readonly category?: string
  readonly actorType?: EventRecord["actorType"]
  readonly actorId?: string
  readonly subjectKind?: string
  readonly subjectId?: string
}

const entry = (shape: Shape): EventAppend => {
  const event: EventRecord = {
    id: newEventId(),
    orgId: shape.orgId,
    type: shape.type ?? "project.created",
    occurredAt: minute(shape.minute),
    actorType: shape.actorType ?? "user",
    actorId: shape.actorId ?? "usr_01J0000000000000000000000A",
    subjectKind: shape.subjectKind ?? "project",
    subjectId: shape.subjectId ?? "prj_01J0000000000000000000000A",
    subjectName: "web",
    projectId: null,
    environmentId: null,
    requestId: "req_1",
    correlationId: null,
    data: { project_name: "web", tags: ["a", "b"] },
    traceContext: { traceparent: "00-abc-def-01" }
  }
  const audit: AuditEntryRecord = {
    id: newAuditId(),
    eventId: event.id,
    orgId: event.orgId,
    projectId: null,
    environmentId: null,
    actorType: event.actorType,
    actorId: event.actorId,
    eventType: event.type,
    source: "api",
    category: shape.category ?? "projects",
    description: "Created project web",
    subjectKind: event.subjectKind,
    subjectId: event.subjectId,
    subjectName: event.subjectName,
    occurredAt: event.occurredAt,
    requestId: event.requestId,
    correlationId: null,
    payload: { name: "web" }
  }
  return { event, audit }
}

describeContract("EventLogRepo", EventLogRepo, (it) => {
  it.effect("appends an event with its audit entry and lists an org's events newest first", () =>
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const orgId = newOrgId()
      const first = entry({ orgId, minute: 1 })
      const second = entry({ orgId, minute: 2 })
      yield* log.append(first)
      yield* log.append(second)
      yield* log.append(entry({ orgId: newOrgId(), minute: 3 }))
      assert.deepStrictEqual(yield* log.listEvents({ orgId }), [second.event, first.event])
      assert.deepStrictEqual(yield* log.listAudit({ orgId, limit: 10 }), [second.audit, first.audit])
    }))

  it.effect("keeps nullable fields and JSON exactly as given", () =>
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const orgId = newOrgId()
      const plain = entry({ orgId, minute: 1 })
      const bare: EventAppend = {
        event: {
          ...plain.event,
          subjectName: null,
          requestId: null,
          traceContext: null,
          data: { x_y: [1, null, { z: false }] }
        },
        audit: { ...plain.audit, subjectName: null, requestId: null, payload: {} }
      }
      yield* log.append(bare)
      assert.deepStrictEqual(yield* log.listEvents({ orgId }), [bare.event])
      assert.deepStrictEqual(yield* log.listAudit({ orgId, limit: 1 }), [bare.audit])
    }))

  it.effect("pages the audit trail by keyset, breaking equal times by id", () =>
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const orgId = newOrgId()
      const entries = [1, 2, 2, 2, 3].map((m) => entry({ orgId, minute: m }))
      yield* Effect.forEach(entries, log.append, { discard: true })
      const expected = (yield* log.listAudit({ orgId, limit: 100 })).map((a) => a.id)
      assert.strictEqual(expected.length, 5)
      const pages: Array<string> = []
      let after: AuditEntryRecord | undefined
      for (let page = 0; page < 3; page++) {
        const rows = yield* log.listAudit({
          orgId,
          limit: 2,
          ...(after === undefined ? {} : { after: { at: after.occurredAt, key: after.id } })
        })
        pages.push(...rows.map((a) => a.id))
        after = rows.at(-1)
      }
      assert.deepStrictEqual(pages, expected)
      const sameMinute = entries.slice(1, 4).map((e) => e.audit.id).sort().reverse()
      assert.deepStrictEqual(expected.slice(1, 4), sameMinute)
    }))

  it.effect("applies every audit filter given, with an inclusive time range", () =>
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const orgId = newOrgId()
      const a = entry({ orgId, minute: 1, category: "projects", actorId: "usr_A", subjectId: "prj_1" })
      const b = entry({ orgId, minute: 2, category: "access", actorType: "service_principal", actorId: "sp_B" })
      const c = entry({
        orgId,
        minute: 3,
        category: "access",
        type: "member.removed",
        subjectKind: "member",
        subjectId: "mem_1"
      })
      const d = entry({ orgId, minute: 4, category: "projects", actorId: "usr_A", subjectId: "prj_2" })
      yield* Effect.forEach([a, b, c, d], log.append, { discard: true })
      const ids = (query: Omit<Parameters<typeof log.listAudit>[0], "orgId" | "limit">) =>
        Effect.map(log.listAudit({ orgId, limit: 10, ...query }), (rows) => rows.map((row) => row.id))
      const id = (e: EventAppend) => e.audit.id
      assert.deepStrictEqual(yield* ids({ category: "projects" }), [id(d), id(a)])
      assert.deepStrictEqual(yield* ids({ category: "projects", subjectId: "prj_1" }), [id(a)])
      assert.deepStrictEqual(yield* ids({ actorId: "usr_A", actorType: "user" }), [id(d), id(a)])
      assert.deepStrictEqual(yield* ids({ actorType: "service_principal" }), [id(b)])
      assert.deepStrictEqual(yield* ids({ subjectKind: "member", subjectId: "mem_1" }), [id(c)])
      assert.deepStrictEqual(yield* ids({ eventType: "member.removed" }), [id(c)])
      assert.deepStrictEqual(yield* ids({ from: minute(2), to: minute(3) }), [id(c), id(b)])
      assert.deepStrictEqual(yield* ids({ from: minute(4) }), [id(d)])
      assert.deepStrictEqual(yield* ids({ to: minute(1) }), [id(a)])
      assert.deepStrictEqual(yield* ids({ category: "billing" }), [])
    }))

  it.effect("appendMany writes several events with their audit entries at once, or none of them", () =>
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const orgId = newOrgId()
      const entries = [entry({ orgId, minute: 1 }), entry({ orgId, minute: 2 }), entry({ orgId, minute: 3 })]
      yield* log.appendMany(entries)
      yield* log.appendMany([])
      assert.deepStrictEqual(yield* log.listEvents({ orgId }), entries.map((one) => one.event).reverse())
      assert.deepStrictEqual(yield* log.listAudit({ orgId, limit: 10 }), entries.map((one) => one.audit).reverse())
      const [first] = entries
      const fresh = entry({ orgId, minute: 4 })
      const clash = yield* Effect.flip(log.appendMany([fresh, { ...entry({ orgId, minute: 5 }), event: first!.event }]))
      assert.strictEqual(clash._tag, "UniqueViolation")
      assert.strictEqual((yield* log.listEvents({ orgId })).length, 3)
    }))

  it.effect("a reused event or audit id is a UniqueViolation and writes nothing", () =>
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const orgId = newOrgId()
      const original = entry({ orgId, minute: 1 })
      yield* log.append(original)

      const sameEvent = entry({ orgId, minute: 2 })
      const eventClash = yield* Effect.flip(log.append({
        event: { ...sameEvent.event, id: original.event.id },
        audit: { ...sameEvent.audit, eventId: original.event.id }
      }))
      assert.deepStrictEqual(eventClash, new UniqueViolation({ constraint: "events_pkey" }))

      const sameAudit = entry({ orgId, minute: 3 })
      const auditClash = yield* Effect.flip(
        log.append({ ...sameAudit, audit: { ...sameAudit.audit, id: original.audit.id } })
      )
      assert.deepStrictEqual(auditClash, new UniqueViolation({ constraint: "audit_entries_pkey" }))

      assert.deepStrictEqual(yield* log.listEvents({ orgId }), [original.event])
      assert.deepStrictEqual(yield* log.listAudit({ orgId, limit: 10 }), [original.audit])
    }))
})
