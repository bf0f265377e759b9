/** The identity-level security-event log: sign-in attempts, sessions, profile changes and key events per user. */
import { SecurityEvent } from "@cp/domain/identity"
import { UserId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Schema, Struct } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { keysetQuery, pageFields, type PagePosition, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { JsonObject } from "../platform/JsonObject.ts"
import { storedFields } from "../stored.ts"
import { insertRow } from "../stored.ts"

/** A row of `security_events`: the event `/v1/auth/security-events` shows, with whose it is. */
export const SecurityEventRow = Schema.Struct({
  /** A UUIDv7 minted by the server. */
  id: Schema.String,
  /** Null until the email's user exists (challenges and failures before the first successful sign-in). */
  userId: Schema.NullOr(UserId),
  email: Schema.String,
  ...storedFields(Struct.omit(SecurityEvent.fields, ["metadata"])),
  /** Already redacted by the caller. */
  metadata: JsonObject
})
export type SecurityEventRow = typeof SecurityEventRow.Type

/** Giving `userId` the events recorded for `email` that no user owns yet. */
export const EmailAttachment = Schema.Struct({ email: Schema.String, userId: UserId })
export type EmailAttachment = typeof EmailAttachment.Type

/** A page of a user's log, keyed by (occurredAt, id). */
export const SecurityEventsPage = Schema.Struct({ userId: UserId, ...pageFields })
export type SecurityEventsPage = typeof SecurityEventsPage.Type

/** The log pages by (occurredAt, id). */
export const securityEventPosition = (event: SecurityEventRow): PagePosition => ({
  at: event.occurredAt,
  key: event.id
})

const uniques: ReadonlyArray<UniqueKey<SecurityEventRow>> = [primaryKey("security_events_pkey")]

/** A row as the SQL insert sends it: the metadata as JSON text. */
export const SecurityEventInsert = Schema.Struct({
  ...SecurityEventRow.fields,
  metadata: Schema.fromJsonString(JsonObject)
})

/** Security events; pages are keyset pages on (occurredAt, id) so rows inserted during a walk never shift it. */
export class SecurityEventsRepo extends Context.Service<SecurityEventsRepo, {
  readonly insert: (event: SecurityEventRow) => Effect.Effect<void, UniqueViolation>
  /** Gives `userId` every event recorded for `email` that no user owns yet. */
  readonly attachToEmail: (attachment: EmailAttachment) => Effect.Effect<void>
  /** Up to `limit` of the user's events strictly after `after`, newest first (occurredAt desc, id desc). */
  readonly listForUser: (page: SecurityEventsPage) => Effect.Effect<ReadonlyArray<SecurityEventRow>>
}>()("@cp/persistence/identity/SecurityEventsRepo") {
  /** Events in a Map, for fast deterministic tests. */
  static readonly memory = Layer.sync(SecurityEventsRepo, () => {
    const events = new Map<string, SecurityEventRow>()
    return SecurityEventsRepo.of({
      insert: (event) => insertUnique(events, event.id, event, uniques),
      attachToEmail: ({ email, userId }) =>
        atomically((changes) => {
          for (const event of events.values()) {
            if (event.email === email && event.userId === null) changes.set(events, event.id, { ...event, userId })
          }
          return Effect.void
        }),
      listForUser: (page) =>
        Effect.sync(() =>
          windowOf(
            Array.from(events.values()).filter((event) => event.userId === page.userId),
            securityEventPosition,
            page
          )
        )
    })
  })

  /** Events in the `security_events` table. */
  static readonly sql = Layer.effect(
    SecurityEventsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return SecurityEventsRepo.of({
        insert: insertRow(sql, "security_events", SecurityEventInsert),
        attachToEmail: flow(
          SqlSchema.void({
            Request: EmailAttachment,
            execute: ({ email, userId }) =>
              sql`update security_events set user_id = ${userId} where email = ${email} and user_id is null`
          }),
          Effect.orDie
        ),
        listForUser: flow(
          SqlSchema.findAll({
            Request: SecurityEventsPage,
            Result: SecurityEventRow,
            execute: ({ userId, ...window }) =>
              keysetQuery(sql, sql`select * from security_events`, [sql`user_id = ${userId}`], window, {
                at: "occurred_at"
              })
          }),
          Effect.orDie
        )
      })
    })
  )
}
