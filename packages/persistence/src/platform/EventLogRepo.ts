/** The event log and the audit trail derived from it, written in the same transaction as the mutation they record. */
import { AuditEntryId, EnvironmentId, EventId, OrgId, ProjectId } from "@cp/domain/ids"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, flow, Layer, Order, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { keysetQuery, newestFirst, pageFields, type PagePosition, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { JsonObject } from "./JsonObject.ts"

/** Who caused an event. */
export const ActorType = Schema.Literals(["user", "service_principal", "workflow", "system"])
export type ActorType = typeof ActorType.Type

/** One row of the event log: what happened to which subject, by whom, with the trace that caused it. */
export const EventRecord = Schema.Struct({
  id: EventId,
  orgId: OrgId,
  type: Schema.String,
  occurredAt: Schema.Date,
  actorType: ActorType,
  actorId: Schema.String,
  subjectKind: Schema.String,
  subjectId: Schema.String,
  subjectName: Schema.NullOr(Schema.String),
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  requestId: Schema.NullOr(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  data: JsonObject,
  traceContext: Schema.NullOr(JsonObject)
})
export type EventRecord = typeof EventRecord.Type

/** The audit view of one event, as the audit API lists it. */
export const AuditEntryRecord = Schema.Struct({
  id: AuditEntryId,
  eventId: EventId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  actorType: ActorType,
  actorId: Schema.String,
  eventType: Schema.String,
  source: Schema.String,
  category: Schema.String,
  description: Schema.String,
  subjectKind: Schema.String,
  subjectId: Schema.String,
  subjectName: Schema.NullOr(Schema.String),
  occurredAt: Schema.Date,
  requestId: Schema.NullOr(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  payload: JsonObject
})
export type AuditEntryRecord = typeof AuditEntryRecord.Type

/** The log and the audit trail page by (occurredAt, id); lowercase UUID strings sort as PostgreSQL sorts `uuid`. */
export const auditPosition = (entry: { readonly occurredAt: Date; readonly id: string }): PagePosition => ({
  at: entry.occurredAt,
  key: entry.id
})

/** The SQL order `occurred_at desc, id desc`. */
const occurredNewestFirst = Order.mapInput(newestFirst, auditPosition)

/** One audit page of an org: every filter given must match (`from`/`to` inclusive), newest first, after `after`. */
export const AuditQuery = Schema.Struct({
  orgId: OrgId,
  category: Schema.optionalKey(Schema.String),
  actorId: Schema.optionalKey(Schema.String),
  actorType: Schema.optionalKey(ActorType),
  subjectKind: Schema.optionalKey(Schema.String),
  subjectId: Schema.optionalKey(Schema.String),
  eventType: Schema.optionalKey(Schema.String),
  from: Schema.optionalKey(Schema.Date),
  to: Schema.optionalKey(Schema.Date),
  ...pageFields
})
export type AuditQuery = typeof AuditQuery.Type

/** A page of one project's events of one type family. */
export const ProjectEventsQuery = Schema.Struct({
  orgId: OrgId,
  projectId: ProjectId,
  typePrefix: Schema.String,
  ...pageFields
})
export type ProjectEventsQuery = typeof ProjectEventsQuery.Type

/** An event and its audit entry, appended together. */
export interface EventAppend {
  readonly event: EventRecord
  readonly audit: AuditEntryRecord
}

/** Appends to and reads the event log (`events`) and the audit trail (`audit_entries`). */
export class EventLogRepo extends Context.Service<EventLogRepo, {
  /** Writes the event and its audit entry; run it inside `Transactor.withTransaction` with the mutation. */
  readonly append: (entry: EventAppend) => Effect.Effect<void, UniqueViolation>
  /** Writes several events with their audit entries in one statement (the webhook worker's lifecycle events). */
  readonly appendMany: (entries: ReadonlyArray<EventAppend>) => Effect.Effect<void, UniqueViolation>
  /** Every event of an org, newest first. */
  readonly listEvents: (query: { readonly orgId: OrgId }) => Effect.Effect<ReadonlyArray<EventRecord>>
  /** One page of an org's audit entries, newest first. */
  readonly listAudit: (query: AuditQuery) => Effect.Effect<ReadonlyArray<AuditEntryRecord>>
  /** One page of a project's events whose type starts with `typePrefix`, newest first (the `scm.*` triggers feed). */
  readonly listProjectEvents: (query: ProjectEventsQuery) => Effect.Effect<ReadonlyArray<EventRecord>>
}>()("@cp/persistence/platform/EventLogRepo") {
  /** In-process log. */
  static readonly memory = Layer.sync(EventLogRepo, () => {
    const events = new Map<EventId, EventRecord>()
    const audit = new Map<AuditEntryId, AuditEntryRecord>()
    const appendMany = (entries: ReadonlyArray<EventAppend>) =>
      atomically((changes) => {
        // Every check before any change: the statement's all-or-nothing.
        const eventIds = new Set(entries.map((entry) => entry.event.id))
        const auditIds = new Set(entries.map((entry) => entry.audit.id))
        if (eventIds.size < entries.length || entries.some((entry) => events.has(entry.event.id))) {
          return Effect.fail(new UniqueViolation({ constraint: "events_pkey" }))
        }
        if (auditIds.size < entries.length || entries.some((entry) => audit.has(entry.audit.id))) {
          return Effect.fail(new UniqueViolation({ constraint: "audit_entries_pkey" }))
        }
        const orphan = entries.find((entry) => !eventIds.has(entry.audit.eventId) && !events.has(entry.audit.eventId))
        if (orphan !== undefined) {
          return Effect.die(new Error(`audit entry ${orphan.audit.id} refers to unknown event ${orphan.audit.eventId}`))
        }
        for (const entry of entries) {
          changes.set(events, entry.event.id, entry.event)
          changes.set(audit, entry.audit.id, entry.audit)
        }
        return Effect.void
      })
    return EventLogRepo.of({
      append: (entry) => appendMany([entry]),
      appendMany,
      listEvents: ({ orgId }) =>
        Effect.sync(() => [...events.values()].filter((event) => event.orgId === orgId).sort(occurredNewestFirst)),
      listAudit: (query) =>
        Effect.sync(() => [...audit.values()].filter(matches(query)).sort(occurredNewestFirst).slice(0, query.limit)),
      listProjectEvents: ({ orgId, projectId, typePrefix, ...window }) =>
        Effect.sync(() =>
          windowOf(
            [...events.values()].filter((event) =>
              event.orgId === orgId && event.projectId === projectId && event.type.startsWith(typePrefix)
            ),
            auditPosition,
            window
          )
        )
    })
  })

  /** The log in `events` and `audit_entries`. */
  static readonly sql = Layer.effect(
    EventLogRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const encodeAppend = Schema.encodeEffect(Schema.Struct({ event: EventRecord, audit: AuditEntryRecord }))

      return EventLogRepo.of({
        // One statement, so the pair is written together even outside a transaction.
        append: flow(
          SqlSchema.void({
            Request: Schema.Struct({ event: EventRecord, audit: AuditEntryRecord }),
            execute: ({ audit, event }) =>
              sql`
            with event as (
              insert into events ${
                sql.insert({
                  ...event,
                  data: sql.json(event.data),
                  traceContext: event.traceContext === null ? null : sql.json(event.traceContext)
                })
              }
            )
            insert into audit_entries ${sql.insert({ ...audit, payload: sql.json(audit.payload) })}`
          }),
          uniqueViolationOrDie
        ),
        appendMany: (entries) =>
          Effect.forEach(entries, (entry) => encodeAppend(entry)).pipe(
            Effect.flatMap((encoded) => {
              const [first, ...rest] = encoded
              if (first === undefined) return Effect.void
              const eventRow = ({ event }: typeof first) => ({
                ...event,
                data: sql.json(event.data),
                traceContext: event.traceContext === null ? null : sql.json(event.traceContext)
              })
              const auditRow = ({ audit }: typeof first) => ({ ...audit, payload: sql.json(audit.payload) })
              return sql`
                with event as (insert into events ${sql.insert([eventRow(first), ...rest.map(eventRow)])})
                insert into audit_entries ${sql.insert([auditRow(first), ...rest.map(auditRow)])}`
            }),
            Effect.asVoid,
            uniqueViolationOrDie
          ),
        listEvents: flow(
          SqlSchema.findAll({
            Request: Schema.Struct({ orgId: OrgId }),
            Result: EventRecord,
            execute: ({ orgId }) => sql`select * from events where org_id = ${orgId} order by occurred_at desc, id desc`
          }),
          Effect.orDie
        ),
        listAudit: flow(
          SqlSchema.findAll({
            Request: AuditQuery,
            Result: AuditEntryRecord,
            execute: ({ orgId, limit, after, ...q }) =>
              keysetQuery(
                sql,
                sql`select * from audit_entries`,
                [
                  sql`org_id = ${orgId}`,
                  ...(q.category === undefined ? [] : [sql`category = ${q.category}`]),
                  ...(q.actorId === undefined ? [] : [sql`actor_id = ${q.actorId}`]),
                  ...(q.actorType === undefined ? [] : [sql`actor_type = ${q.actorType}`]),
                  ...(q.subjectKind === undefined ? [] : [sql`subject_kind = ${q.subjectKind}`]),
                  ...(q.subjectId === undefined ? [] : [sql`subject_id = ${q.subjectId}`]),
                  ...(q.eventType === undefined ? [] : [sql`event_type = ${q.eventType}`]),
                  ...(q.from === undefined ? [] : [sql`occurred_at >= ${q.from}`]),
                  ...(q.to === undefined ? [] : [sql`occurred_at <= ${q.to}`])
                ],
                { limit, after },
                { at: "occurred_at" }
              )
          }),
          Effect.orDie
        ),
        listProjectEvents: flow(
          SqlSchema.findAll({
            Request: ProjectEventsQuery,
            Result: EventRecord,
            execute: ({ orgId, projectId, typePrefix, ...window }) =>
              keysetQuery(
                sql,
                sql`select * from events`,
                [sql`org_id = ${orgId}`, sql`project_id = ${projectId}`, sql`starts_with(type, ${typePrefix})`],
                window,
                { at: "occurred_at" }
              )
          }),
          Effect.orDie
        )
      })
    })
  )
}

const matches = (q: AuditQuery) => (entry: AuditEntryRecord): boolean =>
  entry.orgId === q.orgId &&
  (q.category === undefined || entry.category === q.category) &&
  (q.actorId === undefined || entry.actorId === q.actorId) &&
  (q.actorType === undefined || entry.actorType === q.actorType) &&
  (q.subjectKind === undefined || entry.subjectKind === q.subjectKind) &&
  (q.subjectId === undefined || entry.subjectId === q.subjectId) &&
  (q.eventType === undefined || entry.eventType === q.eventType) &&
  (q.from === undefined || entry.occurredAt >= q.from) &&
  (q.to === undefined || entry.occurredAt <= q.to) &&
  (q.after === undefined || newestFirst(auditPosition(entry), q.after) > 0)
