/** Identity: email-code and OAuth sign-in, sessions, the profile and the security-event log. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { NotFound, PreconditionFailed, RateLimited } from "./errors.ts"
import { ChallengeId, SessionId, UserId } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import { Authentication, Authorization, PageQuery, requires } from "./security.ts"
import { isStorableText, LineText, Text } from "./text.ts"
import { Envelope, Page, Timestamp } from "./wire.ts"

/**
 * Characters that make an address look like another one: controls, format characters (zero-width space and joiners,
 * the byte-order mark, soft hyphen), and any character that compatibility normalisation (NFKC) would change, such
 * as full-width letters and digits or ligatures.
 */
const isPlainAddress = (text: string): boolean => !/[\p{Cc}\p{Cf}]/u.test(text) && text.normalize("NFKC") === text

/** Surrounding white space, which comparison trims; unlike `trim`, a byte-order mark is not white space here. */
const SURROUNDING_SPACE = /^[\p{Zs}\t\n\v\f\r]+|[\p{Zs}\t\n\v\f\r]+$/gu

export const Email = Text.check(
  Schema.isMaxLength(254),
  Schema.isPattern(/^\s*[^\s@]+@[^\s@]+\.[^\s@]+\s*$/, { message: "must be an email address" }),
  Schema.makeFilter((text: string) =>
    !isStorableText(text) || isPlainAddress(text.replace(SURROUNDING_SPACE, "")) ||
    "must not contain full-width, zero-width, control or other look-alike characters"
  )
)

export const User = Schema.Struct({
  id: UserId,
  email: Schema.String,
  displayName: Schema.NullOr(Schema.String),
  lastOrgSlug: Schema.NullOr(Schema.String)
})
export type User = typeof User.Type

export const LoginUser = Schema.Struct({ id: UserId, email: Schema.String, displayName: Schema.NullOr(Schema.String) })

export const LoginChallenge = {
  challengeId: ChallengeId,
  expiresAt: Timestamp,
  delivery: Schema.Struct({ mode: Schema.Literal("email"), emailHint: Schema.String })
}
export type LoginChallenge = Schema.Struct.Type<typeof LoginChallenge>

export const LoginResult = {
  token: Schema.String,
  tokenType: Schema.Literal("bearer"),
  expiresAt: Timestamp,
  user: LoginUser
}
export type LoginResult = Schema.Struct.Type<typeof LoginResult>

export const Session = Schema.Struct({ id: SessionId, expiresAt: Timestamp, createdAt: Timestamp })
export type Session = typeof Session.Type

export const SecurityEventOutcome = Schema.Literals(["success", "failure"])

export const SecurityEvent = Schema.Struct({
  eventType: Schema.String,
  outcome: SecurityEventOutcome,
  occurredAt: Timestamp,
  requestId: Schema.NullOr(Schema.String),
  ip: Schema.NullOr(Schema.String),
  userAgent: Schema.NullOr(Schema.String),
  metadata: Schema.Record(Schema.String, Schema.Unknown)
})
export type SecurityEvent = typeof SecurityEvent.Type

export const OAuthProvider = Schema.Struct({ id: Schema.String, name: Schema.String })

const ProviderParam = describedText("The provider's id, as `GET /v1/auth/oauth/providers` lists it").check(
  Schema.isPattern(/^[a-z0-9_-]{1,32}$/)
)

/** A challenge id as a client sends it back: any short text; one that is not a `chl_` id names no challenge. */
export const OpaqueChallengeId = Text.check(Schema.isMinLength(1), Schema.isMaxLength(255))

export const ProfilePatch = Schema.Struct({
  displayName: Schema.optionalKey(Schema.NullOr(LineText.check(Schema.isMaxLength(128)))),
  lastOrgSlug: Schema.optionalKey(LineText.check(Schema.isMinLength(1), Schema.isMaxLength(63)))
})

