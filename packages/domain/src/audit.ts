/**
 * The workspace audit log (spec: Audit entry, Audit): one read endpoint, newest first, cursor paged, with every
 * filter of the spec's table validated here so a malformed one is a 422 before anything is queried.
 */
import { Option, Schema, SchemaGetter, SchemaTransformation } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { RateLimited } from "./errors.ts"
import { AuditEntryId, EnvironmentId, EventId, OrgId, ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Text } from "./text.ts"
import { Page, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** Who caused an audited event. */
export const AuditActorType = Schema.Literals(["user", "service_principal", "workflow", "system"])
export type AuditActorType = typeof AuditActorType.Type

/** `category` filter: lowercase letters, digits, `_ . -`; at most 64 characters. */
export const AuditCategory = Text.check(
  Schema.isPattern(/^[a-z0-9_.-]+$/, { message: "must be lowercase letters, digits, '_', '.' or '-'" }),
  Schema.isMaxLength(64, { message: "must be at most 64 characters" })
)

/** `actorId`, `subjectKind`, `subjectId`, `eventType` filters: 1 to 128 of letters, digits, space, `_ . : -`. */
export const AuditToken = Text.check(
  Schema.isPattern(/^[A-Za-z0-9 _.:-]+$/, { message: "must be letters, digits, spaces, '_', '.', ':' or '-'" }),
  Schema.isMaxLength(128, { message: "must be at most 128 characters" })
)

const ISO_MILLIS = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-](\d{2}):(\d{2}))$/

/** A real calendar instant: month 1-12, a day the month has, hours 0-23, minutes and seconds 0-59, offset ≤ 23:59. */
const isRealInstant = (text: string): boolean => {
  const m = ISO_MILLIS.exec(text)
  if (m === null) return false
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number
  ]
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59)
  return month >= 1 && month <= 12 && day >= 1 && day <= days && hour <= 23 && minute <= 59 && second <= 59 && offsetOk
}

/**
 * `from` / `to` filters: ISO 8601 with exactly three fractional digits and a zone (`Z` or `±hh:mm`), e.g.
 * `2026-11-21T09:30:00.000Z`; a `Date` in code, sent back as UTC with milliseconds.
 */
export const AuditInstant = Text.check(
  Schema.isPattern(ISO_MILLIS, {
    message: "must be an ISO 8601 timestamp with milliseconds, e.g. 2026-11-21T09:30:00.000Z"
  }),
  Schema.makeFilter((text: string) => !ISO_MILLIS.test(text) || isRealInstant(text) || "is not a real date and time")
).pipe(
  Schema.decodeTo(Schema.Date, {
    decode: SchemaGetter.Date(),
    encode: SchemaGetter.transform((date: Date) => date.toISOString())
  })
)

/**
 * An optional query filter where an empty value counts as absent (`?category=` is `?`): the empty string is
 * dropped before `schema` sees it, so the service, the query and the cursor binding never see it either.
 */
export const emptyAsAbsent = <S extends Schema.Top & { readonly Encoded: string }>(schema: S, description: string) =>
  Schema.optionalKey(Schema.String.annotate({ description: `${description}; empty is the same as absent` })).pipe(
    Schema.decodeTo(
      Schema.optionalKey(schema),
      SchemaTransformation.transformOptional<S["Encoded"], string>({
        // Only the emptiness is decided here; `schema` then validates the value itself (a literal, a pattern, …).
        decode: (value) => Option.filter(value, (text) => text !== "") as Option.Option<S["Encoded"]>,
        encode: (value) => value
      })
    )
  )

const TOKEN_RULE = "1 to 128 letters, digits, spaces, '_', '.', ':', '-'"

/** The query of `GET /v1/organizations/{orgId}/audit`: every filter optional, all combined with AND. */
export const AuditListQuery = {
  category: emptyAsAbsent(AuditCategory, "Only this category: lowercase letters, digits, '_', '.', '-'; at most 64"),
  actorId: emptyAsAbsent(AuditToken, `Only this actor: ${TOKEN_RULE}`),
  actorType: emptyAsAbsent(AuditActorType, "Only this kind of actor: user, service_principal, workflow or system"),
  subjectKind: emptyAsAbsent(AuditToken, `Only this kind of subject: ${TOKEN_RULE}`),
  subjectId: emptyAsAbsent(AuditToken, `Only this subject: ${TOKEN_RULE}`),
  eventType: emptyAsAbsent(AuditToken, `Only this event type: ${TOKEN_RULE}`),
  from: emptyAsAbsent(AuditInstant, "Only entries at or after this instant: ISO 8601 with milliseconds"),
  to: emptyAsAbsent(AuditInstant, "Only entries at or before this instant: ISO 8601 with milliseconds"),
  ...PageQuery
}
export type AuditListQuery = Schema.Struct.Type<typeof AuditListQuery>

/** The filters of an audit query (everything but the page controls). */
export type AuditFilters = Omit<AuditListQuery, "limit" | "cursor">

export const AuditSubject = Schema.Struct({
  kind: Schema.String,
  id: Schema.String,
  name: Schema.NullOr(Schema.String)
})

/** One audit entry, exactly the spec's fields; `payload` had its sensitive fields redacted when it was written. */
export const AuditEntry = Schema.Struct({
  id: AuditEntryId,
  eventId: EventId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  actorType: AuditActorType,
  actorId: Schema.String,
  eventType: Schema.String,
  source: Schema.String,
  category: Schema.String,
  description: Schema.String,
  subject: AuditSubject,
  occurredAt: Timestamp,
  requestId: Schema.NullOr(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  payload: Schema.Record(Schema.String, Schema.Json)
})
export type AuditEntry = typeof AuditEntry.Type

export class AuditApi extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.get("list", "/v1/organizations/:orgId/audit", {
      params: { orgId: OrgRef },
      query: AuditListQuery,
      success: Page({ auditEntries: Schema.Array(AuditEntry) }),
      error: RateLimited
    }).annotateMerge(
      doc(
        "List audit entries",
        "The workspace's append-only audit log, newest first, filtered by category, actor, subject, " +
          "event type or time. Rate limited per identity and per workspace."
      )
    ).annotateMerge(requires.permission("audit.read"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Audit", description: "The workspace audit log" }))
{}
