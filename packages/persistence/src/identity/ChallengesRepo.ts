/** Email sign-in challenges: a hashed code, an expiry, a wrong-code counter and single-use consumption. */
import { ChallengeId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { consumeUnexpired, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"

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

const ConsumedRow = Schema.Struct({ id: ChallengeId })
const FailuresRow = Schema.Struct({ failedAttempts: Schema.Int })

/** Login challenges; counting failures and consuming are single atomic statements, so races cannot double-spend. */
export class ChallengesRepo extends Context.Service<ChallengesRepo, {
  readonly insert: (challenge: ChallengeRow) => Effect.Effect<void, UniqueViolation>
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
  /** Challenges in a Map, for fast deterministic tests. */
  static readonly memory = Layer.sync(ChallengesRepo, () => {
    const challenges = new Map<ChallengeId, ChallengeRow>()
    return ChallengesRepo.of({
      insert: (challenge) => insertUnique(challenges, challenge.id, challenge, uniques),
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

  /** Challenges in the `login_challenges` table. */
  static readonly sql = Layer.effect(
    ChallengesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return ChallengesRepo.of({
        insert: insertRow(sql, "login_challenges", ChallengeRow),
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