export class IdentityApi extends HttpApiGroup.make("identity")
  .add(
    HttpApiEndpoint.post("loginStart", "/v1/auth/login/start", {
      payload: Schema.Struct({ email: Email }),
      success: Envelope(LoginChallenge),
      error: RateLimited
    }).annotateMerge(
      doc(
        "Start an email sign-in",
        "Sends a 6-digit code to the address (valid 10 minutes, single use) and returns the challenge id " +
          "to complete with. Rate limited per identity and per workspace."
      )
    ).annotateMerge(requires.none),
    HttpApiEndpoint.post("loginComplete", "/v1/auth/login/complete", {
      // Clients treat challenge ids as opaque: one not of our form is unknown (404), not malformed (422).
      payload: Schema.Struct({
        challengeId: OpaqueChallengeId,
        code: Schema.String.check(Schema.isPattern(/^\d{6}$/))
      }),
      success: Envelope(LoginResult),
      error: [NotFound, PreconditionFailed, RateLimited]
    }).annotateMerge(
      doc(
        "Complete an email sign-in",
        "Exchanges the challenge id and code for a session token (`data.token`, shown once, valid 30 " +
          "days). A first sign-in creates the user and a first workspace."
      )
    ).annotateMerge(requires.none),
    HttpApiEndpoint.get("oauthProviders", "/v1/auth/oauth/providers", {
      success: Envelope({ providers: Schema.Array(OAuthProvider) })
    }).annotateMerge(
      doc("List OAuth sign-in providers", "The providers configured on this server; email sign-in is always available.")
    ).annotateMerge(requires.none),
    HttpApiEndpoint.get("oauthStart", "/v1/auth/oauth/:provider/start", {
      params: { provider: ProviderParam },
      success: HttpApiSchema.Empty(302),
      error: NotFound
    }).annotateMerge(doc("Start an OAuth sign-in", "Redirects the browser to the provider's consent page."))
      .annotateMerge(requires.none),
    HttpApiEndpoint.get("oauthCallback", "/v1/auth/oauth/:provider/callback", {
      params: { provider: ProviderParam },
      query: {
        code: Schema.optionalKey(describedText("The provider's authorization code")),
        state: describedText("The signed state the start step sent to the provider"),
        error: Schema.optionalKey(describedText("The provider's error, when consent failed"))
      },
      success: Envelope(LoginResult),
      error: [NotFound, PreconditionFailed]
    }).annotateMerge(
      doc(
        "Finish an OAuth sign-in",
        "The provider redirects here; a verified provider email signs in (or links to) the matching user."
      )
    ).annotateMerge(requires.none)
  )
  .annotateMerge(OpenApi.annotations({ title: "Sign-in", description: "Email-code and OAuth sign-in" }))
{}

/** The signed-in user's own surfaces; API keys get 403 on all of them. */
export class SessionApi extends HttpApiGroup.make("session")
  .add(
    HttpApiEndpoint.get("session", "/v1/auth/session", {
      success: Envelope({ session: Session, user: User })
    }).annotateMerge(
      doc(
        "Describe the current session",
        "The caller as the token resolves it: the user and session, or the API key's service principal."
      )
    ).annotateMerge(requires.session),
    HttpApiEndpoint.post("logout", "/v1/auth/logout", {
      success: Envelope({ success: Schema.Literal(true) })
    }).annotateMerge(doc("Sign out", "Revokes the session token at once. Session tokens only.")).annotateMerge(
      requires.session
    ),
    HttpApiEndpoint.get("getProfile", "/v1/auth/profile", {
      success: Envelope({ user: User })
    }).annotateMerge(doc("Read your profile", "Session tokens only (403 for an API key).")).annotateMerge(
      requires.session
    ),
    HttpApiEndpoint.patch("updateProfile", "/v1/auth/profile", {
      payload: ProfilePatch,
      success: Envelope({ user: User })
    }).annotateMerge(doc("Update your profile", "Session tokens only (403 for an API key).")).annotateMerge(
      requires.session
    ),
    HttpApiEndpoint.get("securityEvents", "/v1/auth/security-events", {
      query: PageQuery,
      success: Page({ securityEvents: Schema.Array(SecurityEvent) })
    }).annotateMerge(
      doc(
        "List your security events",
        "Sign-ins, sign-outs and other security events of the signed-in user, newest first."
      )
    ).annotateMerge(requires.session)
  )
  .middleware(Authorization)
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Session", description: "Session, profile and security events" }))
{}
