/** Outgoing mail, written by services and read by the mailer (and by tests, which read what was "sent"). */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, flow, Layer, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { atomically } from "../Memory.ts"
import { insertMailSql } from "../signInStatements.ts"
import { JsonObject } from "./JsonObject.ts"

/** One rendered message; `data` holds the template variables. */
export const OutboxMessage = Schema.Struct({
  id: Schema.String,
  to: Schema.String,
  template: Schema.String,
  subject: Schema.String,
  text: Schema.String,
  data: JsonObject,
  createdAt: Schema.Date
})
export type OutboxMessage = typeof OutboxMessage.Type

/** The filter of `list`: one recipient (any letter case), or everyone. */
export interface OutboxFilter {
  readonly to?: string
}

/** The mail outbox (`mail_outbox`). */
export class OutboxRepo extends Context.Service<OutboxRepo, {
  /** Queues a message; fails with `UniqueViolation` ("mail_outbox_pkey") when its id is taken. */
  readonly insert: (message: OutboxMessage) => Effect.Effect<void, UniqueViolation>
  /** Messages newest first, optionally only those to one address. */
  readonly list: (filter: OutboxFilter) => Effect.Effect<ReadonlyArray<OutboxMessage>>
}>()("@cp/persistence/platform/OutboxRepo") {
  /** In-process outbox. */
  static readonly memory = Layer.sync(OutboxRepo, () => {
    const messages = new Map<string, OutboxMessage>()
    return OutboxRepo.of({
      insert: (message) =>
        atomically((changes) => {
          if (messages.has(message.id)) return Effect.fail(new UniqueViolation({ constraint: "mail_outbox_pkey" }))
          changes.set(messages, message.id, message)
          return Effect.void
        }),
      list: (filter) =>
        Effect.sync(() => {
          const to = filter.to?.toLowerCase()
          return [...messages.values()]
            .filter((message) => to === undefined || message.to.toLowerCase() === to)
            .sort(newestFirst)
        })
    })
  })

  /** The outbox in `mail_outbox`. */
  static readonly sql = Layer.effect(
    OutboxRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient

      return OutboxRepo.of({
        // Every sign-in start keeps its mail: constant statement text (the driver keys prepared statements by it), and
        // the typed message goes out as it is, with no per-call schema encode (its data as JSON text).
        insert: (m) =>
          uniqueViolationOrDie(Effect.asVoid(
            sql.unsafe(insertMailSql, [
              m.id,
              m.to,
              m.template,
              m.subject,
              m.text,
              JSON.stringify(m.data),
              m.createdAt
            ]).withoutTransform
          )),
        list: flow(
          SqlSchema.findAll({
            Request: ListRequest,
            Result: OutboxMessage,
            execute: (r) =>
              sql`
            select id, to_address as "to", template, subject, text, data, created_at
            from mail_outbox
            ${r.to === undefined ? sql`` : sql`where lower(to_address) = lower(${r.to})`}
            order by created_at desc, id desc`
          }),
          Effect.orDie
        )
      })
    })
  )
}

const ListRequest = Schema.Struct({ to: Schema.optionalKey(Schema.String) })

/** Newest first, ties broken by id descending: the SQL `order by created_at desc, id desc`. */
const newestFirst = (a: OutboxMessage, b: OutboxMessage) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
