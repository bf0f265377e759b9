/** Usage handlers: each calls one service method. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { UsageService } from "./service.ts"

export const UsageHttp = HttpApiBuilder.group(ControlPlaneApi, "usage", (handlers) =>
  Effect.gen(function*() {
    const usage = yield* UsageService
    return handlers
      .handle("record", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          usage.record(actor, workspace, payload)))
      .handle("batch", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          usage.batch(actor, workspace, payload.records)))
      .handle("summary", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          usage.summary(workspace, query)))
  }))
