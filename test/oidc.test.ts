/**
 * The OIDC exchange end to end (run-state.md §1 "Workflow credentials", §8; spec: Authentication 7): the simulator
 * issuer under `/dev/oidc` signs CI tokens; an exchange answers a workflow credential of at most 15 minutes whose actor
 * holds the project_builder set in its project only; every refusal is 401 `unauthenticated` with its `details.reason`.
 */
import { CliLink, Project, Run, WorkflowCredential } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { monotonicFactory } from "ulid"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok } from "./support/envelope.ts"
import { oidcLinkedProject, oidcRefusal } from "./support/oidcLink.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const ulid = monotonicFactory()

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `oidc exchange [${backend}]`,
    (it) => {
      /** The linked project, and a simulator token with its repository's claims (plus `extra`). */
      const linked = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const setting = yield* oidcLinkedProject(baseUrl)
        const mint = (extra: Record<string, unknown> = {}, expiresInSeconds?: number) =>
          Effect.map(
            call(baseUrl, "POST", "/dev/oidc/token", {
              body: {
                claims: { ...setting.claims, ...extra },
                ...(expiresInSeconds === undefined ? {} : { expiresInSeconds })
              }
            }),
            (res) => ok(res, { token: Schema.String }).token
          )
        return { ...setting, mint }
      })

      const refusal = oidcRefusal

      it.effect("an exchange mints a workflow credential; its actor builds in its project and nowhere else", () =>
        Effect.gen(function*() {
          const { baseUrl, claims, exchange, link, mint, orgId, token } = yield* linked
          const jwks = yield* call(baseUrl, "GET", "/dev/oidc/jwks")
          assert.strictEqual(jwks.status, 200)
          assert.deepStrictEqual(Object.keys(jwks.json as object), ["keys"])
          const credential = ok(yield* exchange(yield* mint()), WorkflowCredential.fields)
          assert.strictEqual(credential.tokenType, "Bearer")
          assert.deepStrictEqual(credential.actor, {
            kind: "workflow",
            subject: claims.sub,
            orgId,
            projectId: link.projectId
          })
          const lifetime = new Date(credential.expiresAt).getTime() - Date.now()
          assert.isAtMost(lifetime, 5 * 60 * 1000 + 1000, "never past the JWT's exp (300 s by default)")
          const long = ok(yield* exchange(yield* mint({}, 3600)), WorkflowCredential.fields)
          assert.isAtMost(new Date(long.expiresAt).getTime() - Date.now(), 15 * 60 * 1000 + 1000, "at most 15 min")
          const as = (method: string, path: string, body?: unknown) =>
            call(baseUrl, method, `/v1/organizations/${orgId}${path}`, {
              token: credential.token,
              ...(body === undefined ? {} : { body })
            })
          const run = ok(
            yield* as("POST", `/projects/${link.projectId}/state/runs`, { runId: ulid(), jobs: [{ jobId: "a" }] }),
            { run: Run }
          ).run
          assert.deepStrictEqual(run.createdBy, { id: claims.sub, kind: "workflow" })
          ok(yield* as("GET", `/projects/${link.projectId}`), { project: Project })
          // Another project of the same workspace, and workspace-level permissions: refused.
          const other = yield* createProject(baseUrl, token, orgId)
          failed(yield* as("GET", `/projects/${other}/state/runs`), 403, "forbidden")
          failed(yield* as("GET", "/projects"), 403, "forbidden")
          failed(yield* as("POST", "/cli/links", { remoteUrl: "https://github.com/a/b" }), 403, "forbidden")
          // Another workspace is not there at all.
          const stranger = yield* signInWithPersonal(baseUrl, "oidc")
          failed(
            yield* call(baseUrl, "GET", `/v1/organizations/${stranger.personal.id}/projects`, {
              token: credential.token
            }),
            404,
            "not_found"
          )
          // The link was seen.
          const links = ok(
            yield* call(baseUrl, "GET", `/v1/organizations/${orgId}/cli/links`, { token }),
            { links: Schema.Array(CliLink) }
          ).links
          assert.isString(links[0]?.lastSeenAt)
        }))

      it.effect("every refusal is 401 with its reason", () =>
        Effect.gen(function*() {
          const { baseUrl, exchange, mint, orgId, token } = yield* linked
          yield* refusal(yield* exchange(yield* mint({ iss: "https://untrusted.example" })), "issuer_not_trusted")
          const good = yield* mint()
          const tampered = `${good.slice(0, good.lastIndexOf(".") + 1)}${"A".repeat(86)}`
          yield* refusal(yield* exchange(tampered), "signature")
          yield* refusal(yield* exchange("not-a-jwt"), "signature")
          yield* refusal(yield* exchange(yield* mint({ aud: "https://someone-else.example" })), "signature")
          yield* refusal(yield* exchange(yield* mint({}, -60)), "expired")
          yield* refusal(yield* exchange(yield* mint({ repository: "acme/other" })), "no_link")
          yield* refusal(yield* exchange(yield* mint({ ref: "refs/tags/v1" })), "ref_not_allowed")
          yield* refusal(yield* exchange(yield* mint({ environment: "staging" })), "environment_not_allowed")
          const otherProject = yield* createProject(baseUrl, token, orgId)
          yield* refusal(yield* exchange(good, otherProject), "no_link")
          // Without `environment` the environment list does not apply.
          const noEnvironment = yield* mint({ environment: undefined })
          ok(yield* exchange(noEnvironment), WorkflowCredential.fields)
        }))

      it.effect("a link without oidcEnabled admits no workflow; unlinking ends the admission", () =>
        Effect.gen(function*() {
          const { baseUrl, exchange, link, mint, orgId, token } = yield* linked
          const patch = (oidcEnabled: boolean) =>
            call(baseUrl, "PATCH", `/v1/organizations/${orgId}/projects/${link.projectId}/cli/links/${link.id}`, {
              token,
              body: { ciSettings: { oidcEnabled } }
            })
          ok(yield* patch(false))
          yield* refusal(yield* exchange(yield* mint()), "no_link")
          ok(yield* patch(true))
          ok(yield* exchange(yield* mint()), WorkflowCredential.fields)
          ok(
            yield* call(
              baseUrl,
              "DELETE",
              `/v1/organizations/${orgId}/projects/${link.projectId}/cli/links/${link.id}`,
              {
                token
              }
            )
          )
          yield* refusal(yield* exchange(yield* mint()), "no_link")
        }))
    }
  )
}
