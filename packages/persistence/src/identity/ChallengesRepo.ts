/** Email sign-in challenges: a hashed code, an expiry, a wrong-code counter and single-use consumption. */
import { ChallengeId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { consumeUnexpired, insertUnique, primaryKey, type UniqueKey, updateRow } from "./memoryTable.ts"

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

const uniques: ReadonlyArray<UniqueKey<ChallengeRow>> = [primaryKey("login_challenges_pkey")]

const Consume = Schema.Struct({ id: ChallengeId, now: Schema.Date })
const ConsumedId = Schema.Struct({ id: ChallengeId })
const FailedAttempts = Schema.Struct({ failedAttempts: Schema.Int })

/** Login challenges; counting failures and consuming are single atomic statements, so races cannot double-spend. */
export class ChallengesRepo extends Context.Service<ChallengesRepo, {
  readonly insert: (challenge: ChallengeRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: ChallengeId) => Effect.Effect<Option.Option<ChallengeRow>>
  /** Adds one wrong code and returns the new count; the challenge must exist (the caller has just read it). */
  readonly recordFailure: (id: ChallengeId) => Effect.Effect<number>
  /**
   * Marks the challenge consumed at `now` if it is unconsumed and unexpired; true only for the one caller that
   * did so, however many race.
   */
  readonly consume: (id: ChallengeId, now: Date) => Effect.Effect<boolean>
}>()("@cp/persistence/identity/ChallengesRepo") {
  /** Challenges in a Map, for fast deterministic tests. */
  static readonly memory = Layer.sync(ChallengesRepo, () => {
    const challenges = new Map<ChallengeId, ChallengeRow>()
    return ChallengesRepo.of({
      insert: Effect.fn("ChallengesRepo.insert")((challenge: ChallengeRow) =>
        insertUnique(challenges, challenge.id, challenge, uniques)
      ),
      findById: Effect.fn("ChallengesRepo.findById")(function*(id: ChallengeId) {
        return Option.fromUndefinedOr(challenges.get(id))
      }),
      recordFailure: Effect.fn("ChallengesRepo.recordFailure")((id: ChallengeId) =>
        updateRow(challenges, id, (current) => Option.some({ ...current, failedAttempts: current.failedAttempts + 1 }))
          .pipe(Effect.flatMap(Effect.fromOption), Effect.map((row) => row.failedAttempts), Effect.orDie)
      ),
      consume: Effect.fn("ChallengesRepo.consume")((id: ChallengeId, now: Date) =>
        updateRow(challenges, id, consumeUnexpired(now)).pipe(Effect.map(Option.isSome))
      )
    })
  })

  /** Challenges in the `login_challenges` table. */
  static readonly sql = Layer.effect(
    ChallengesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: ChallengeRow,
        execute: (challenge) => sql`insert into login_challenges ${sql.insert(challenge)}`
      })
      const findById = SqlSchema.findOneOption({
        Request: ChallengeId,
        Result: ChallengeRow,
        execute: (id) => sql`select * from login_challenges where id = ${id}`
      })
      const recordFailure = SqlSchema.findOne({
        Request: ChallengeId,
        Result: FailedAttempts,
        execute: (id) =>
          sql`update login_challenges set failed_attempts = failed_attempts + 1 where id = ${id} returning failed_attempts`
      })
      const consume = SqlSchema.findOneOption({
        Request: Consume,
        Result: ConsumedId,
        execute: ({ id, now }) =>
          sql`
            update login_challenges set consumed_at = ${now}
            where id = ${id} and consumed_at is null and expires_at > ${now}
            returning id`
      })
      return ChallengesRepo.of({
        insert: Effect.fn("ChallengesRepo.insert")((challenge: ChallengeRow) => uniqueViolationOrDie(insert(challenge))),
        findById: Effect.fn("ChallengesRepo.findById")((id: ChallengeId) => Effect.orDie(findById(id))),
        recordFailure: Effect.fn("ChallengesRepo.recordFailure")((id: ChallengeId) =>
          recordFailure(id).pipe(Effect.map((row) => row.failedAttempts), Effect.orDie)
        ),
        consume: Effect.fn("ChallengesRepo.consume")((id: ChallengeId, now: Date) =>
          consume({ id, now }).pipe(Effect.map(Option.isSome), Effect.orDie)
        )
      })
    })
  )
}
