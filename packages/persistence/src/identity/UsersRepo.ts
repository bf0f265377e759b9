/** Users: one row per person who has signed in, found by id or by their normalized email. */
import { User } from "@cp/domain/identity"
import { UserId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { userByEmailSql } from "../signInStatements.ts"
import { storedFields } from "../stored.ts"
import { insertRow } from "../stored.ts"
import { SubjectTables } from "../subjects.ts"

/** A row of `users`: the API's profile (the email trimmed and lower-cased by the caller; unique) and sign-in state. */
export const UserRow = Schema.Struct({
  ...storedFields(User.fields),
  emailVerified: Schema.Boolean,
  createdAt: Schema.Date,
  updatedAt: Schema.Date
})
export type UserRow = typeof UserRow.Type

/** The profile fields a user may change (an absent key leaves the column as it is), stamped `updatedAt`. */
export const UserUpdate = Schema.Struct({
  id: UserId,
  displayName: Schema.optionalKey(Schema.NullOr(Schema.String)),
  lastOrgSlug: Schema.optionalKey(Schema.NullOr(Schema.String)),
  updatedAt: Schema.Date
})
export type UserUpdate = typeof UserUpdate.Type

/** The constraint behind the `UniqueViolation` of a second user with the same email. */
export const usersEmailConstraint = "users_email_key"

const uniques: ReadonlyArray<UniqueKey<UserRow>> = [
  primaryKey("users_pkey"),
  { constraint: usersEmailConstraint, key: (user) => user.email }
]

/** User accounts; the caller normalizes emails, so lookups are exact matches. */
export class UsersRepo extends Context.Service<UsersRepo, {
  readonly findById: (id: UserId) => Effect.Effect<Option.Option<UserRow>>
  readonly findByEmail: (email: string) => Effect.Effect<Option.Option<UserRow>>
  readonly insert: (user: UserRow) => Effect.Effect<void, UniqueViolation>
  /** Applies the present fields and stamps `updatedAt`; the user must exist (callers hold its session). */
  readonly update: (update: UserUpdate) => Effect.Effect<UserRow>
}>()("@cp/persistence/identity/UsersRepo") {
  /** Users in the shared subject tables, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    UsersRepo,
    Effect.gen(function*() {
      const { users } = yield* SubjectTables
      return UsersRepo.of({
        findById: (id) => Effect.sync(() => Option.fromUndefinedOr(users.get(id))),
        findByEmail: (email) =>
          Effect.sync(() => Option.fromUndefinedOr(Array.from(users.values()).find((user) => user.email === email))),
        insert: (user) => insertUnique(users, user.id, user, uniques),
        update: ({ id, ...fields }) =>
          updateRow(users, id, (current) => Option.some({ ...current, ...fields })).pipe(
            Effect.flatMap(Effect.fromOption),
            Effect.orDie
          )
      })
    })
  ).pipe(Layer.provide(SubjectTables.layer))

  /** Users in the `users` table. */
  static readonly sql = Layer.effect(
    UsersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return UsersRepo.of({
        findById: flow(
          SqlSchema.findOneOption({
            Request: UserId,
            Result: UserRow,
            execute: (id) => sql`select * from users where id = ${id}`
          }),
          Effect.orDie
        ),
        findByEmail: flow(
          SqlSchema.findOneOption({
            Request: Schema.String,
            Result: UserRow,
            // Every sign-in reads it: constant statement text (the driver keys prepared statements by the text) naming
            // its columns in camelCase, so no per-row name transform.
            execute: (email) => sql.unsafe(userByEmailSql, [email]).withoutTransform
          }),
          Effect.orDie
        ),
        insert: insertRow(sql, "users", UserRow),
        update: flow(
          SqlSchema.findOne({
            Request: UserUpdate,
            Result: UserRow,
            execute: ({ id, ...fields }) => sql`update users set ${sql.update(fields)} where id = ${id} returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
