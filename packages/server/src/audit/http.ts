/**
 * Audit handlers: decode is done by the router, access (`audit.read`) by the middleware; one service call. The
 * group comes with its service, so registering the area in `app.ts` is one entry.
 */
import { ControlPlaneApi, CurrentActor, CurrentWorkspace } from "@cp/domain"
import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { AuditService } from "./service.ts"

export const AuditHttp = HttpApiBuilder.group(ControlPlaneApi, "audit", (handlers) =>
  Effect.gen(function*() {
    const audit = yield* AuditService
    return handlers.handle("list", ({ query }) =>
      Effect.gen(function*() {
        return yield* audit.list(yield* CurrentActor, yield* CurrentWorkspace, query)
      }))
  })).pipe(Layer.provide(AuditService.layer))
