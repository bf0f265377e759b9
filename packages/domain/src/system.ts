/** Operational routes outside `/v1`: health, and the development mail outbox. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { NotFound } from "./errors.ts"
import { describedText, doc } from "./reference.ts"
import { requires } from "./security.ts"
import { Envelope, RequestIdSlot, Timestamp } from "./wire.ts"

/** 503 with the success envelope's shape, as the contract's health rule asks. */
export class DatabaseUnavailable extends Schema.Error<DatabaseUnavailable>("DatabaseUnavailable")(
  {
    data: Schema.Struct({ status: Schema.Literal("unavailable"), database: Schema.Literal("unreachable") }),
    meta: Schema.Struct({ requestId: RequestIdSlot, cursor: Schema.Null })
  },
  { httpApiStatus: 503 }
) {}

export const OutboxMessage = Schema.Struct({
  id: Schema.String,
  to: Schema.String,
  template: Schema.String,
  subject: Schema.String,
  text: Schema.String,
  data: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: Timestamp
})
export type OutboxMessage = typeof OutboxMessage.Type

export class SystemApi extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("health", "/health", {
      success: Envelope({ status: Schema.Literal("ok"), database: Schema.Literal("ok") }),
      error: DatabaseUnavailable
    }).annotateMerge(
      doc(
        "Check health",
        "200 when the server and its database answer, 503 (`service_unavailable`) when the database does " +
          "not. No credential."
      )
    ).annotateMerge(requires.none),
    HttpApiEndpoint.get("outbox", "/v1/dev/outbox", {
      query: { to: Schema.optionalKey(describedText("Only mail sent to this address")) },
      success: Envelope({ messages: Schema.Array(OutboxMessage) }),
      error: NotFound
    }).annotateMerge(
      doc(
        "Read the development outbox",
        "Development and test mode only (404 otherwise): the mail the server would have sent, newest " +
          "first, optionally only to one address. Sign-in codes are read here."
      )
    ).annotateMerge(requires.none)
  )
  .annotateMerge(OpenApi.annotations({ title: "System", description: "Health and the development outbox" }))
{}
