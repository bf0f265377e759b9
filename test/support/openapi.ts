/** The parts of the served OpenAPI document (`GET /openapi.json`) that tests read, as schemas. */
import { Schema } from "effect"

export const OpenApiOperation = Schema.Struct({
  parameters: Schema.Array(
    Schema.Struct({ in: Schema.String, name: Schema.String, required: Schema.optionalKey(Schema.Boolean) })
  ),
  responses: Schema.Record(Schema.String, Schema.Unknown)
})

/** The document: its version, title, and each path's operations by method (read further with `OpenApiOperation`). */
export const OpenApiDocument = Schema.Struct({
  openapi: Schema.String,
  info: Schema.Struct({ title: Schema.String }),
  paths: Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Unknown))
})
