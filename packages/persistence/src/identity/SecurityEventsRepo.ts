/** The identity-level security-event log: sign-in attempts, sessions, profile changes and key events per user. */
import { SecurityEventOutcome } from "@cp/domain/identity"
import { UserId } from "@cp/domain/ids"
import { Context, Effect, Layer, Order, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { JsonObject } from "../platform/JsonObject.ts"

/** A row of `security_events`, the identity-level log shown at `/v1/auth/security-events`. */
export const SecurityEventRow = Schema.Struct({
  /** A UUIDv7 minted by the server. */
  id: Schema.String,
  /** Null until the email's user exists (challenges and failures before the first successful sign-in). */
  userId: Schema.NullOr(UserId),
  email: Schema.String,
  eventType: Schema.String,
  outcome: SecurityEventOutcome,
  occurredAt: Schema.Date,
  requestId: Schema.NullOr(Schema.String),
  ip: Schema.NullOr(Schema.String),
  userAgent: Schema.NullOr(Schema.String),
  /** Already redacted by the caller. */
  metadata: JsonObject
})
export type SecurityEventRow = typeof SecurityEventRow.Type

/** Where a page of the log starts: the last event of the previous page. */
export interface SecurityEventKey {
  readonly occurredAt: Date
  readonly id: string
}

/** One keyset page request over a user's log. */
export interface SecurityEventQuery {
  readonly userId: UserId
  /** At most this many rows come back: ask for one more than the page size to learn whether another page follows. */
  readonly limit: number
  /** Exclusive: the page holds the events strictly older than this key. */
  readonly after?: SecurityEventKey
}

/** The log's order, newest first: `occurredAt` descending, then `id` descending to break ties. */
const newestFirst: Order.Order<SecurityEventKey> = Order.flip(
  Order.Struct({ occurredAt: Order.Date, id: Order.String })
)

const uniques: ReadonlyArray<UniqueKey<SecurityEventRow>> = [primaryKey("security_events_pkey")]

const EventInsert = Schema.Struct({ ...SecurityEventRow.fields, metadata: Schema.fromJsonString(JsonObject) })
const Attach = Schema.Struct({ email: Schema.String, userId: UserId })
const ListForUser = Schema.Struct({
  userId: UserId,
  limit: Schema.Int,
  after: Schema.optionalKey(Schema.Struct({ occurredAt: Schema.Date, id: Schema.String }))
})

/** Security events; pages are keyset pages on (occurredAt, id) so rows inserted during a walk never shift it. */
export class SecurityEventsRepo extends Context.Service<SecurityEventsRepo, {
  readonly insert: (event: SecurityEventRow) => Effect.Effect<void, UniqueViolation>
  /** Gives `userId` every event recorded for `email` that no user owns yet. */
  readonly attachToEmail: (email: string, userId: UserId) => Effect.Effect<void>
  /** Up to `limit` of the user's events strictly after `after`, newest first (occurredAt desc, id desc). */
  readonly listForUser: (query: SecurityEventQuery) => Effect.Effect<ReadonlyArray<SecurityEventRow>>
}>()("@cp/persistence/identity/SecurityEventsRepo") {
  /** Events in a Map, for fast deterministic tests. */
  static readonly memory = Layer.sync(SecurityEventsRepo, () => {
    const events = new Map<string, SecurityEventRow>()
    return SecurityEventsRepo.of({
      insert: Effect.fn("SecurityEventsRepo.insert")((event: SecurityEventRow) =>
        insertUnique(events, event.id, event, uniques)
      ),
      attachToEmail: Effect.fn("SecurityEventsRepo.attachToEmail")((email: string, userId: UserId) =>
        atomically((changes) => {
          for (const event of events.values()) {
            if (event.email === email && event.userId === null) changes.set(events, event.id, { ...event, userId })
          }
          return Effect.void
        })
      ),
      listForUser: Effect.fn("SecurityEventsRepo.listForUser")(function*({ userId, limit, after }: SecurityEventQuery) {
        return Array.from(events.values())
          .filter((event) => event.userId === userId && (after === undefined || newestFirst(event, after) > 0))
          .sort(newestFirst)
          .slice(0, limit)
      })
    })
  })

  /** Events in the `security_events` table. */
  static readonly sql = Layer.effect(
    SecurityEventsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: EventInsert,
        execute: (event) => sql`insert into security_events ${sql.insert(event)}`
      })
      const attachToEmail = SqlSchema.void({
        Request: Attach,
        execute: ({ email, userId }) =>
          sql`update security_events set user_id = ${userId} where email = ${email} and user_id is null`
      })
      const listForUser = SqlSchema.findAll({
        Request: ListForUser,
        Result: SecurityEventRow,
        execute: ({ userId, limit, after }) =>
          sql`
            select * from security_events
            where ${
            sql.and([
              sql`user_id = ${userId}`,
              ...(after === undefined ? [] : [sql`(occurred_at, id) < (${after.occurredAt}, ${after.id})`])
            ])
          }
            order by occurred_at desc, id desc
            limit ${limit}`
      })
      return SecurityEventsRepo.of({
        insert: Effect.fn("SecurityEventsRepo.insert")((event: SecurityEventRow) =>
          uniqueViolationOrDie(insert(event))
        ),
        attachToEmail: Effect.fn("SecurityEventsRepo.attachToEmail")((email: string, userId: UserId) =>
          Effect.orDie(attachToEmail({ email, userId }))
        ),
        listForUser: Effect.fn("SecurityEventsRepo.listForUser")((query: SecurityEventQuery) =>
          Effect.orDie(listForUser(query))
        )
      })
    })
  )
}
