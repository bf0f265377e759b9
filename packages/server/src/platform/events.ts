/**
 * The workspace event log and its audit write path. Services call `EventLog.record` inside the same
 * transaction as the mutation it describes; the audit entry is derived from the event right there, so
 * neither can exist without the other. The event's webhook deliveries (the outbox rows) are written right there too.
 */
import { type Actor, CurrentRequestId, type EnvironmentId, type OrgId, type ProjectId } from "@cp/domain"
import { EventLogRepo, type EventRecord, type JsonObject, JsonObject as JsonObjectSchema } from "@cp/persistence"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { WebhookOutbox } from "../webhooks/outbox.ts"
import { mint } from "./ids.ts"
import { currentTraceContext } from "./tracing.ts"

export interface EventSubject {
  readonly kind: string
  readonly id: string
  readonly name: string | null
}

/** Who caused an event, as the log and audit record it. */
export interface EventActor {
  readonly actorType: "user" | "service_principal" | "workflow" | "system"
  readonly actorId: string
}

const decodeJsonObject = Schema.decodeUnknownSync(JsonObjectSchema)

export const systemActor: EventActor = { actorType: "system", actorId: "system" }

/** The event-log view of an authenticated actor. */
export const eventActorOf = (actor: Actor): EventActor => {
  switch (actor.kind) {
    case "user":
      return { actorType: "user", actorId: actor.userId }
    case "service_principal":
      return { actorType: "service_principal", actorId: actor.principalId }
    case "workflow":
      return { actorType: "workflow", actorId: actor.subject }
  }
}

/** Who did something, as resources record it (`createdBy`, `updatedBy`, `publishedBy`): `{ id, kind }`. */
export const actorRefOf = (actor: Actor): { readonly id: string; readonly kind: EventActor["actorType"] } => {
  const { actorId, actorType } = eventActorOf(actor)
  return { id: actorId, kind: actorType }
}

export interface NewEvent {
  readonly orgId: OrgId
  readonly type: string
  readonly actor: EventActor
  readonly subject: EventSubject
  readonly data: JsonObject
  readonly projectId?: ProjectId | null
  readonly environmentId?: EnvironmentId | null
  readonly description: string
}

/** Keys whose values never leave the process: codes, tokens, secrets, key material and their hashes. */
const SENSITIVE_KEY = /secret|token|password|passcode|^code$|hash|api_?key|private|credential|value$/i

/**
 * Resources whose API name reads as sensitive but whose API shape carries no secret (webhooks.md §1: `apiKey` and
 * `secret` are their metadata): redacted field by field, like any object, instead of whole.
 */
const RESOURCE_KEYS: ReadonlySet<string> = new Set(["apiKey", "secret"])

/** A copy of `data` with every sensitive field replaced by `[REDACTED]`, at any depth. */
export const redact = (data: JsonObject): JsonObject =>
  Object.fromEntries(
    Object.entries(data).map((
      [key, value]
    ) => [key, SENSITIVE_KEY.test(key) && !isResource(key, value) ? "[REDACTED]" : redactValue(value)])
  )

const isResource = (key: string, value: Schema.Json) =>
  RESOURCE_KEYS.has(key) && typeof value === "object" && value !== null && !isJsonArray(value)

/** A resource as the API returns it, as JSON: what an event's `data` carries under its name (webhooks.md §1). */
export const apiJson = <T, E>(schema: Schema.Codec<T, E>, value: T): JsonObject =>
  decodeJsonObject(Schema.encodeSync(schema)(value))

/** The API-shape values `before` had in the fields an update changed (Stripe's `previous_attributes`). */
export const previousJson = <T, E>(schema: Schema.Codec<T, E>, before: T, after: T): JsonObject => {
  const now = apiJson(schema, after)
  return Object.fromEntries(
    Object.entries(apiJson(schema, before)).filter(([key, value]) => JSON.stringify(value) !== JSON.stringify(now[key]))
  )
}

const isJsonArray = (value: Schema.Json): value is ReadonlyArray<Schema.Json> => Array.isArray(value)

const redactValue = (value: Schema.Json): Schema.Json => {
  if (value === null || typeof value !== "object") return value
  return isJsonArray(value) ? value.map(redactValue) : redact(value)
}

