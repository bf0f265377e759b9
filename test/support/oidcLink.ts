/**
 * The setting of an OIDC exchange test: an owner whose project has an OIDC-enabled link to `Acme/<repo>` admitting
 * `refs/heads/*` and the `production` environment, the claims a CI token of that repository carries, and the exchange
 * call (no bearer).
 */
import { CliLink } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { failed, ok, type Res } from "./envelope.ts"
import { call } from "./server.ts"
import { signInWithPersonal } from "./session.ts"

export const oidcLinkedProject = (baseUrl: string) =>
  Effect.gen(function*() {
    const user = yield* signInWithPersonal(baseUrl, "oidc")
    const orgId = user.personal.id
    const repo = `repo-${randomUUID().slice(0, 8)}`
    const link = ok(
      yield* call(baseUrl, "POST", `/v1/organizations/${orgId}/cli/links`, {
        token: user.token,
        body: {
          remoteUrl: `git@github.com:Acme/${repo}.git`,
          ciSettings: { oidcEnabled: true, allowedRefPattern: "refs/heads/*", allowedEnvironments: ["production"] }
        }
      }),
      { link: CliLink }
    ).link
    const claims = {
      sub: `repo:Acme/${repo}:ref:refs/heads/main`,
      repository: `acme/${repo.toUpperCase()}`,
      ref: "refs/heads/main",
      environment: "production"
    }
    const exchange = (token: string, projectId = link.projectId) =>
      call(baseUrl, "POST", "/v1/auth/oidc/exchange", { body: { token, orgId, projectId } })
    return { ...user, orgId, link, claims, exchange, baseUrl }
  })

/** Asserts a 401 `unauthenticated` refusal with this `details.reason`. */
export const oidcRefusal = (res: Res, reason: string) =>
  Effect.sync(() => assert.strictEqual(failed(res, 401, "unauthenticated").details["reason"], reason))
