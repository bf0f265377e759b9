/** Stored outcomes of `Idempotency-Key` requests, shared by every replica so a retry is answered exactly once. */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import { atomically } from "../Memory.ts"
import { retryUntilAnswered } from "./retryUntilAnswered.ts"

/** How long a stored answer (or any slot) lives: after this the key may be reused for a new request. */
export const IDEMPOTENCY_RETENTION = Duration.hours(24)

/** One idempotency slot: the same key sent by another principal, or to another method or path, is a different slot. */
export const IdempotencySlot = Schema.Struct({
  principal: Schema.String,
  method: Schema.String,
  path: Schema.String,
  key: Schema.String
})
export type IdempotencySlot = typeof IdempotencySlot.Type

/** Response headers kept with a stored answer, replayed verbatim. */
export const StoredHeaders = Schema.Record(Schema.String, Schema.String)
export type StoredHeaders = typeof StoredHeaders.Type

/** What `begin` found: a fresh claim for this caller, a request still running elsewhere, or the stored answer. */
export const BeginOutcome = Schema.Union([
  Schema.TaggedStruct("Started", {}),
  Schema.TaggedStruct("InFlight", { bodyHash: Schema.String }),
  Schema.TaggedStruct("Completed", {
    bodyHash: Schema.String,
    status: Schema.Int,
    headers: StoredHeaders,
    body: Schema.String
  })
])
export type BeginOutcome = typeof BeginOutcome.Type

/** A request to claim a slot at `now`; an in-flight claim older than `staleAfter` is considered abandoned. */
export interface BeginRequest extends IdempotencySlot {
  readonly bodyHash: string
  readonly now: Date
  readonly staleAfter: Duration.Input
}

/** The answer to remember for a slot this caller started. */
export interface CompleteRequest extends IdempotencySlot {
  readonly status: number
  readonly headers: StoredHeaders
  readonly body: string
  readonly now: Date
}

