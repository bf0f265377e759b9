/** Quota handlers: each calls one service method. */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { QuotasService } from "./service.ts"

export const QuotasHttp = HttpApiBuilder.group(ControlPlaneApi, "quotas", (handlers) =>
  Effect.gen(function*() {
    const quotas = yield* QuotasService
    return handlers
      .handle("list", ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => quotas.list(workspace, query)))
      .handle("create", ({ payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          quotas.create(actor, workspace, payload)))
      .handle("update", ({ params, payload }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          quotas.update(actor, workspace, params.quotaId, payload)))
      .handle("delete", ({ params }) =>
        Effect.flatMap(actorInWorkspace, ({ actor, workspace }) =>
          quotas.delete(actor, workspace, params.quotaId)))
      .handle("check", ({ payload }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          quotas.check(workspace, payload)))
      .handle("violations", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          quotas.violations(workspace, query)))
  }))
