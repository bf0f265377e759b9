/** Users: one row per person who has signed in, found by id or by their normalized email. */
import { UserId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"

/** A row of `users`; the profile fields are what the API shows, the rest drives sign-in. */
export const UserRow = Schema.Struct({
  id: UserId,
  /** Trimmed and lower-cased by the caller; unique. */
  email: Schema.String,
  displayName: Schema.NullOr(Schema.String),
  lastOrgSlug: Schema.NullOr(Schema.String),
  emailVerified: Schema.Boolean,
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type UserRow = typeof UserRow.Type

/** The profile fields a user may change; an absent key leaves the column as it is. */
export interface UserPatch {
  readonly displayName?: string | null
  readonly lastOrgSlug?: string | null
}

/** The constraint behind the `UniqueViolation` of a second user with the same email. */
export const usersEmailConstraint = "users_email_key"

const uniques: ReadonlyArray<UniqueKey<UserRow>> = [
  primaryKey("users_pkey"),
  { constraint: usersEmailConstraint, key: (user) => user.email }
]

const UserUpdate = Schema.Struct({
  id: UserId,
  displayName: Schema.optionalKey(Schema.NullOr(Schema.String)),
  lastOrgSlug: Schema.optionalKey(Schema.NullOr(Schema.String)),
  updatedAt: Schema.Date
})

/** User accounts; the caller normalizes emails, so lookups are exact matches. */
export class UsersRepo extends Context.Service<UsersRepo, {
  readonly findById: (id: UserId) => Effect.Effect<Option.Option<UserRow>>
  readonly findByEmail: (email: string) => Effect.Effect<Option.Option<UserRow>>
  readonly insert: (user: UserRow) => Effect.Effect<void, UniqueViolation>
  /** Applies the present fields of `patch` and stamps `updatedAt`; the user must exist (callers hold its session). */
  readonly update: (id: UserId, patch: UserPatch, now: Date) => Effect.Effect<UserRow>
}>()("@cp/persistence/identity/UsersRepo") {
  /** Users in a Map, for fast deterministic tests. */
  static readonly memory = Layer.sync(UsersRepo, () => {
    const users = new Map<UserId, UserRow>()
    const find = (predicate: (user: UserRow) => boolean) =>
      Option.fromUndefinedOr(Array.from(users.values()).find(predicate))
    return UsersRepo.of({
      findById: Effect.fn("UsersRepo.findById")(function*(id: UserId) {
        return Option.fromUndefinedOr(users.get(id))
      }),
      findByEmail: Effect.fn("UsersRepo.findByEmail")(function*(email: string) {
        return find((user) => user.email === email)
      }),
      insert: Effect.fn("UsersRepo.insert")((user: UserRow) => insertUnique(users, user.id, user, uniques)),
      update: Effect.fn("UsersRepo.update")((id: UserId, patch: UserPatch, now: Date) =>
        updateRow(users, id, (current) => Option.some({ ...current, ...patch, updatedAt: now })).pipe(
          Effect.flatMap(Effect.fromOption),
          Effect.orDie
        )
      )
    })
  })

  /** Users in the `users` table. */
  static readonly sql = Layer.effect(
    UsersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const findById = SqlSchema.findOneOption({
        Request: UserId,
        Result: UserRow,
        execute: (id) => sql`select * from users where id = ${id}`
      })
      const findByEmail = SqlSchema.findOneOption({
        Request: Schema.String,
        Result: UserRow,
        execute: (email) => sql`select * from users where email = ${email}`
      })
      const insert = SqlSchema.void({
        Request: UserRow,
        execute: (user) => sql`insert into users ${sql.insert(user)}`
      })
      const update = SqlSchema.findOne({
        Request: UserUpdate,
        Result: UserRow,
        execute: ({ id, ...fields }) => sql`update users set ${sql.update(fields)} where id = ${id} returning *`
      })
      return UsersRepo.of({
        findById: Effect.fn("UsersRepo.findById")((id: UserId) => Effect.orDie(findById(id))),
        findByEmail: Effect.fn("UsersRepo.findByEmail")((email: string) => Effect.orDie(findByEmail(email))),
        insert: Effect.fn("UsersRepo.insert")((user: UserRow) => uniqueViolationOrDie(insert(user))),
        update: Effect.fn("UsersRepo.update")((id: UserId, patch: UserPatch, now: Date) =>
          Effect.orDie(update({ ...patch, id, updatedAt: now }))
        )
      })
    })
  )
}
