/** Identity handlers: sign-in (public) and the signed-in user's own surfaces (session only). */
import { ControlPlaneApi, CurrentActor, Forbidden, wireError } from "@cp/domain"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { OAuthService } from "./oauth.ts"
import { IdentityService } from "./service.ts"

/** The session-only routes' caller; the Authorization middleware has already refused API keys. */
const currentUser = Effect.flatMap(
  CurrentActor,
  (actor) =>
    actor.kind === "user" ? Effect.succeed(actor) : Effect.fail(wireError(Forbidden, "This route needs a user session"))
)

export const IdentityHttp = HttpApiBuilder.group(ControlPlaneApi, "identity", (handlers) =>
  Effect.gen(function*() {
    const identity = yield* IdentityService
    const oauth = yield* OAuthService
    return handlers
      .handle("loginStart", ({ payload }) => identity.loginStart(payload.email))
      .handle("loginComplete", ({ payload }) => identity.loginComplete(payload.challengeId, payload.code))
      .handle("oauthProviders", () => Effect.succeed({ providers: oauth.providers }))
      .handle("oauthStart", ({ params }) => oauth.start(params.provider))
      .handle("oauthCallback", ({ params, query }) => oauth.callback(params.provider, query))
  }))

export const SessionHttp = HttpApiBuilder.group(ControlPlaneApi, "session", (handlers) =>
  Effect.gen(function*() {
    const identity = yield* IdentityService
    return handlers
      .handle("session", () => Effect.flatMap(currentUser, identity.session))
      .handle("logout", () => Effect.flatMap(currentUser, identity.logout))
      .handle("getProfile", () => Effect.flatMap(currentUser, identity.profile))
      .handle("updateProfile", ({ payload }) =>
        Effect.flatMap(currentUser, (actor) => identity.updateProfile(actor, payload)))
      .handle("securityEvents", ({ query }) =>
        Effect.flatMap(currentUser, (actor) =>
          identity.securityEvents(actor, query)))
  }))
