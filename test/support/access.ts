/** Reads an effective-access answer (`GET …/effective-access`): its decisions, one per permission. */
import { PermissionDecision } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Schema } from "effect"
import { ok, type Res } from "./envelope.ts"

/** Every decision of the answer, checked against the domain's `PermissionDecision`. */
export const decisionsOf = (res: Res) => ok(res, { permissions: Schema.Array(PermissionDecision) }).permissions

/** The decisions of the answer by action; looking up an action the answer does not list fails the test. */
export const decisionByAction = (res: Res) => {
  const byAction = new Map(decisionsOf(res).map((decision) => [decision.action, decision]))
  return (action: typeof PermissionDecision.Encoded["action"]) => {
    const decision = byAction.get(action)
    assert.isDefined(decision, `no decision for ${action}`)
    return decision
  }
}