const CATEGORY_BY_PREFIX: ReadonlyArray<readonly [prefix: string, category: string]> = [
  ["organization.", "organization"],
  ["membership.", "membership"],
  ["member.", "membership"],
  ["invite.", "membership"],
  ["team.", "teams"],
  ["api_key.", "api_keys"],
  ["project.", "projects"],
  ["environment.", "projects"],
  ["settings.", "configuration"],
  ["feature.", "configuration"],
  ["secrets.", "configuration"],
  ["subscription.", "billing"],
  ["invoice.", "billing"],
  ["payment.", "billing"],
  ["entitlements.", "billing"],
  ["webhook", "webhooks"],
  ["scm.", "integrations"],
  ["integration.", "integrations"],
  ["agent_provider.", "integrations"],
  ["state.", "runstate"]
]

/** Audit names that differ from the event-log type (spec: `member.role_changed`). */
const AUDIT_EVENT_TYPE: Readonly<Record<string, string>> = {
  "membership.updated": "member.role_changed"
}

/**
 * The audit category of an event type (spec: `api_keys`, `billing`, `membership`, …). An unmapped type falls back to
 * its first segment, normalised so it is always a value the audit `category` filter accepts.
 */
export const auditCategoryOf = (type: string): string =>
  CATEGORY_BY_PREFIX.find(([prefix]) => type.startsWith(prefix))?.[1] ??
    ((type.split(".")[0] ?? "").toLowerCase().replace(/[^a-z0-9_-]/g, "_").slice(0, 64) || "other")

export class EventLog extends Context.Service<EventLog, {
  /** Appends the event and its audit entry; call inside the mutation's transaction. */
  readonly record: (event: NewEvent) => Effect.Effect<void>
  /** Appends several events (and their audit entries) in one write, as `record` each; inside a transaction. */
  readonly recordMany: (events: ReadonlyArray<NewEvent>) => Effect.Effect<void>
}>()("@cp/server/EventLog") {
  static readonly layer = Layer.effect(
    EventLog,
    Effect.gen(function*() {
      const repo = yield* EventLogRepo
      const outbox = yield* WebhookOutbox
      /** The log row and audit entry of an event happening now. */
      const entryOf = Effect.fnUntraced(function*(event: NewEvent) {
        const now = yield* Clock.currentTimeMillis
        const requestId = yield* CurrentRequestId
        const occurredAt = new Date(now)
        const id = mint.eventId(now)
        const data = redact(event.data)
        const common = {
          orgId: event.orgId,
          ...event.actor,
          subjectKind: event.subject.kind,
          subjectId: event.subject.id,
          subjectName: event.subject.name,
          projectId: event.projectId ?? null,
          environmentId: event.environmentId ?? null,
          occurredAt,
          requestId,
          correlationId: requestId
        }
        const record: EventRecord = { id, type: event.type, data, traceContext: yield* currentTraceContext, ...common }
        return {
          event: record,
          audit: {
            id: mint.auditEntryId(now),
            eventId: id,
            eventType: AUDIT_EVENT_TYPE[event.type] ?? event.type,
            source: "api",
            category: auditCategoryOf(event.type),
            description: event.description,
            payload: data,
            ...common
          }
        }
      })
      const recordMany = Effect.fn("EventLog.recordMany")(function*(events: ReadonlyArray<NewEvent>) {
        const entries = yield* Effect.forEach(events, entryOf)
        yield* repo.appendMany(entries).pipe(Effect.orDie)
        // The transactional outbox: the events' webhook deliveries commit or roll back with them.
        for (const entry of entries) yield* outbox.enqueue(entry.event)
      })
      return EventLog.of({
        record: Effect.fn("EventLog.record")(function*(event: NewEvent) {
          const entry = yield* entryOf(event)
          yield* repo.append(entry).pipe(Effect.orDie)
          // The transactional outbox: the event's webhook deliveries commit or roll back with it.
          yield* outbox.enqueue(entry.event)
        }),
        recordMany
      })
    })
  ).pipe(Layer.provide(WebhookOutbox.layer))
}
