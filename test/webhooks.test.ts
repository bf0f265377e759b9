/**
 * Webhooks end to end over real HTTP (spec: Webhooks, Events; webhooks.md §1–§4; contract §4 signature): every route
 * with its error cases, and delivery to a real local HTTPS receiver whose certificate comes from a throwaway CA the
 * server trusts only through `NODE_EXTRA_CA_CERTS`. Receivers that answer 500, 301 or 410, hang or reset are
 * recorded with the `failureReason` of webhooks.md §3. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is
 * set.
 */
import { DeliveryAttempt, EndpointStats, Organization, WebhookEndpoint, WebhookSubscription } from "@cp/domain"
import { verifySignature } from "@cp/server/webhooks/rules"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs, printed } from "./support/cli.ts"
import { failed, invalidFields, ok, type Res, wire } from "./support/envelope.ts"
import { makeTestCa, type Receiver, startReceiver } from "./support/httpsReceiver.ts"
import { call, sqlBackends, TestServer, testServer, testServerOver } from "./support/server.ts"
import { createProject, freshEmail, signIn } from "./support/session.ts"

const ca = makeTestCa()

const endpointOf = (res: Res) => ok(res, { endpoint: WebhookEndpoint }).endpoint
const subscriptionOf = (res: Res) => ok(res, { subscription: WebhookSubscription }).subscription
const attemptOf = (res: Res) => ok(res, { deliveryAttempt: DeliveryAttempt }).deliveryAttempt
const attemptsOf = (res: Res) => ok(res, { deliveryAttempts: Schema.Array(DeliveryAttempt) }).deliveryAttempts
const RotateAnswer = {
  endpoint: WebhookEndpoint,
  secret: Schema.String,
  previousSecretExpiresAt: Schema.NullOr(Schema.String),
  gracePeriodSeconds: Schema.Number
}

/** A signed-in owner and its `Personal` workspace; `api` calls as that owner. */
const newOwner = Effect.gen(function*() {
  const { baseUrl } = yield* TestServer
  const session = yield* signIn(baseUrl, { email: freshEmail("hooks") })
  const [personal] = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }), {
    organizations: Schema.Array(Organization)
  }).organizations
  assert.isDefined(personal)
  const orgId = personal.id
  const api = (method: string, path: string, body?: unknown) =>
    call(baseUrl, method, `/v1/organizations/${orgId}${path}`, {
      token: session.token,
      ...(body === undefined ? {} : { body })
    })
  return { baseUrl, token: session.token, orgId, api }
})

type Api = Effect.Success<typeof newOwner>["api"]

/** Polls the endpoint's attempts until `done` holds for them (the worker runs in the background). */
const attemptsUntil = (
  api: Api,
  endpointId: string,
  done: (attempts: ReadonlyArray<typeof DeliveryAttempt.Encoded>) => boolean
) =>
  Effect.gen(function*() {
    for (let round = 0; round < 300; round++) {
      const attempts = attemptsOf(yield* api("GET", `/webhooks/endpoints/${endpointId}/delivery-attempts`))
      if (done(attempts)) return attempts
      yield* Effect.sleep("100 millis")
    }
    return yield* Effect.die(new Error(`attempts of ${endpointId} never reached the expected state`))
  })

/** An endpoint at `url` subscribed to `eventType`, and its secret (from the first rotation). */
const subscribed = (api: Api, url: string, eventType = "project.*") =>
  Effect.gen(function*() {
    const endpoint = endpointOf(yield* api("POST", "/webhooks/endpoints", { url, name: "receiver" }))
    const { secret } = ok(yield* api("POST", `/webhooks/endpoints/${endpoint.id}/rotate-secret`), RotateAnswer)
    subscriptionOf(yield* api("POST", "/webhooks/subscriptions", { endpointId: endpoint.id, eventType }))
    return { endpoint, secret }
  })

const createProjectIn = (api: Api) =>
  Effect.map(api("POST", "/projects", { name: `P ${Math.random().toString(36).slice(2, 8)}` }), (res) => {
    assert.strictEqual(res.status, 200, res.text)
  })

