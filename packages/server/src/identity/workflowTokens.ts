/**
 * Workflow bearer tokens: `wfl_` + a token signed with the server's signing key for the `workflow` purpose, carrying
 * the subject, the workspace and project it is bound to, and its expiry (at most 15 minutes). Stateless, so every
 * replica verifies it; it cannot be revoked before it expires, which its short life bounds.
 */
import type { Actor } from "@cp/domain"
import { OrgId, ProjectId } from "@cp/domain"
import { Option, Schema } from "effect"
import type { KeyObject } from "node:crypto"
import { signToken, verifyToken } from "../platform/crypto.ts"

export const WORKFLOW_TOKEN_PREFIX = "wfl_"
const PURPOSE = "workflow"

const Payload = Schema.Struct({ sub: Schema.String, org: OrgId, prj: ProjectId, exp: Schema.Number })
const decodePayload = Schema.decodeUnknownOption(Payload)

/** Signs a workflow token for the actor, valid until `expiresAt`. */
export const signWorkflowToken = (
  key: KeyObject,
  actor: Actor & { readonly kind: "workflow" },
  expiresAt: Date
): string =>
  WORKFLOW_TOKEN_PREFIX +
  signToken(key, PURPOSE, { sub: actor.subject, org: actor.orgId, prj: actor.projectId, exp: expiresAt.getTime() })

/** The workflow actor of a token that verifies and has not expired at `now`; None for anything else. */
export const parseWorkflowToken = (key: KeyObject, token: string, now: number): Option.Option<Actor> => {
  if (!token.startsWith(WORKFLOW_TOKEN_PREFIX)) return Option.none()
  return decodePayload(verifyToken(key, PURPOSE, token.slice(WORKFLOW_TOKEN_PREFIX.length))).pipe(
    Option.filter((payload) => payload.exp > now),
    Option.map((payload): Actor => ({
      kind: "workflow",
      subject: payload.sub,
      orgId: payload.org,
      projectId: payload.prj
    }))
  )
}
