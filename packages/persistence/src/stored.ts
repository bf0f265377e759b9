/** Row schemas built from the domain's own fields, so a stored shape and its API shape cannot drift apart. */
import { Schema, Struct } from "effect"

/**
 * The fields of a domain model as a row holds them: the same schemas on their type side, so ids keep their brands and
 * checks while timestamps (ISO strings on the wire) are the `Date`s the driver reads and writes.
 */
export const storedFields = <F extends Schema.Struct.Fields>(fields: F) => Struct.map(fields, Schema.toType)