/** Claims, completes and releases idempotency slots atomically across replicas. */
export class IdempotencyRepo extends Context.Service<IdempotencyRepo, {
  /** Claims the slot (`Started`) unless a live claim or a stored answer holds it, which it then returns. */
  readonly begin: (request: BeginRequest) => Effect.Effect<BeginOutcome>
  /** Stores the answer of a slot still in flight. */
  readonly complete: (request: CompleteRequest) => Effect.Effect<void>
  /** Frees an in-flight slot (the request failed in a way that must not be remembered); a stored answer stays. */
  readonly release: (slot: IdempotencySlot) => Effect.Effect<void>
}>()("@cp/persistence/platform/IdempotencyRepo") {
  /** In-process slots, for domain-service tests. */
  static readonly memory = Layer.sync(IdempotencyRepo, () => {
    const slots = new Map<string, StoredSlot>()
    const slotKey = (slot: IdempotencySlot) => JSON.stringify([slot.principal, slot.method, slot.path, slot.key])

    return IdempotencyRepo.of({
      begin: (request) =>
        atomically((changes) => {
          const id = slotKey(request)
          const existing = slots.get(id)
          if (existing !== undefined && !isReclaimable(existing, claimThresholds(request))) {
            return Effect.succeed(outcomeOf(existing))
          }
          changes.set(slots, id, { bodyHash: request.bodyHash, createdAt: request.now, answer: undefined })
          return Effect.succeed(started)
        }),
      complete: (request) =>
        atomically((changes) => {
          const id = slotKey(request)
          const existing = slots.get(id)
          if (existing !== undefined && existing.answer === undefined) {
            const { status, headers, body } = request
            changes.set(slots, id, { ...existing, answer: { status, headers, body } })
          }
          return Effect.void
        }),
      release: (slot) =>
        atomically((changes) => {
          const id = slotKey(slot)
          if (slots.get(id)?.answer === undefined) changes.delete(slots, id)
          return Effect.void
        })
    })
  })

  /** Slots in `idempotency_keys`; each operation is one statement, safe for replicas racing on the same key. */
  static readonly sql = Layer.effect(
    IdempotencyRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient

      // The upsert claims a free, stale or expired slot; otherwise the second half reads the holder back.
      const claim = SqlSchema.findAll({
        Request: ClaimRequest,
        Result: BeginOutcome,
        execute: (r) =>
          sql`
            with claimed as (
              insert into idempotency_keys as k
                (principal, method, path, idempotency_key, body_hash, state, created_at)
              values (${r.principal}, ${r.method}, ${r.path}, ${r.key}, ${r.bodyHash}, 'in_flight', ${r.now})
              on conflict (principal, method, path, idempotency_key) do update
                set body_hash = excluded.body_hash, state = 'in_flight', status = null, headers = null, body = null,
                    created_at = excluded.created_at, completed_at = null
                where (k.state = 'in_flight' and k.created_at < ${r.staleBefore}) or k.created_at < ${r.expiredBefore}
              returning 1
            )
            select 'Started' as _tag, null as body_hash, null::int4 as status, null::jsonb as headers, null as body
            from claimed
            union all
            select case k.state when 'completed' then 'Completed' else 'InFlight' end,
                   k.body_hash, k.status, k.headers, k.body
            from idempotency_keys k
            where k.principal = ${r.principal} and k.method = ${r.method} and k.path = ${r.path}
              and k.idempotency_key = ${r.key}
              and not exists (select 1 from claimed)`
      })

      const complete = SqlSchema.void({
        Request: CompleteRow,
        execute: (r) =>
          sql`
            update idempotency_keys
            set state = 'completed', status = ${r.status}, headers = ${sql.json(r.headers)}, body = ${r.body},
                completed_at = ${r.now}
            where principal = ${r.principal} and method = ${r.method} and path = ${r.path}
              and idempotency_key = ${r.key} and state = 'in_flight'`
      })

      const release = SqlSchema.void({
        Request: IdempotencySlot,
        execute: (r) =>
          sql`
            delete from idempotency_keys
            where principal = ${r.principal} and method = ${r.method} and path = ${r.path}
              and idempotency_key = ${r.key} and state = 'in_flight'`
      })

      return IdempotencyRepo.of({
        begin: (request) =>
          retryUntilAnswered(claim({ ...request, ...claimThresholds(request) }), "IdempotencyRepo.begin").pipe(
            Effect.orDie,
            Effect.withSpan("IdempotencyRepo.begin")
          ),
        complete: (request) => complete(request).pipe(Effect.orDie, Effect.withSpan("IdempotencyRepo.complete")),
        release: (slot) => release(slot).pipe(Effect.orDie, Effect.withSpan("IdempotencyRepo.release"))
      })
    })
  )
}

const ClaimRequest = Schema.Struct({
  ...IdempotencySlot.fields,
  bodyHash: Schema.String,
  now: Schema.Date,
  staleBefore: Schema.Date,
  expiredBefore: Schema.Date
})

const CompleteRow = Schema.Struct({
  ...IdempotencySlot.fields,
  status: Schema.Int,
  headers: StoredHeaders,
  body: Schema.String,
  now: Schema.Date
})

interface StoredSlot {
  readonly bodyHash: string
  readonly createdAt: Date
  readonly answer: { readonly status: number; readonly headers: StoredHeaders; readonly body: string } | undefined
}

const started: BeginOutcome = { _tag: "Started" }

/** Claims created before `staleBefore` (in flight) or `expiredBefore` (any) no longer hold their slot. */
const claimThresholds = (request: BeginRequest) => ({
  staleBefore: new Date(request.now.getTime() - Duration.toMillis(request.staleAfter)),
  expiredBefore: new Date(request.now.getTime() - Duration.toMillis(IDEMPOTENCY_RETENTION))
})

const isReclaimable = (slot: StoredSlot, thresholds: ReturnType<typeof claimThresholds>) =>
  (slot.answer === undefined && slot.createdAt < thresholds.staleBefore) || slot.createdAt < thresholds.expiredBefore

const outcomeOf = (slot: StoredSlot): BeginOutcome =>
  slot.answer === undefined
    ? { _tag: "InFlight", bodyHash: slot.bodyHash }
    : { _tag: "Completed", bodyHash: slot.bodyHash, ...slot.answer }
