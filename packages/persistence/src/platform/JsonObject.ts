/** The JSON of `jsonb` columns (event data, audit payloads, mail template data): always an object, kept verbatim. */
import { Schema } from "effect"

/** A JSON object; objects only, so a stored value is never confused with SQL NULL. */
export const JsonObject = Schema.Record(Schema.String, Schema.Json)
export type JsonObject = typeof JsonObject.Type
