/**
 * Rows: their schemas built from the domain's own fields, so a stored shape and its API shape cannot drift apart, and
 * the one way a repository inserts one.
 */
import { Effect, flow, Schema, Struct } from "effect"
import { type SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "./errors.ts"

/**
 * The fields of a domain model as a row holds them: the same schemas on their type side, so ids keep their brands and
 * checks while timestamps (ISO strings on the wire) are the `Date`s the driver reads and writes.
 */
export const storedFields = <F extends Schema.Struct.Fields>(fields: F) => Struct.map(fields, Schema.toType)

/** `insert into <table> <row>`, encoded by `Row`; a collision with a unique constraint is a `UniqueViolation`. */
export const insertRow = <Row extends Schema.Struct<Schema.Struct.Fields>>(
  sql: SqlClient.SqlClient,
  table: string,
  Row: Row
): (row: Row["Type"]) => Effect.Effect<void, UniqueViolation, Row["EncodingServices"]> =>
  flow(
    SqlSchema.void({ Request: Row, execute: (row) => sql`insert into ${sql(table)} ${sql.insert(row)}` }),
    uniqueViolationOrDie
  )
