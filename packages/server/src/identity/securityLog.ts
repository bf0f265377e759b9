/** The identity security-event log: who signed in, failed, logged out, changed their profile, from where. */
import { CurrentRequestId, type UserId } from "@cp/domain"
import { type JsonObject, type SecurityEventRow, SecurityEventsRepo } from "@cp/persistence"
import { Clock, Context, Effect, Layer } from "effect"
import { redact } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { CurrentRequestScope } from "../platform/requestScope.ts"

export interface SecurityEventInput {
  readonly email: string
  readonly userId: UserId | null
  readonly eventType: string
  readonly outcome: "success" | "failure"
  readonly metadata?: JsonObject
}

/** The row of the event: now, with the request's id, client address and user agent; metadata is redacted. */
const eventRow = Effect.fnUntraced(function*(event: SecurityEventInput) {
  const now = yield* Clock.currentTimeMillis
  const scope = yield* CurrentRequestScope
  const row: SecurityEventRow = {
    id: mint.securityEvent(now),
    userId: event.userId,
    email: event.email,
    eventType: event.eventType,
    outcome: event.outcome,
    occurredAt: new Date(now),
    requestId: yield* CurrentRequestId,
    ip: scope.ip,
    userAgent: scope.userAgent,
    metadata: redact(event.metadata ?? {})
  }
  return row
})

export class SecurityLog extends Context.Service<SecurityLog, {
  /** Records the event with the request's id, client address and user agent; metadata is redacted. */
  readonly record: (event: SecurityEventInput) => Effect.Effect<void>
  /** The row `record` would write, for a repository that writes it together with the row it records. */
  readonly row: (event: SecurityEventInput) => Effect.Effect<SecurityEventRow>
}>()("@cp/server/SecurityLog") {
  static readonly layer = Layer.effect(
    SecurityLog,
    Effect.gen(function*() {
      const repo = yield* SecurityEventsRepo
      return SecurityLog.of({
        record: (event) => Effect.flatMap(eventRow(event), (row) => Effect.orDie(repo.insert(row))),
        row: eventRow
      })
    })
  )
}
