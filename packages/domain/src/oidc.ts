/**
 * Workflow credentials (run-state.md §1; spec: Authentication 7): a CI provider's OIDC JWT exchanged for a short-lived
 * bearer token of a `workflow` actor bound to one workspace and project, where it holds the `project_builder` set.
 * Development and test add a simulator issuer under `/dev/oidc`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { NotFound, ProviderUnavailable, Unauthenticated } from "./errors.ts"
import { OrgId, ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { requires } from "./security.ts"
import { JsonValue, Text } from "./text.ts"
import { Envelope, Timestamp } from "./wire.ts"

/** Why an exchange was refused: `details.reason` of its 401. */
export const OidcRefusal = Schema.Literals([
  "issuer_not_trusted",
  "signature",
  "expired",
  "no_link",
  "ref_not_allowed",
  "environment_not_allowed"
])
export type OidcRefusal = typeof OidcRefusal.Type

export const OidcExchangeInput = Schema.Struct({
  token: Text.check(Schema.isMinLength(1), Schema.isMaxLength(16_384)),
  orgId: OrgId,
  projectId: ProjectId
})
export type OidcExchangeInput = typeof OidcExchangeInput.Type

export const WorkflowActor = Schema.Struct({
  kind: Schema.Literal("workflow"),
  subject: Schema.String,
  orgId: OrgId,
  projectId: ProjectId
})

export const WorkflowCredential = Schema.Struct({
  token: Schema.String,
  tokenType: Schema.Literal("Bearer"),
  expiresAt: Timestamp,
  actor: WorkflowActor
})
export type WorkflowCredential = typeof WorkflowCredential.Type

export const DevOidcTokenInput = Schema.Struct({
  claims: Schema.Record(Text, JsonValue),
  expiresInSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: -86_400, maximum: 86_400 })))
})
export type DevOidcTokenInput = typeof DevOidcTokenInput.Type

export class OidcApi extends HttpApiGroup.make("oidc")
  .add(
    HttpApiEndpoint.post("exchange", "/v1/auth/oidc/exchange", {
      payload: OidcExchangeInput,
      success: Envelope(WorkflowCredential.fields),
      error: [Unauthenticated, ProviderUnavailable]
    }).annotateMerge(
      doc(
        "Exchange a CI OIDC token for a workflow credential",
        "No bearer needed. The JWT's issuer must be trusted and its `repository` must match an active link of the" +
          " project with `oidcEnabled`; any failure of the token is 401 with `details.reason`. A trusted issuer" +
          " whose key set cannot be fetched is 502 `provider_unavailable`."
      )
    ).annotateMerge(requires.none),
    HttpApiEndpoint.get("devJwks", "/dev/oidc/jwks", {
      success: Schema.Struct({ keys: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)) }),
      error: NotFound
    }).annotateMerge(doc("Get the simulator issuer's keys", "Development and test only (404 otherwise)."))
      .annotateMerge(requires.none),
    HttpApiEndpoint.post("devToken", "/dev/oidc/token", {
      payload: DevOidcTokenInput,
      success: Envelope({ token: Schema.String }),
      error: NotFound
    }).annotateMerge(
      doc(
        "Mint a simulator OIDC token",
        "Development and test only (404 otherwise); `iss`, `aud`, `iat`, `nbf` and `exp` are filled in unless given."
      )
    ).annotateMerge(requires.none)
  )
  .annotateMerge(OpenApi.annotations({ title: "Workflow credentials", description: "CI OIDC token exchange" }))
{}
