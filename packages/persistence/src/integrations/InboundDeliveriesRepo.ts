/**
 * The inbound delivery log of provider webhooks: each verified delivery stored with its raw bytes before it is
 * processed, deduplicated by (provider, delivery id) (`integration_deliveries_key`).
 */
import type { InboundDeliveryId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { createdNewestFirst } from "../keyset.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { ConnectionDeliveryKey, DeliveryKey, DeliveryOutcome, InboundDeliveryRow } from "./rows.ts"

export const inboundDeliveryKeyConstraint = "integration_deliveries_key"

const uniques: ReadonlyArray<UniqueKey<InboundDeliveryRow>> = [
  primaryKey("integration_deliveries_pkey"),
  { constraint: inboundDeliveryKeyConstraint, key: (row) => compositeKey(row.provider, row.deliveryKey) }
]

const newestFirst = (a: InboundDeliveryRow, b: InboundDeliveryRow) =>
  createdNewestFirst({ createdAt: a.receivedAt, id: a.id }, { createdAt: b.receivedAt, id: b.id })

/** How many deliveries a connection's list shows (newest first). */
export const DELIVERY_LIST_LIMIT = 100

export class InboundDeliveriesRepo extends Context.Service<InboundDeliveriesRepo, {
  /** `UniqueViolation` on `integration_deliveries_key` when this provider's delivery id was stored already. */
  readonly insert: (row: InboundDeliveryRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: InboundDeliveryId) => Effect.Effect<Option.Option<InboundDeliveryRow>>
  readonly findByKey: (key: DeliveryKey) => Effect.Effect<Option.Option<InboundDeliveryRow>>
  /** The delivery, when it is attributed to this connection. */
  readonly findForConnection: (key: ConnectionDeliveryKey) => Effect.Effect<Option.Option<InboundDeliveryRow>>
  /** The connection's latest deliveries, newest first. */
  readonly listForConnection: (
    connectionId: InboundDeliveryRow["connectionId"] & string
  ) => Effect.Effect<ReadonlyArray<InboundDeliveryRow>>
  /** Records where processing got to (status, reason, connection, time); the row, or None when it is gone. */
  readonly setOutcome: (outcome: DeliveryOutcome) => Effect.Effect<Option.Option<InboundDeliveryRow>>
}>()("@cp/persistence/integrations/InboundDeliveriesRepo") {
  static readonly memory = Layer.sync(InboundDeliveriesRepo, () => {
    const table = new Map<InboundDeliveryId, InboundDeliveryRow>()
    const all = () => Array.from(table.values())
    return InboundDeliveriesRepo.of({
      insert: (row) => insertUnique(table, row.id, row, uniques),
      findById: (id) => Effect.sync(() => Option.fromUndefinedOr(table.get(id))),
      findByKey: ({ deliveryKey, provider }) =>
        Effect.sync(() =>
          Option.fromUndefinedOr(all().find((row) => row.provider === provider && row.deliveryKey === deliveryKey))
        ),
      findForConnection: ({ connectionId, deliveryId }) =>
        Effect.sync(() =>
          Option.filter(Option.fromUndefinedOr(table.get(deliveryId)), (row) => row.connectionId === connectionId)
        ),
      listForConnection: (connectionId) =>
        Effect.sync(() =>
          all().filter((row) => row.connectionId === connectionId).sort(newestFirst).slice(0, DELIVERY_LIST_LIMIT)
        ),
      setOutcome: ({ id, ...outcome }) => updateRow(table, id, (row) => Option.some({ ...row, ...outcome }))
    })
  })

  static readonly sql = Layer.effect(
    InboundDeliveriesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return InboundDeliveriesRepo.of({
        insert: insertRow(sql, "integration_deliveries", InboundDeliveryRow),
        findById: (id) =>
          SqlSchema.findOneOption({
            Request: InboundDeliveryRow.fields.id,
            Result: InboundDeliveryRow,
            execute: (deliveryId) => sql`select * from integration_deliveries where id = ${deliveryId}`
          })(id).pipe(Effect.orDie),
        findByKey: flow(
          SqlSchema.findOneOption({
            Request: DeliveryKey,
            Result: InboundDeliveryRow,
            execute: ({ deliveryKey, provider }) =>
              sql`
                select * from integration_deliveries where provider = ${provider} and delivery_key = ${deliveryKey}`
          }),
          Effect.orDie
        ),
        findForConnection: flow(
          SqlSchema.findOneOption({
            Request: ConnectionDeliveryKey,
            Result: InboundDeliveryRow,
            execute: ({ connectionId, deliveryId }) =>
              sql`select * from integration_deliveries where id = ${deliveryId} and connection_id = ${connectionId}`
          }),
          Effect.orDie
        ),
        listForConnection: (connectionId) =>
          SqlSchema.findAll({
            Request: ConnectionDeliveryKey.fields.connectionId,
            Result: InboundDeliveryRow,
            execute: (id) =>
              sql`
                select * from integration_deliveries where connection_id = ${id}
                order by received_at desc, id desc limit ${DELIVERY_LIST_LIMIT}`
          })(connectionId).pipe(Effect.orDie),
        setOutcome: flow(
          SqlSchema.findOneOption({
            Request: DeliveryOutcome,
            Result: InboundDeliveryRow,
            execute: ({ connectionId, failureReason, id, processedAt, status }) =>
              sql`
                update integration_deliveries set
                  status = ${status}, failure_reason = ${failureReason}, connection_id = ${connectionId},
                  processed_at = ${processedAt}
                where id = ${id}
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
