/**
 * The audit read path: one page of the workspace's audit entries, newest first, under the audit rate-limit family.
 * The filters arrive validated by the domain schema (malformed ones never reach this service); here the cursor is
 * checked against the endpoint, the workspace and the filters before anything is charged or queried.
 */
import {
  type Actor,
  actorId,
  type AuditEntry,
  type AuditFilters,
  type AuditListQuery,
  type Paged,
  type RateLimited,
  type ResolvedWorkspace,
  type ValidationFailed
} from "@cp/domain"
import { type AuditEntryRecord, auditPosition, EventLogRepo } from "@cp/persistence"
import { Context, Effect, Layer } from "effect"
import { Cursors, keysetPage } from "../platform/pagination.ts"
import { auditFamily, RateLimiter } from "../platform/rateLimit.ts"

/** The wire view of a stored entry: the spec's fields, the subject as `{ kind, id, name }`. */
export const toAuditEntry = (row: AuditEntryRecord): AuditEntry => ({
  id: row.id,
  eventId: row.eventId,
  orgId: row.orgId,
  projectId: row.projectId,
  environmentId: row.environmentId,
  actorType: row.actorType,
  actorId: row.actorId,
  eventType: row.eventType,
  source: row.source,
  category: row.category,
  description: row.description,
  subject: { kind: row.subjectKind, id: row.subjectId, name: row.subjectName },
  occurredAt: row.occurredAt,
  requestId: row.requestId,
  correlationId: row.correlationId,
  payload: row.payload
})

/**
 * The filters as a cursor binds them: only the ones given, instants as ISO strings (the canonical JSON of a `Date`
 * would be `{}`), so `?from=…+02:00` and the same instant in `Z` are one walk, and an empty filter is no filter.
 */
const boundFilters = (filters: AuditFilters): Record<string, string> =>
  Object.fromEntries(
    Object.entries(filters).flatMap(([key, value]) =>
      value === undefined ? [] : [[key, value instanceof Date ? value.toISOString() : String(value)]]
    )
  )

export class AuditService extends Context.Service<AuditService, {
  /** One page of `workspace`'s audit entries matching every filter given, newest first. */
  readonly list: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    query: AuditListQuery
  ) => Effect.Effect<Paged<{ readonly auditEntries: ReadonlyArray<AuditEntry> }>, ValidationFailed | RateLimited>
}>()("@cp/server/AuditService") {
  static readonly layer = Layer.effect(
    AuditService,
    Effect.gen(function*() {
      const log = yield* EventLogRepo
      const cursors = yield* Cursors
      const limiter = yield* RateLimiter

      return AuditService.of({
        list: Effect.fn("Audit.list")(function*(actor, workspace, query) {
          const { limit: _limit, cursor: _cursor, ...filters } = query
          const orgId = workspace.organization.id
          // The cursor is decoded first: a foreign or tampered one is the caller's 422, like a malformed filter, with
          // nothing charged or read.
          const page = yield* keysetPage(
            cursors,
            { endpoint: "audit.list", scope: orgId, filters: boundFilters(filters) },
            query,
            (window) =>
              Effect.andThen(
                limiter.consume(auditFamily, actorId(actor), orgId),
                log.listAudit({ orgId, ...filters, ...window })
              ),
            auditPosition
          )
          return { data: { auditEntries: page.items.map(toAuditEntry) }, cursor: page.cursor }
        })
      })
    })
  )
}
