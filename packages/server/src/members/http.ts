/** Members and invitations handlers: decode by the router, access by the middleware; each calls one service method. */
import { ControlPlaneApi, CurrentActor, CurrentWorkspace } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { InvitationsService } from "./invitations.ts"
import { MembersService } from "./service.ts"

export const MembersHttp = HttpApiBuilder.group(ControlPlaneApi, "members", (handlers) =>
  Effect.gen(function*() {
    const members = yield* MembersService
    return handlers
      .handle("list", ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => members.list(workspace, query)))
      .handle("updateRole", ({ params, payload }) =>
        Effect.gen(function*() {
          return yield* members.updateRole(yield* CurrentActor, yield* CurrentWorkspace, params.memberId, payload.role)
        }))
      .handle("remove", ({ params }) =>
        Effect.gen(function*() {
          return yield* members.remove(yield* CurrentActor, yield* CurrentWorkspace, params.memberId)
        }))
  }))

export const InvitationsHttp = HttpApiBuilder.group(
  ControlPlaneApi,
  "invitations",
  (handlers) =>
    Effect.gen(function*() {
      const invitations = yield* InvitationsService
      return handlers
        .handle(
          "list",
          ({ query }) => Effect.flatMap(CurrentWorkspace, (workspace) => invitations.list(workspace, query))
        )
        .handle("create", ({ payload }) =>
          Effect.gen(function*() {
            return yield* invitations.create(yield* CurrentActor, yield* CurrentWorkspace, payload)
          }))
        .handle("revoke", ({ params }) =>
          Effect.gen(function*() {
            return yield* invitations.revoke(yield* CurrentActor, yield* CurrentWorkspace, params.invitationId)
          }))
        .handle("accept", ({ payload }) =>
          Effect.gen(function*() {
            return yield* invitations.acceptByToken(yield* CurrentActor, yield* CurrentWorkspace, payload.token)
          }))
        .handle("mine", ({ query }) => Effect.flatMap(CurrentActor, (actor) => invitations.mine(actor, query)))
        .handle(
          "acceptMine",
          ({ params }) => Effect.flatMap(CurrentActor, (actor) => invitations.acceptById(actor, params.invitationId))
        )
    })
)
