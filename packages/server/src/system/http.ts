/** Health and the development outbox. */
import { ControlPlaneApi, DatabaseUnavailable, NotFound, wireError } from "@cp/domain"
import { DatabaseHealth, OutboxRepo } from "@cp/persistence"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { AppConfig } from "../platform/config.ts"

const unavailable = new DatabaseUnavailable({
  data: { status: "unavailable", database: "unreachable" },
  meta: { cursor: null }
})

export const SystemHttp = HttpApiBuilder.group(ControlPlaneApi, "system", (handlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const outbox = yield* OutboxRepo
    const database = yield* DatabaseHealth
    return handlers
      .handle("health", () =>
        database.ping.pipe(
          Effect.timeout("2 seconds"),
          Effect.as({ status: "ok" as const, database: "ok" as const }),
          Effect.catchCause(() => Effect.fail(unavailable))
        ))
      .handle("outbox", ({ query }) =>
        AppConfig.isLocal(config)
          ? Effect.map(outbox.list(query.to === undefined ? {} : { to: query.to }), (messages) => ({ messages }))
          : Effect.fail(wireError(NotFound, "No route matches this path")))
  }))
