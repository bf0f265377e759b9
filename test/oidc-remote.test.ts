/**
 * The OIDC exchange against issuers configured through `CI_OIDC_ISSUERS` (run-state.md §1 "Workflow credentials"):
 * the server fetches each issuer's key set over real HTTP from a test-owned issuer on 127.0.0.1, which signs tokens
 * with `jose`. A good exchange, every refusal reason on that path, key rotation (a token under a new key id is admitted
 * once the server refetches the key set, at most `JWKS_COOLDOWN_MS` after its last fetch), and issuers whose key set
 * cannot be had (nothing listening, a 500, a document that is not a key set): 502 `provider_unavailable`.
 */
import { WorkflowCredential } from "@cp/domain"
import { JWKS_COOLDOWN_MS } from "@cp/server/runs/oidc"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok } from "./support/envelope.ts"
import { closedPort, type OidcIssuerServer, startOidcIssuer } from "./support/oidcIssuer.ts"
import { oidcLinkedProject, oidcRefusal } from "./support/oidcLink.ts"
import { sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject } from "./support/session.ts"

const ISSUER = "https://ci.remote.test"
const AUDIENCE = "https://control-plane.remote.test"
const DOWN = "https://down.remote.test"
const BROKEN = "https://broken.remote.test"
const GARBAGE = "https://garbage.remote.test"

class Issuer extends Context.Service<Issuer, OidcIssuerServer>()("test/Issuer") {}

/** The issuer first, then the server configured to trust it (and three issuers whose key sets cannot be had). */
const suiteLayer = (backend: (typeof sqlBackends)[number]) =>
  Layer.unwrap(Effect.gen(function*() {
    const { origin } = yield* Issuer
    const nothing = yield* closedPort
    const issuers = [
      { issuer: ISSUER, jwksUrl: `${origin}/jwks`, audience: AUDIENCE },
      { issuer: DOWN, jwksUrl: `http://127.0.0.1:${nothing}/jwks`, audience: AUDIENCE },
      { issuer: BROKEN, jwksUrl: `${origin}/broken`, audience: AUDIENCE },
      { issuer: GARBAGE, jwksUrl: `${origin}/garbage`, audience: AUDIENCE }
    ]
    return testServerOver(databaseLayer(backend), { CI_OIDC_ISSUERS: JSON.stringify(issuers) })
  })).pipe(Layer.provideMerge(Layer.effect(Issuer, startOidcIssuer)), Layer.merge(NodeServices.layer))

const realSleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

for (const backend of sqlBackends) {
  layer(suiteLayer(backend), { excludeTestServices: true })(`oidc exchange, remote issuer [${backend}]`, (it) => {
    const linked = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const issuer = yield* Issuer
      const setting = yield* oidcLinkedProject(baseUrl)
      const sign = (extra: Record<string, unknown> = {}, options: Parameters<typeof issuer.sign>[1] = {}) =>
        Effect.promise(() => issuer.sign({ iss: ISSUER, aud: AUDIENCE, ...setting.claims, ...extra }, options))
      return { ...setting, issuer, sign }
    })

    it.effect("a token of the configured issuer, verified against its fetched key set, is exchanged", () =>
      Effect.gen(function*() {
        const { claims, exchange, issuer, link, orgId, sign } = yield* linked
        const credential = ok(yield* exchange(yield* sign()), WorkflowCredential.fields)
        assert.deepStrictEqual(credential.actor, {
          kind: "workflow",
          subject: claims.sub,
          orgId,
          projectId: link.projectId
        })
        assert.isAtLeast(issuer.fetches(), 1, "the key set came over HTTP")
        // The key set is cached: another exchange under the same key fetches nothing.
        const fetched = issuer.fetches()
        ok(yield* exchange(yield* sign()), WorkflowCredential.fields)
        assert.strictEqual(issuer.fetches(), fetched)
      }))

    it.effect("every refusal reason on the remote path is 401 with its reason", () =>
      Effect.gen(function*() {
        const { baseUrl, exchange, orgId, sign, token } = yield* linked
        yield* oidcRefusal(yield* exchange(yield* sign({ iss: "https://elsewhere.remote.test" })), "issuer_not_trusted")
        yield* oidcRefusal(yield* exchange(yield* sign({}, { forged: true })), "signature")
        yield* oidcRefusal(yield* exchange(yield* sign({ aud: "https://someone-else.test" })), "signature")
        yield* oidcRefusal(yield* exchange(yield* sign({}, { expiresInSeconds: -60 })), "expired")
        const now = Math.floor(Date.now() / 1000)
        yield* oidcRefusal(yield* exchange(yield* sign({ nbf: now + 600 })), "expired")
        yield* oidcRefusal(yield* exchange(yield* sign({ repository: "acme/other" })), "no_link")
        yield* oidcRefusal(yield* exchange(yield* sign(), yield* createProject(baseUrl, token, orgId)), "no_link")
        yield* oidcRefusal(yield* exchange(yield* sign({ ref: "refs/tags/v1" })), "ref_not_allowed")
        yield* oidcRefusal(yield* exchange(yield* sign({ environment: "staging" })), "environment_not_allowed")
      }))

    it.effect("after a key rotation a token under the new key id is admitted once the key set is fetched again", () =>
      Effect.gen(function*() {
        const { exchange, issuer, sign } = yield* linked
        const before = yield* sign()
        ok(yield* exchange(before), WorkflowCredential.fields)
        const fetched = issuer.fetches()
        yield* Effect.promise(() => issuer.rotate())
        // Past the cooldown since the last fetch, the unknown key id makes the server fetch the key set again.
        yield* realSleep(JWKS_COOLDOWN_MS + 200)
        const rotated = yield* sign()
        ok(yield* exchange(rotated), WorkflowCredential.fields)
        assert.strictEqual(issuer.fetches(), fetched + 1)
        // The withdrawn key no longer verifies anything.
        yield* oidcRefusal(yield* exchange(before), "signature")
      }))

    it.effect("an issuer whose key set cannot be fetched is 502 provider_unavailable, never a refusal", () =>
      Effect.gen(function*() {
        const { exchange, sign } = yield* linked
        for (const iss of [DOWN, BROKEN, GARBAGE]) {
          const error = failed(yield* exchange(yield* sign({ iss })), 502, "provider_unavailable")
          assert.strictEqual(error.details["issuer"], iss)
        }
      }))
  })
}
