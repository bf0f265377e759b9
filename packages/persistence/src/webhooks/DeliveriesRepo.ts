/**
 * Delivery attempts, which are also the transactional outbox: a row is written in the transaction of the event that
 * causes it, and workers claim due rows (`for update skip locked`) for a limited time, so a worker that dies leaves a
 * claim that expires and the row is tried again (at least once).
 */
import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { updateRow } from "../memoryTable.ts"
import { AttemptKey, AttemptOutcome, AttemptsPage, AttemptStats, Claim, DeliveryRow, EndpointSince } from "./rows.ts"
import { WebhookTables } from "./WebhookTables.ts"

/** The LISTEN/NOTIFY channel new deliveries are announced on. */
export const DELIVERIES_CHANNEL = "webhook_deliveries"

const isDue = (row: DeliveryRow, now: Date) =>
  row.dueAt !== null && row.dueAt <= now && (row.claimedUntil === null || row.claimedUntil <= now)

export class WebhookDeliveriesRepo extends Context.Service<WebhookDeliveriesRepo, {
  /** Writes new attempts (the outbox rows of one event, a replay, a test); call inside the event's transaction. */
  readonly insertMany: (rows: ReadonlyArray<DeliveryRow>) => Effect.Effect<void>
  readonly find: (key: AttemptKey) => Effect.Effect<Option.Option<DeliveryRow>>
  readonly list: (page: AttemptsPage) => Effect.Effect<ReadonlyArray<DeliveryRow>>
  /** Claims up to `limit` due, unclaimed (or expired-claim) rows, oldest due first, skipping rows others hold. */
  readonly claim: (claim: Claim) => Effect.Effect<ReadonlyArray<DeliveryRow>>
  /** Writes a try's outcome and releases the claim; None when the claim was lost (expired and taken over). */
  readonly complete: (outcome: AttemptOutcome) => Effect.Effect<Option.Option<DeliveryRow>>
  /** `complete` for a round's outcomes in one statement: the rows written (those whose claim held), in any order. */
  readonly completeMany: (outcomes: ReadonlyArray<AttemptOutcome>) => Effect.Effect<ReadonlyArray<DeliveryRow>>
  readonly stats: (query: EndpointSince) => Effect.Effect<AttemptStats>
  /** The endpoint's `failed` attempts created at or after `since`, oldest first. */
  readonly failedSince: (query: EndpointSince) => Effect.Effect<ReadonlyArray<DeliveryRow>>
  /** The earliest `dueAt` of any row, to know how long a worker may sleep (None when nothing is pending). */
  readonly nextDue: Effect.Effect<Option.Option<Date>>
}>()("@cp/persistence/webhooks/WebhookDeliveriesRepo") {
  static readonly memory = Layer.effect(
    WebhookDeliveriesRepo,
    Effect.gen(function*() {
      const { deliveries: table } = yield* WebhookTables
      const complete = (outcome: AttemptOutcome) =>
        updateRow(
          table,
          outcome.id,
          (row) => row.claimToken !== outcome.token ? Option.none() : Option.some(applyOutcome(row, outcome))
        )
      return WebhookDeliveriesRepo.of({
        insertMany: (rows) =>
          atomically((changes) => {
            for (const row of rows) changes.set(table, row.id, row)
            return Effect.void
          }),
        find: ({ attemptId, orgId }) =>
          Effect.sync(() => Option.filter(Option.fromUndefinedOr(table.get(attemptId)), (row) => row.orgId === orgId)),
        list: (page) =>
          Effect.sync(() =>
            windowOf([...table.values()].filter((row) => row.endpointId === page.endpointId), idPosition, page)
          ),
        claim: ({ limit, now, token, until }) =>
          atomically((changes) => {
            const due = [...table.values()].filter((row) => isDue(row, now))
              .sort((a, b) => (a.dueAt?.getTime() ?? 0) - (b.dueAt?.getTime() ?? 0))
              .slice(0, limit)
              .map((row) => ({ ...row, claimedUntil: until, claimToken: token }))
            for (const row of due) changes.set(table, row.id, row)
            return Effect.succeed(due)
          }),
        complete,
        completeMany: (outcomes) => Effect.map(Effect.forEach(outcomes, complete), Arr.getSomes),
        stats: ({ endpointId, since }) =>
          Effect.sync(() => {
            const rows = [...table.values()].filter((row) => row.endpointId === endpointId)
            const recent = rows.filter((row) => row.createdAt >= since)
            const count = (status: DeliveryRow["status"]) => recent.filter((row) => row.status === status).length
            const last = (status: DeliveryRow["status"]) =>
              rows.filter((row) => row.status === status && row.completedAt !== null)
                .reduce<Date | null>((max, row) => max === null || row.completedAt! > max ? row.completedAt : max, null)
            return {
              success: count("success"),
              failed: count("failed"),
              retrying: count("retrying"),
              pending: count("pending"),
              lastSuccessAt: last("success"),
              lastFailureAt: last("failed")
            }
          }),
        failedSince: ({ endpointId, since }) =>
          Effect.sync(() =>
            [...table.values()]
              .filter((row) => row.endpointId === endpointId && row.status === "failed" && row.createdAt >= since)
              .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1))
          ),
        nextDue: Effect.sync(() => {
          const times = [...table.values()].flatMap((row) =>
            row.dueAt === null ? [] : [Math.max(row.dueAt.getTime(), row.claimedUntil?.getTime() ?? 0)]
          )
          return times.length === 0 ? Option.none() : Option.some(new Date(Math.min(...times)))
        })
      })
    })
  ).pipe(Layer.provide(WebhookTables.layer))

  static readonly sql = Layer.effect(
    WebhookDeliveriesRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const encodeRow = Schema.encodeEffect(DeliveryRow)
      return WebhookDeliveriesRepo.of({
        insertMany: (rows) =>
          rows.length === 0 ? Effect.void : Effect.forEach(rows, (row) => encodeRow(row)).pipe(
            Effect.flatMap((encoded) => {
              const values = encoded.map((row) => ({
                ...row,
                traceContext: row.traceContext === null ? null : sql.json(row.traceContext)
              }))
              if (!Arr.isArrayNonEmpty(values)) return Effect.void
              // The notification goes out when the transaction commits, waking listening workers at once.
              return sql`insert into webhook_deliveries ${sql.insert(values)}`.pipe(
                Effect.andThen(sql`select pg_notify(${DELIVERIES_CHANNEL}, '')`),
                Effect.asVoid
              )
            }),
            Effect.orDie
          ),
        find: flow(
          SqlSchema.findOneOption({
            Request: AttemptKey,
            Result: DeliveryRow,
            execute: ({ attemptId, orgId }) =>
              sql`select * from webhook_deliveries where id = ${attemptId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: AttemptsPage,
            Result: DeliveryRow,
            execute: ({ endpointId, ...window }) =>
              keysetQuery(sql, sql`select * from webhook_deliveries`, [sql`endpoint_id = ${endpointId}`], window)
          }),
          Effect.orDie
        ),
        claim: flow(
          SqlSchema.findAll({
            Request: Claim,
            Result: DeliveryRow,
            execute: ({ limit, now, token, until }) =>
              sql`
                update webhook_deliveries set claimed_until = ${until}, claim_token = ${token}
                where id in (
                  select id from webhook_deliveries
                  where due_at <= ${now} and (claimed_until is null or claimed_until <= ${now})
                  order by due_at
                  limit ${limit}
                  for update skip locked)
                returning *`
          }),
          Effect.orDie
        ),
        complete: flow(
          SqlSchema.findOneOption({
            Request: AttemptOutcome,
            Result: DeliveryRow,
            execute: (o) =>
              sql`
                update webhook_deliveries set
                  status = ${o.status},
                  attempt_number = ${o.attemptNumber},
                  http_status_code = ${o.httpStatusCode},
                  failure_reason = ${o.failureReason},
                  next_retry_at = ${o.nextRetryAt},
                  due_at = ${o.nextRetryAt},
                  completed_at = ${o.completedAt},
                  response_body = ${o.responseBody},
                  claimed_until = null,
                  claim_token = null,
                  updated_at = ${o.at}
                where id = ${o.id} and claim_token = ${o.token}
                returning *`
          }),
          Effect.orDie
        ),
        completeMany: flow(
          SqlSchema.findAll({
            Request: Schema.Array(AttemptOutcome),
            Result: DeliveryRow,
            // One parameter, whatever the round's size: the outcomes as a JSON array of snake_case records.
            execute: (outcomes) =>
              outcomes.length === 0 ? Effect.succeed([]) : sql`
                update webhook_deliveries d set
                  status = v.status,
                  attempt_number = v.attempt_number,
                  http_status_code = v.http_status_code,
                  failure_reason = v.failure_reason,
                  next_retry_at = v.next_retry_at,
                  due_at = v.next_retry_at,
                  completed_at = v.completed_at,
                  response_body = v.response_body,
                  claimed_until = null,
                  claim_token = null,
                  updated_at = v.at
                from jsonb_to_recordset(${
                sql.json(outcomes.map((o) => ({
                  id: o.id,
                  token: o.token,
                  status: o.status,
                  attempt_number: o.attemptNumber,
                  http_status_code: o.httpStatusCode,
                  failure_reason: o.failureReason,
                  next_retry_at: o.nextRetryAt,
                  completed_at: o.completedAt,
                  response_body: o.responseBody,
                  at: o.at
                })))
              }::jsonb) as v(id text, token text, status text, attempt_number integer, http_status_code integer,
                  failure_reason text, next_retry_at timestamptz, completed_at timestamptz, response_body text,
                  at timestamptz)
                where d.id = v.id and d.claim_token = v.token
                returning d.*`
          }),
          Effect.orDie
        ),
        stats: flow(
          SqlSchema.findOne({
            Request: EndpointSince,
            Result: AttemptStats,
            // The counts read the window's range of `webhook_deliveries_endpoint_idx`, and each latest completion is
            // one probe of `webhook_deliveries_completed_idx`: never the endpoint's whole history (issue 19).
            execute: ({ endpointId, since }) =>
              sql`
                select
                  count(*) filter (where status = 'success')::int as success,
                  count(*) filter (where status = 'failed')::int as failed,
                  count(*) filter (where status = 'retrying')::int as retrying,
                  count(*) filter (where status = 'pending')::int as pending,
                  (select max(completed_at) from webhook_deliveries
                    where endpoint_id = ${endpointId} and status = 'success') as last_success_at,
                  (select max(completed_at) from webhook_deliveries
                    where endpoint_id = ${endpointId} and status = 'failed') as last_failure_at
                from webhook_deliveries where endpoint_id = ${endpointId} and created_at >= ${since}`
          }),
          Effect.orDie
        ),
        failedSince: flow(
          SqlSchema.findAll({
            Request: EndpointSince,
            Result: DeliveryRow,
            execute: ({ endpointId, since }) =>
              sql`
                select * from webhook_deliveries
                where endpoint_id = ${endpointId} and status = 'failed' and created_at >= ${since}
                order by created_at, id`
          }),
          Effect.orDie
        ),
        nextDue: SqlSchema.findOneOption({
          Request: Schema.Void,
          Result: Schema.Struct({ at: Schema.Date }),
          execute: () =>
            sql`
              select greatest(due_at, coalesce(claimed_until, due_at)) as at from webhook_deliveries
              where due_at is not null order by 1 limit 1`
        })(undefined).pipe(Effect.map(Option.map((row) => row.at)), Effect.orDie)
      })
    })
  )
}

/** The row after a try: the memory twin of `complete`'s update. */
const applyOutcome = (row: DeliveryRow, o: AttemptOutcome): DeliveryRow => ({
  ...row,
  status: o.status,
  attemptNumber: o.attemptNumber,
  httpStatusCode: o.httpStatusCode,
  failureReason: o.failureReason,
  nextRetryAt: o.nextRetryAt,
  dueAt: o.nextRetryAt,
  completedAt: o.completedAt,
  responseBody: o.responseBody,
  claimedUntil: null,
  claimToken: null,
  updatedAt: o.at
})
