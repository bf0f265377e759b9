/** Email sign-in challenges: a hashed code, an expiry, a wrong-code counter and single-use consumption. */
import { ChallengeId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { UndoJournal, undoOnFailure } from "../Memory.ts"
import { consumeUnexpired, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { challengeWithEventSql } from "../signInStatements.ts"
import { insertRow } from "../stored.ts"
import { SecurityEventInsert, SecurityEventsRepo } from "./SecurityEventsRepo.ts"

/** A row of `login_challenges`: only the code's hash is kept, and the row records how it was spent. */
export const ChallengeRow = Schema.Struct({
  id: ChallengeId,
  /** Normalized by the caller. */
  email: Schema.String,
  codeHash: Schema.String,
  expiresAt: Schema.Date,
  failedAttempts: Schema.Int,
  consumedAt: Schema.NullOr(Schema.Date),
  createdAt: Schema.Date
})
export type ChallengeRow = typeof ChallengeRow.Type

/** One wrong code against a challenge that tolerates at most `maxFailures`. */
export const ChallengeFailure = Schema.Struct({ id: ChallengeId, maxFailures: Schema.Int })
export type ChallengeFailure = typeof ChallengeFailure.Type

/** Spending a challenge at `now`, unless it has `maxFailures` wrong codes. */
export const ChallengeConsumption = Schema.Struct({ ...ChallengeFailure.fields, now: Schema.Date })
export type ChallengeConsumption = typeof ChallengeConsumption.Type

const uniques: ReadonlyArray<UniqueKey<ChallengeRow>> = [primaryKey("login_challenges_pkey")]

/** A new challenge together with the security event that records it. */
export const ChallengeWithEvent = Schema.Struct({ challenge: ChallengeRow, event: SecurityEventInsert })
export type ChallengeWithEvent = typeof ChallengeWithEvent.Type

const ConsumedRow = Schema.Struct({ id: ChallengeId })
const FailuresRow = Schema.Struct({ failedAttempts: Schema.Int })

/** Login challenges; counting failures and consuming are single atomic statements, so races cannot double-spend. */
export class ChallengesRepo extends Context.Service<ChallengesRepo, {
  readonly insert: (challenge: ChallengeRow) => Effect.Effect<void, UniqueViolation>
  /**
   * Stores the challenge and its security event all-or-nothing, without a transaction around it: on SQL one statement
   * writes both tables (a sign-in start is then one round trip and no transaction context).
   */
  readonly insertWithEvent: (row: ChallengeWithEvent) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: ChallengeId) => Effect.Effect<Option.Option<ChallengeRow>>
  /**
   * Counts one wrong code and returns the new count, unless the challenge is consumed or already has
   * `maxFailures` wrong codes (None): concurrent guesses can never count more than `maxFailures`.
   */
  readonly recordFailure: (failure: ChallengeFailure) => Effect.Effect<Option.Option<number>>
  /**
   * Marks the challenge consumed at `now` if it is unconsumed, unexpired and has fewer than `maxFailures`
   * wrong codes; true only for the one caller that did so, however many race.
   */
  readonly consume: (consumption: ChallengeConsumption) => Effect.Effect<boolean>
}>()("@cp/persistence/identity/ChallengesRepo") {
  /** Challenges in a Map, for fast deterministic tests; their events go to the memory `SecurityEventsRepo`. */
  static readonly memory = Layer.effect(
    ChallengesRepo,
    Effect.gen(function*() {
      const events = yield* SecurityEventsRepo
      const challenges = new Map<ChallengeId, ChallengeRow>()
      const insert = (challenge: ChallengeRow) => insertUnique(challenges, challenge.id, challenge, uniques)
      return ChallengesRepo.of({
        insert,
        // Both or neither: the event's failure undoes the challenge, inside a transaction or not.
        insertWithEvent: ({ challenge, event }) =>
          Effect.withFiber((fiber) =>
            undoOnFailure(Effect.andThen(insert(challenge), events.insert(event)), fiber.getRef(UndoJournal) ?? [])
          ),
        findById: (id) => Effect.sync(() => Option.fromUndefinedOr(challenges.get(id))),
        recordFailure: ({ id, maxFailures }) =>
          updateRow(challenges, id, (current) =>
            current.consumedAt === null && current.failedAttempts < maxFailures
              ? Option.some({ ...current, failedAttempts: current.failedAttempts + 1 })
              : Option.none()).pipe(Effect.map(Option.map((row) => row.failedAttempts))),
        consume: ({ id, now, maxFailures }) =>
          updateRow(
            challenges,
            id,
            (current) => current.failedAttempts < maxFailures ? consumeUnexpired(now)(current) : Option.none()
          ).pipe(Effect.map(Option.isSome))
      })
    })
  )

  /** Challenges in the `login_challenges` table. */
  static readonly sql = Layer.effect(
    ChallengesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return ChallengesRepo.of({
        insert: insertRow(sql, "login_challenges", ChallengeRow),
        // Every sign-in start runs it: constant statement text (the driver keys prepared statements by it), and the
        // typed row goes out as it is, with no per-call schema encode (its only encoding is the metadata's JSON text).
        insertWithEvent: ({ challenge: c, event: e }) =>
          uniqueViolationOrDie(Effect.asVoid(
            sql.unsafe(challengeWithEventSql, [
              c.id,
              c.email,
              c.codeHash,
              c.expiresAt,
              c.failedAttempts,
              c.consumedAt,
              c.createdAt,
              e.id,
              e.userId,
              e.email,
              e.eventType,
              e.outcome,
              e.occurredAt,
              e.requestId,
              e.ip,
              e.userAgent,
              JSON.stringify(e.metadata)
            ]).withoutTransform
          )),
        findById: flow(
          SqlSchema.findOneOption({
            Request: ChallengeId,
            Result: ChallengeRow,
            execute: (id) => sql`select * from login_challenges where id = ${id}`
          }),
          Effect.orDie
        ),
        recordFailure: flow(
          SqlSchema.findOneOption({
            Request: ChallengeFailure,
            Result: FailuresRow,
            execute: ({ id, maxFailures }) =>
              sql`
                update login_challenges set failed_attempts = failed_attempts + 1
                where id = ${id} and consumed_at is null and failed_attempts < ${maxFailures}
                returning failed_attempts`
          }),
          Effect.map(Option.map((row) => row.failedAttempts)),
          Effect.orDie
        ),
        consume: flow(
          SqlSchema.findOneOption({
            Request: ChallengeConsumption,
            Result: ConsumedRow,
            execute: ({ id, now, maxFailures }) =>
              sql`
                update login_challenges set consumed_at = ${now}
                where id = ${id} and consumed_at is null and expires_at > ${now} and failed_attempts < ${maxFailures}
                returning id`
          }),
          Effect.map(Option.isSome),
          Effect.orDie
        )
      })
    })
  )
}