const receivedAt = (receiver: Receiver, path: string) => receiver.received.filter((r) => r.path === path)

for (const backend of sqlBackends) {
  layer(
    Layer.merge(
      testServerOver(databaseLayer(backend), {
        NODE_EXTRA_CA_CERTS: ca.caFile,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: "1"
      }),
      NodeServices.layer
    ),
    { excludeTestServices: true, timeout: 120_000 }
  )(`webhooks [${backend}]`, (it) => {
    it.effect("an event is delivered once, signed, with the catalog body, to a receiver trusted through the CA", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const { api, orgId } = yield* newOwner
        const { endpoint, secret } = yield* subscribed(api, receiver.url("/ok/a"))
        yield* createProjectIn(api)
        const [attempt] = yield* attemptsUntil(api, endpoint.id, (all) => all.some((a) => a.status === "success"))
        assert.isDefined(attempt)
        assert.strictEqual(attempt.eventType, "project.created")
        assert.strictEqual(attempt.attemptNumber, 1)
        assert.strictEqual(attempt.httpStatusCode, 200)
        assert.isNull(attempt.failureReason)
        const [request] = receivedAt(receiver, "/ok/a")
        assert.isDefined(request)
        assert.strictEqual(request.headers["x-webhook-id"], attempt.id)
        assert.strictEqual(request.headers["user-agent"], "Svc-Webhooks/1.0")
        assert.match(String(request.headers["content-type"]), /^application\/json/)
        const signature = String(request.headers["x-webhook-signature"])
        assert.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/)
        assert.isTrue(verifySignature(signature, secret, request.body))
        // The first secret was replaced by the rotation: its signature rides along during the grace window.
        assert.isString(request.headers["x-webhook-signature-previous"])
        const body = JSON.parse(request.body)
        assert.deepStrictEqual(Object.keys(body), ["id", "type", "occurred_at", "data"])
        assert.strictEqual(body.id, attempt.eventId)
        assert.strictEqual(body.type, "project.created")
        assert.strictEqual(body.data.orgId, orgId)
        assert.strictEqual(body.data.actor.type, "user")
        // The delivered attempt is readable by id, and its success is on the stats.
        assert.deepStrictEqual(
          attemptOf(yield* api("GET", `/webhooks/delivery-attempts/${attempt.id}`)),
          attempt
        )
        const { stats } = ok(yield* api("GET", `/webhooks/endpoints/${endpoint.id}/stats`), { stats: EndpointStats })
        assert.strictEqual(stats.success, 1)
        assert.strictEqual(stats.consecutiveFailures, 0)
        assert.strictEqual(stats.window, "24h")
      })))

    it.effect("500, 301 and 410 answers, resets and hangs are recorded with their failureReason", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const { api } = yield* newOwner
        const cases = [
          { path: "/fail/x", reason: "http_500", status: "retrying" },
          { path: "/redirect/x", reason: "redirect", status: "retrying" },
          { path: "/reset/x", reason: "connection_error", status: "retrying" },
          { path: "/hang/x", reason: "timeout", status: "retrying" },
          { path: "/gone/x", reason: "http_410", status: "failed" }
        ] as const
        const endpoints = []
        for (const c of cases) endpoints.push({ ...c, ...(yield* subscribed(api, receiver.url(c.path))) })
        yield* createProjectIn(api)
        for (const c of endpoints) {
          const [attempt] = yield* attemptsUntil(api, c.endpoint.id, (all) => all.some((a) => a.failureReason !== null))
          assert.isDefined(attempt)
          assert.strictEqual(attempt.failureReason, c.reason, c.path)
          assert.strictEqual(attempt.status, c.status, c.path)
          assert.strictEqual(attempt.attemptNumber, 1)
          if (c.status === "retrying") assert.isString(attempt.nextRetryAt)
          else assert.isNull(attempt.nextRetryAt)
        }
        // 410 Gone disabled its endpoint at once; a redirect was not followed.
        const gone = endpoints.find((c) => c.path === "/gone/x")
        assert.isDefined(gone)
        const disabled = endpointOf(yield* api("GET", `/webhooks/endpoints/${gone.endpoint.id}`))
        assert.strictEqual(disabled.status, "disabled")
        assert.strictEqual(disabled.disabledReason, "gone")
        assert.strictEqual(receivedAt(receiver, "/elsewhere").length, 0)
      })))

    it.effect("test sends a synthetic signed event and answers after the first try", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const { api } = yield* newOwner
        const { endpoint, secret } = yield* subscribed(api, receiver.url("/ok/test"))
        const attempt = attemptOf(yield* api("POST", `/webhooks/endpoints/${endpoint.id}/test`, {}))
        assert.strictEqual(attempt.status, "success")
        assert.strictEqual(attempt.eventType, "webhook.test")
        const [request] = receivedAt(receiver, "/ok/test")
        assert.isDefined(request)
        assert.isTrue(verifySignature(String(request.headers["x-webhook-signature"]), secret, request.body))
        assert.strictEqual(JSON.parse(request.body).type, "webhook.test")
      })))

    it.effect("replay sends the original body again as a new attempt; recover replays failed attempts once", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const { api } = yield* newOwner
        const { endpoint } = yield* subscribed(api, receiver.url("/ok/replay"))
        yield* createProjectIn(api)
        const [first] = yield* attemptsUntil(api, endpoint.id, (all) => all.some((a) => a.status === "success"))
        assert.isDefined(first)
        const replay = attemptOf(yield* api("POST", `/webhooks/delivery-attempts/${first.id}/replay`))
        assert.notStrictEqual(replay.id, first.id)
        assert.strictEqual(replay.attemptNumber, 1)
        assert.strictEqual(replay.eventId, first.eventId)
        yield* attemptsUntil(api, endpoint.id, (all) => all.filter((a) => a.status === "success").length === 2)
        const bodies = receivedAt(receiver, "/ok/replay").map((r) => r.body)
        assert.strictEqual(bodies.length, 2)
        assert.strictEqual(bodies[0], bodies[1])
        // Nothing failed, so recover replays nothing.
        const since = new Date(Date.now() - 3_600_000).toISOString()
        assert.deepStrictEqual(
          ok(yield* api("POST", `/webhooks/endpoints/${endpoint.id}/recover`, { since }), { replayed: Schema.Number }),
          { replayed: 0 }
        )
      })))

    it.effect("bad URLs, unknown event types, duplicates and limits answer their 4xx envelope", () =>
      Effect.gen(function*() {
        const { api } = yield* newOwner
        for (const url of ["http://example.com/hook", "https://user:pw@example.com/hook", "not a url"]) {
          const fields = invalidFields(yield* api("POST", "/webhooks/endpoints", { url }))
          assert.property(fields, "url", url)
        }
        const endpoint = endpointOf(yield* api("POST", "/webhooks/endpoints", { url: "https://127.0.0.1:9/h" }))
        assert.strictEqual(endpoint.status, "active")
        assert.strictEqual(endpoint.secretVersion, 1)
        assert.notProperty(endpoint, "secret")
        for (const eventType of ["nope.created", "project", "proj*", "nope.*", ""]) {
          const res = yield* api("POST", "/webhooks/subscriptions", { endpointId: endpoint.id, eventType })
          assert.property(invalidFields(res), "eventType", eventType)
        }
        subscriptionOf(yield* api("POST", "/webhooks/subscriptions", { endpointId: endpoint.id, eventType: "*" }))
        failed(
          yield* api("POST", "/webhooks/subscriptions", { endpointId: endpoint.id, eventType: "*" }),
          409,
          "conflict"
        )
        const since = new Date(Date.now() - 15 * 86_400_000).toISOString()
        const recover = yield* api("POST", `/webhooks/endpoints/${endpoint.id}/recover`, { since })
        assert.property(invalidFields(recover), "since")
        for (let i = 1; i < 20; i++) {
          endpointOf(yield* api("POST", "/webhooks/endpoints", { url: `https://127.0.0.1:9/h${i}` }))
        }
        const over = failed(
          yield* api("POST", "/webhooks/endpoints", { url: "https://127.0.0.1:9/h20" }),
          412,
          "precondition_failed"
        )
        assert.strictEqual(over.details["limit"], 20)
      }))

    it.effect("another workspace's endpoint, subscription and attempt are not found", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const owner = yield* newOwner
        const other = yield* newOwner
        const { endpoint } = yield* subscribed(owner.api, receiver.url("/ok/iso"))
        yield* createProjectIn(owner.api)
        const [attempt] = yield* attemptsUntil(owner.api, endpoint.id, (all) => all.length > 0)
        assert.isDefined(attempt)
        const subscriptions = ok(yield* owner.api("GET", `/webhooks/endpoints/${endpoint.id}/subscriptions`), {
          subscriptions: Schema.Array(WebhookSubscription)
        }).subscriptions
        const [subscription] = subscriptions
        assert.isDefined(subscription)
        failed(
          yield* other.api("POST", "/webhooks/subscriptions", { endpointId: endpoint.id, eventType: "*" }),
          404,
          "not_found"
        )
        failed(yield* other.api("POST", `/webhooks/delivery-attempts/${attempt.id}/replay`), 404, "not_found")
        failed(yield* other.api("GET", `/webhooks/delivery-attempts/${attempt.id}`), 404, "not_found")
        failed(yield* other.api("GET", `/webhooks/endpoints/${endpoint.id}`), 404, "not_found")
        failed(yield* other.api("GET", `/webhooks/subscriptions/${subscription.id}`), 404, "not_found")
        failed(yield* other.api("DELETE", `/webhooks/endpoints/${endpoint.id}`), 404, "not_found")
      })))

    it.effect("update, disable, enable, subscription toggles, delete; project endpoints take only their project", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const { api, baseUrl, orgId, token } = yield* newOwner
        const projectA = yield* createProject(baseUrl, token, orgId)
        const projectB = yield* createProject(baseUrl, token, orgId)
        const created = endpointOf(
          yield* api("POST", `/projects/${projectA}/webhooks/endpoints`, { url: receiver.url("/ok/proj") })
        )
        assert.strictEqual(created.projectId, projectA)
        const subscription = subscriptionOf(
          yield* api("POST", "/webhooks/subscriptions", { endpointId: created.id, eventType: "environment.created" })
        )
        yield* api("POST", `/projects/${projectB}/environments`, { name: "B env" })
        yield* api("POST", `/projects/${projectA}/environments`, { name: "A env" })
        const [only] = yield* attemptsUntil(api, created.id, (all) => all.some((a) => a.status === "success"))
        assert.isDefined(only)
        assert.strictEqual(JSON.parse(receivedAt(receiver, "/ok/proj")[0]?.body ?? "{}").data.projectId, projectA)
        assert.strictEqual(receivedAt(receiver, "/ok/proj").length, 1)
        const listed = ok(yield* api("GET", `/projects/${projectA}/webhooks/endpoints`), {
          endpoints: Schema.Array(WebhookEndpoint)
        }).endpoints
        assert.deepStrictEqual(listed.map((e) => e.id), [created.id])
        const updated = endpointOf(
          yield* api("PATCH", `/webhooks/endpoints/${created.id}`, { name: "renamed", description: "d" })
        )
        assert.strictEqual(updated.name, "renamed")
        assert.strictEqual(updated.url, created.url)
        const disabled = endpointOf(
          yield* api("POST", `/webhooks/endpoints/${created.id}/disable`, { reason: "maintenance" })
        )
        assert.strictEqual(disabled.status, "disabled")
        assert.strictEqual(disabled.disabledReason, "maintenance")
        const enabled = endpointOf(yield* api("POST", `/webhooks/endpoints/${created.id}/enable`))
        assert.strictEqual(enabled.status, "active")
        assert.isNull(enabled.disabledReason)
        const off = subscriptionOf(
          yield* api("PATCH", `/webhooks/subscriptions/${subscription.id}`, { enabled: false })
        )
        assert.isFalse(off.enabled)
        subscriptionOf(yield* api("DELETE", `/webhooks/subscriptions/${subscription.id}`))
        failed(yield* api("GET", `/webhooks/subscriptions/${subscription.id}`), 404, "not_found")
        endpointOf(yield* api("DELETE", `/webhooks/endpoints/${created.id}`))
        failed(yield* api("GET", `/webhooks/endpoints/${created.id}`), 404, "not_found")
        failed(yield* api("GET", `/webhooks/delivery-attempts/${only.id}`), 404, "not_found")
      })))

    it.effect("cpctl webhooks: create, rotate-secret, subscribe, test, list, replay, recover, disable, delete", () =>
      Effect.scoped(Effect.gen(function*() {
        const receiver = yield* startReceiver(ca)
        const { baseUrl, orgId, token } = yield* newOwner
        const run = (...args: Array<string>) =>
          Effect.map(cpctlAs(baseUrl, token, "--json", "webhooks", ...args, "--workspace", orgId), (result) => {
            assert.strictEqual(result.exitCode, 0, result.stderr)
            return result
          })
        const endpoint = wire(
          WebhookEndpoint,
          JSON.parse((yield* run("endpoints", "create", receiver.url("/ok/cli"), "--name", "cli")).stdout)
        )
        const { secret } = printed(yield* run("endpoints", "rotate-secret", endpoint.id), RotateAnswer)
        assert.match(secret, /^whsec_[0-9a-f]{32}$/)
        wire(WebhookSubscription, JSON.parse((yield* run("subscriptions", "create", endpoint.id, "project.*")).stdout))
        const tested = wire(
          DeliveryAttempt,
          JSON.parse((yield* run("test", endpoint.id, "--event-type", "cli.ping")).stdout)
        )
        assert.strictEqual(tested.status, "success")
        assert.strictEqual(tested.eventType, "cli.ping")
        const listed = wire(
          Schema.Array(DeliveryAttempt),
          JSON.parse((yield* run("attempts", "list", endpoint.id)).stdout)
        )
        assert.deepStrictEqual(listed.map((a) => a.id), [tested.id])
        const replayed = wire(DeliveryAttempt, JSON.parse((yield* run("attempts", "replay", tested.id)).stdout))
        assert.strictEqual(replayed.eventId, tested.eventId)
        const since = new Date(Date.now() - 60_000).toISOString()
        const recovered = printed(yield* run("recover", endpoint.id, "--since", since), { replayed: Schema.Number })
        assert.deepStrictEqual(recovered, { replayed: 0 })
        const disabled = wire(
          WebhookEndpoint,
          JSON.parse((yield* run("endpoints", "disable", endpoint.id, "--reason", "cli")).stdout)
        )
        assert.strictEqual(disabled.disabledReason, "cli")
        wire(WebhookEndpoint, JSON.parse((yield* run("endpoints", "delete", endpoint.id, "--yes")).stdout))
        const gone = yield* cpctlAs(baseUrl, token, "webhooks", "endpoints", "get", endpoint.id, "--workspace", orgId)
        assert.notStrictEqual(gone.exitCode, 0)
        assert.match(gone.stderr, /error not_found/)
      })))
  })
}

layer(testServer("memory"), { excludeTestServices: true, timeout: 60_000 })(
  "webhooks without private networks",
  (it) => {
    it.effect("a URL resolving to a loopback or private address is refused with 422 on url", () =>
      Effect.gen(function*() {
        const { api } = yield* newOwner
        for (const url of ["https://127.0.0.1/h", "https://10.1.2.3/h", "https://[::1]/h", "https://localhost/h"]) {
          assert.property(invalidFields(yield* api("POST", "/webhooks/endpoints", { url })), "url", url)
        }
      }))
  }
)
