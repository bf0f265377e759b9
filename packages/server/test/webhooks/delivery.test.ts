/**
 * The delivery worker on memory repositories under `TestClock`, with a scripted sender in place of HTTPS: every step
 * of the retry schedule and its jitter bounds, the terminal fifth failure, auto-disable after five terminal failures
 * in a row (and its reset by a success), 410 disabling at once, disabled endpoints sending nothing, lifecycle events on
 * the log but never fanned out, and the previous secret's signature only within the grace window.
 */
import type { Actor, ResolvedWorkspace, WebhookEndpointId } from "@cp/domain"
import { type DeliveryRow, EventLogRepo, WebhookDeliveriesRepo, WebhookEndpointsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { HttpClientRequest, HttpClientResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { eventActorOf, EventLog } from "../../src/platform/events.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import {
  DestinationGuard,
  type OutboundRequest,
  responseText,
  type SendResult,
  WebhookSender,
  WebhookWorker
} from "../../src/webhooks/delivery.ts"
import {
  BACKOFF_SECONDS,
  GRACE_PERIOD_SECONDS,
  RESPONSE_READ_LIMIT,
  verifySignature
} from "../../src/webhooks/rules.ts"
import { WebhooksService } from "../../src/webhooks/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesLayer, userActor } from "../support/services.ts"

/** What the scripted receiver answers, by URL; and every request it got. */
const answers = new Map<string, SendResult>()
const sent: Array<OutboundRequest> = []
const ScriptedSender = Layer.succeed(WebhookSender)({
  send: (request) =>
    Effect.sync(() => {
      sent.push(request)
      return answers.get(request.url) ?? { _tag: "Answered", status: 200, body: "ok" }
    })
})

const TestLayer = WebhooksService.layer.pipe(
  Layer.provideMerge(WebhookWorker.layer),
  Layer.provideMerge(Layer.mergeAll(ScriptedSender, DestinationGuard.layer)),
  Layer.provideMerge(areaServicesLayer)
)

let urls = 0

/** A workspace with one endpoint (subscribed to `*`) answering `answer`. */
const setup = (answer: SendResult = { _tag: "Answered", status: 200, body: "ok" }) =>
  Effect.gen(function*() {
    const actor = userActor()
    const { organization } = yield* (yield* WorkspacesService).create(actor, {
      name: `Hooks ${actor.userId.slice(-6)}`
    })
    const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
    const webhooks = yield* WebhooksService
    const url = `https://192.0.2.${++urls % 250}/hook-${urls}`
    answers.set(url, answer)
    const { endpoint } = yield* webhooks.createEndpoint(actor, workspace, null, { url })
    yield* webhooks.createSubscription(actor, workspace, { endpointId: endpoint.id, eventType: "*" })
    return { actor, workspace, endpointId: endpoint.id, url }
  })

/** An event of the workspace, as an area writes it (its outbox rows with it). */
const emit = (actor: Actor, workspace: ResolvedWorkspace, type = "project.created") =>
  Effect.flatMap(EventLog, (events) =>
    events.record({
      orgId: workspace.organization.id,
      type,
      actor: eventActorOf(actor),
      subject: { kind: "project", id: "prj_x", name: null },
      data: { name: "x" },
      description: "test event"
    }))

const attemptsOf = (endpointId: WebhookEndpointId) =>
  Effect.flatMap(WebhookDeliveriesRepo, (repo) => repo.list({ endpointId, limit: 100 }))

const onlyAttempt = (endpointId: WebhookEndpointId) =>
  Effect.map(attemptsOf(endpointId), (rows): DeliveryRow => {
    assert.strictEqual(rows.length, 1)
    const [row] = rows
    if (row === undefined) throw new Error("no attempt")
    return row
  })

const runOnce = Effect.flatMap(WebhookWorker, (worker) => worker.runOnce)

const endpointRow = (workspace: ResolvedWorkspace, endpointId: WebhookEndpointId) =>
  Effect.map(
    Effect.flatMap(WebhookEndpointsRepo, (repo) => repo.find({ orgId: workspace.organization.id, endpointId })),
    Option.getOrThrow
  )

const logTypes = (workspace: ResolvedWorkspace) =>
  Effect.map(
    Effect.flatMap(EventLogRepo, (repo) => repo.listEvents({ orgId: workspace.organization.id })),
    (events) => events.map((event) => event.type)
  )

/** Moves the clock to the attempt's `nextRetryAt` and runs the worker. */
const untilRetry = (row: DeliveryRow) =>
  Effect.gen(function*() {
    const due = row.nextRetryAt
    if (due === null) throw new Error("no retry scheduled")
    yield* TestClock.setTime(due.getTime())
    return yield* runOnce
  })

describe("WebhookWorker", () => {
  it.effect("retries 30, 120, 480, 1920 s (± 10 %) after each failure; the fifth failure is terminal", () =>
    Effect.gen(function*() {
      const { actor, endpointId, workspace } = yield* setup({ _tag: "Answered", status: 500, body: "boom" })
      yield* emit(actor, workspace)
      assert.strictEqual(yield* runOnce, 1)
      let row = yield* onlyAttempt(endpointId)
      for (const [index, seconds] of BACKOFF_SECONDS.entries()) {
        assert.strictEqual(row.status, "retrying")
        assert.strictEqual(row.attemptNumber, index + 1)
        assert.strictEqual(row.failureReason, "http_500")
        assert.strictEqual(row.httpStatusCode, 500)
        const failedAt = row.updatedAt.getTime()
        const delay = (row.nextRetryAt?.getTime() ?? 0) - failedAt
        assert.isAtLeast(delay, seconds * 900)
        assert.isAtMost(delay, seconds * 1100)
        // Not due yet: nothing is claimed just before the earliest moment the jitter allows.
        yield* TestClock.setTime(failedAt + seconds * 900 - 1)
        assert.strictEqual(yield* runOnce, 0)
        assert.strictEqual(yield* untilRetry(row), 1)
        row = yield* onlyAttempt(endpointId)
      }
      assert.strictEqual(row.status, "failed")
      assert.strictEqual(row.attemptNumber, 5)
      assert.isNull(row.nextRetryAt)
      assert.isNotNull(row.completedAt)
      assert.strictEqual(yield* runOnce, 0)
      const types = yield* logTypes(workspace)
      assert.include(types, "webhook.delivery_failed")
      assert.notInclude(types, "webhook.disabled")
      assert.strictEqual((yield* endpointRow(workspace, endpointId)).consecutiveFailures, 1)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("five terminal failures in a row disable the endpoint; lifecycle events are logged, never delivered", () =>
    Effect.gen(function*() {
      const { actor, endpointId, workspace } = yield* setup({ _tag: "Failed", reason: "connection_error" })
      for (let i = 0; i < 5; i++) yield* emit(actor, workspace)
      assert.strictEqual(yield* runOnce, 5)
      for (const seconds of BACKOFF_SECONDS) {
        yield* TestClock.adjust(`${Math.ceil(seconds * 1.1) + 1} seconds`)
        assert.strictEqual(yield* runOnce, 5)
      }
      const rows = yield* attemptsOf(endpointId)
      assert.deepStrictEqual(
        rows.map((r) => [r.status, r.failureReason]),
        Array(5).fill(["failed", "connection_error"])
      )
      const endpoint = yield* endpointRow(workspace, endpointId)
      assert.strictEqual(endpoint.status, "disabled")
      assert.strictEqual(endpoint.disabledReason, "repeated_delivery_failures")
      const types = yield* logTypes(workspace)
      assert.strictEqual(types.filter((t) => t === "webhook.delivery_failed").length, 5)
      assert.strictEqual(types.filter((t) => t === "webhook.disabled").length, 1)
      // Subscribed to `*`, yet no lifecycle event became a delivery.
      assert.isTrue(rows.every((r) => !r.eventType.startsWith("webhook.")))
      // Deliveries due for a disabled endpoint fail with endpoint_disabled and send nothing.
      const before = sent.length
      yield* emit(actor, workspace)
      assert.strictEqual(yield* runOnce, 1)
      assert.strictEqual(sent.length, before)
      const latest = (yield* attemptsOf(endpointId))[0]
      assert.strictEqual(latest?.status, "failed")
      assert.strictEqual(latest?.failureReason, "endpoint_disabled")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("one success resets the streak of terminal failures", () =>
    Effect.gen(function*() {
      const { actor, endpointId, url, workspace } = yield* setup({ _tag: "Answered", status: 410, body: "" })
      answers.set(url, { _tag: "Answered", status: 503, body: "" })
      const terminal = Effect.gen(function*() {
        yield* emit(actor, workspace)
        yield* runOnce
        for (const seconds of BACKOFF_SECONDS) {
          yield* TestClock.adjust(`${Math.ceil(seconds * 1.1) + 1} seconds`)
          yield* runOnce
        }
      })
      for (let i = 0; i < 4; i++) yield* terminal
      assert.strictEqual((yield* endpointRow(workspace, endpointId)).consecutiveFailures, 4)
      answers.set(url, { _tag: "Answered", status: 204, body: "" })
      yield* emit(actor, workspace)
      yield* runOnce
      assert.strictEqual((yield* endpointRow(workspace, endpointId)).consecutiveFailures, 0)
      answers.set(url, { _tag: "Answered", status: 503, body: "" })
      yield* terminal
      const endpoint = yield* endpointRow(workspace, endpointId)
      assert.strictEqual(endpoint.consecutiveFailures, 1)
      assert.strictEqual(endpoint.status, "active")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("410 Gone fails the attempt and disables the endpoint at once", () =>
    Effect.gen(function*() {
      const { actor, endpointId, workspace } = yield* setup({ _tag: "Answered", status: 410, body: "" })
      yield* emit(actor, workspace)
      yield* runOnce
      const row = yield* onlyAttempt(endpointId)
      assert.strictEqual(row.status, "failed")
      assert.strictEqual(row.failureReason, "http_410")
      assert.isNull(row.nextRetryAt)
      const endpoint = yield* endpointRow(workspace, endpointId)
      assert.strictEqual(endpoint.status, "disabled")
      assert.strictEqual(endpoint.disabledReason, "gone")
      assert.include(yield* logTypes(workspace), "webhook.disabled")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the previous secret signs alongside for 86400 s after a rotation, then no longer", () =>
    Effect.gen(function*() {
      const { actor, url, workspace, endpointId } = yield* setup()
      const webhooks = yield* WebhooksService
      const first = yield* webhooks.rotateSecret(actor, workspace, endpointId)
      const second = yield* webhooks.rotateSecret(actor, workspace, endpointId)
      assert.strictEqual(second.gracePeriodSeconds, GRACE_PERIOD_SECONDS)
      assert.strictEqual(second.endpoint.secretVersion, 3)
      const lastTo = () => sent.filter((r) => r.url === url).at(-1)
      yield* emit(actor, workspace)
      yield* runOnce
      const during = lastTo()
      assert.isDefined(during)
      assert.isTrue(verifySignature(during.headers["x-webhook-signature"] ?? "", second.secret, during.body))
      assert.isTrue(verifySignature(during.headers["x-webhook-signature-previous"] ?? "", first.secret, during.body))
      yield* TestClock.adjust(`${GRACE_PERIOD_SECONDS - 1} seconds`)
      yield* emit(actor, workspace)
      yield* runOnce
      assert.isDefined(lastTo()?.headers["x-webhook-signature-previous"])
      yield* TestClock.adjust("1 second")
      yield* emit(actor, workspace)
      yield* runOnce
      const after = lastTo()
      assert.isDefined(after)
      assert.isUndefined(after.headers["x-webhook-signature-previous"])
      assert.isTrue(verifySignature(after.headers["x-webhook-signature"] ?? "", second.secret, after.body))
    }).pipe(Effect.provide(TestLayer)))
})

describe("reading a receiver's answer", () => {
  const request = HttpClientRequest.post("https://192.0.2.1/hook")
  const answer = (body: string, headers: Record<string, string>) =>
    HttpClientResponse.fromWeb(request, new Response(body, { status: 200, headers }))

  it.effect("a body that declares its length within the limit is read whole", () =>
    Effect.gen(function*() {
      const body = "é".repeat(3000)
      const text = yield* responseText(answer(body, { "content-length": String(Buffer.byteLength(body)) }))
      assert.strictEqual(text, body)
    }))

  /** A body in 16 KiB chunks, as a receiver streams it. */
  const chunked = (body: string) => {
    const bytes = new TextEncoder().encode(body)
    let at = 0
    return new ReadableStream<Uint8Array>({
      pull: (controller) => {
        if (at >= bytes.length) return controller.close()
        controller.enqueue(bytes.slice(at, at + 16 * 1024))
        at += 16 * 1024
      }
    })
  }

  it.effect("a body without a declared length, or over the limit, is streamed and kept up to the limit", () =>
    Effect.gen(function*() {
      const body = "a".repeat(RESPONSE_READ_LIMIT * 2)
      for (const headers of [{}, { "content-length": String(body.length) }]) {
        const response = HttpClientResponse.fromWeb(request, new Response(chunked(body), { status: 200, headers }))
        const text = yield* responseText(response)
        assert.strictEqual(text, body.slice(0, RESPONSE_READ_LIMIT))
      }
    }))
})
