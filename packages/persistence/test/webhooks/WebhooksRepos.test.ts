/**
 * The webhook repositories' contract, on every backend: endpoints within their workspace, subscription uniqueness and
 * matching (exact, prefix, `*`, project scope, disabled), the streak, cascade on delete; delivery attempts as the
 * outbox: claims that skip held rows and expire, outcomes written only under the claim, stats and failed-since.
 */
import {
  DeliveryAttemptId,
  EventId,
  IdPrefix,
  ProjectId,
  WebhookEndpointId,
  WebhookSubscriptionId
} from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import { WebhookDeliveriesRepo } from "../../src/webhooks/DeliveriesRepo.ts"
import { subscriptionDuplicateConstraint, WebhookEndpointsRepo } from "../../src/webhooks/EndpointsRepo.ts"
import type { DeliveryRow, EndpointRow, SubscriptionRow } from "../../src/webhooks/rows.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const repositories = {
  memory: Layer.mergeAll(OrganizationsRepo.memory, WebhookEndpointsRepo.memory, WebhookDeliveriesRepo.memory),
  sql: Layer.mergeAll(OrganizationsRepo.sql, WebhookEndpointsRepo.sql, WebhookDeliveriesRepo.sql)
}

const workspace = Effect.gen(function*() {
  const org: OrganizationRow = accountRootRow("Hooks")
  yield* Effect.flatMap(OrganizationsRepo, (repo) => repo.insert(org))
  return org
})

const endpointRow = (org: OrganizationRow, minutes: number, overrides: Partial<EndpointRow> = {}): EndpointRow => ({
  id: newId(WebhookEndpointId, IdPrefix.webhookEndpoint),
  orgId: org.id,
  projectId: null,
  url: "https://hooks.example.test/in",
  name: null,
  description: null,
  status: "active",
  disabledReason: null,
  disabledAt: null,
  secretVersion: 1,
  secretLastRotatedAt: null,
  createdAt: at(minutes),
  updatedAt: at(minutes),
  sealedSecret: "v1.kid.n.t.c",
  previousSealedSecret: null,
  previousSecretExpiresAt: null,
  kekId: "kid",
  consecutiveFailures: 0,
  ...overrides
})

const subscriptionRow = (endpoint: EndpointRow, eventType: string, enabled = true): SubscriptionRow => ({
  id: newId(WebhookSubscriptionId, IdPrefix.webhookSubscription),
  orgId: endpoint.orgId,
  endpointId: endpoint.id,
  eventType,
  enabled,
  createdAt: at(1),
  updatedAt: at(1)
})

const attemptRow = (endpoint: EndpointRow, minutes: number, overrides: Partial<DeliveryRow> = {}): DeliveryRow => {
  const eventId = Schema.decodeSync(EventId)(randomUUID())
  return {
    id: newId(DeliveryAttemptId, IdPrefix.deliveryAttempt),
    orgId: endpoint.orgId,
    endpointId: endpoint.id,
    subscriptionId: null,
    eventId,
    eventType: "project.created",
    status: "pending",
    attemptNumber: 1,
    httpStatusCode: null,
    failureReason: null,
    idempotencyKey: eventId,
    nextRetryAt: null,
    completedAt: null,
    createdAt: at(minutes),
    updatedAt: at(minutes),
    body: "{\"id\":1}",
    dueAt: at(minutes),
    claimedUntil: null,
    claimToken: null,
    traceContext: null,
    responseBody: null,
    ...overrides
  }
}

/** A workspace with one endpoint. */
const oneEndpoint = Effect.gen(function*() {
  const org = yield* workspace
  const endpoint = endpointRow(org, 1)
  yield* (yield* WebhookEndpointsRepo).insert(endpoint)
  return { org, endpoint }
})

describeContract("Webhook repositories", repositories, (it) => {
  it.effect("finds endpoints within their workspace only, lists them newest first and by project, counts them", () =>
    Effect.gen(function*() {
      const repo = yield* WebhookEndpointsRepo
      const [org, other] = [yield* workspace, yield* workspace]
      const projectId = newId(ProjectId, IdPrefix.project)
      const rows = [endpointRow(org, 1), endpointRow(org, 3), endpointRow(org, 2, { projectId })]
      yield* Effect.forEach(rows, repo.insert, { discard: true })
      const [first] = rows
      assert.isDefined(first)
      assert.deepStrictEqual(yield* repo.find({ orgId: org.id, endpointId: first.id }), Option.some(first))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: other.id, endpointId: first.id })))
      assert.deepStrictEqual(
        (yield* repo.list({ orgId: org.id, projectId: null, limit: 10 })).map((r) => r.id),
        [rows[1]?.id, rows[2]?.id, rows[0]?.id]
      )
      assert.deepStrictEqual(
        (yield* repo.list({ orgId: org.id, projectId, limit: 10 })).map((r) => r.id),
        [rows[2]?.id]
      )
      assert.strictEqual(yield* repo.count(org.id), 3)
      assert.strictEqual(yield* repo.count(other.id), 0)
    }))

  it.effect("updates every mutable field and keeps the streak", () =>
    Effect.gen(function*() {
      const repo = yield* WebhookEndpointsRepo
      const { endpoint, org } = yield* oneEndpoint
      const changed: EndpointRow = {
        ...endpoint,
        url: "https://other.example.test/",
        status: "disabled",
        disabledReason: "manual",
        disabledAt: at(5),
        secretVersion: 2,
        secretLastRotatedAt: at(5),
        previousSealedSecret: endpoint.sealedSecret,
        previousSecretExpiresAt: at(6),
        sealedSecret: "v1.kid.other",
        updatedAt: at(5)
      }
      yield* repo.update(changed)
      assert.deepStrictEqual(yield* repo.find({ orgId: org.id, endpointId: endpoint.id }), Option.some(changed))
      const failing = yield* repo.recordStreak({ endpointId: endpoint.id, success: false, at: at(6) })
      assert.strictEqual(Option.getOrThrow(failing).consecutiveFailures, 1)
      yield* repo.recordStreak({ endpointId: endpoint.id, success: false, at: at(6) })
      const reset = yield* repo.recordStreak({ endpointId: endpoint.id, success: true, at: at(7) })
      assert.strictEqual(Option.getOrThrow(reset).consecutiveFailures, 0)
    }))

  it.effect("keeps one subscription per endpoint and event type", () =>
    Effect.gen(function*() {
      const repo = yield* WebhookEndpointsRepo
      const { endpoint } = yield* oneEndpoint
      yield* repo.insertSubscription(subscriptionRow(endpoint, "project.*"))
      const duplicate = yield* Effect.flip(repo.insertSubscription(subscriptionRow(endpoint, "project.*")))
      assert.instanceOf(duplicate, UniqueViolation)
      assert.strictEqual(duplicate.constraint, subscriptionDuplicateConstraint)
      yield* repo.insertSubscription(subscriptionRow(endpoint, "*"))
      assert.strictEqual(yield* repo.countSubscriptions(endpoint.id), 2)
    }))

  it.effect("matches exact types, prefixes and *, of enabled subscriptions, within the endpoint's scope", () =>
    Effect.gen(function*() {
      const repo = yield* WebhookEndpointsRepo
      const org = yield* workspace
      const projectId = newId(ProjectId, IdPrefix.project)
      const workspaceEndpoint = endpointRow(org, 1)
      const projectEndpoint = endpointRow(org, 2, { projectId })
      yield* repo.insert(workspaceEndpoint)
      yield* repo.insert(projectEndpoint)
      const subs = [
        subscriptionRow(workspaceEndpoint, "team.*"),
        subscriptionRow(workspaceEndpoint, "team.created"),
        subscriptionRow(workspaceEndpoint, "*", false),
        subscriptionRow(projectEndpoint, "*"),
        subscriptionRow(projectEndpoint, "teams.*")
      ]
      yield* Effect.forEach(subs, repo.insertSubscription, { discard: true })
      const match = (eventType: string, project: ProjectId | null) =>
        Effect.map(
          repo.matching({ orgId: org.id, projectId: project, eventType }),
          (found) => found.map((m) => m.subscriptionId).sort()
        )
      assert.deepStrictEqual(yield* match("team.created", null), [subs[0]?.id, subs[1]?.id].sort())
      assert.deepStrictEqual(yield* match("team.deleted", null), [subs[0]?.id])
      assert.deepStrictEqual(yield* match("team.created", projectId), [subs[0]?.id, subs[1]?.id, subs[3]?.id].sort())
      assert.deepStrictEqual(yield* match("project.created", newId(ProjectId, IdPrefix.project)), [])
      assert.deepStrictEqual(yield* match("teamx.created", projectId), [subs[3]?.id])
    }))

  it.effect("removing an endpoint removes its subscriptions and attempts", () =>
    Effect.gen(function*() {
      const repo = yield* WebhookEndpointsRepo
      const deliveries = yield* WebhookDeliveriesRepo
      const { endpoint, org } = yield* oneEndpoint
      const sub = subscriptionRow(endpoint, "*")
      yield* repo.insertSubscription(sub)
      const attempt = attemptRow(endpoint, 1, { dueAt: null, status: "success" })
      yield* deliveries.insertMany([attempt])
      yield* repo.remove({ orgId: org.id, endpointId: endpoint.id })
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, endpointId: endpoint.id })))
      assert.isTrue(Option.isNone(yield* repo.findSubscription({ orgId: org.id, subscriptionId: sub.id })))
      assert.isTrue(Option.isNone(yield* deliveries.find({ orgId: org.id, attemptId: attempt.id })))
    }))

  it.effect("claims due rows once until the claim expires; outcomes are written only under the claim", () =>
    Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveriesRepo
      const { endpoint } = yield* oneEndpoint
      const due = attemptRow(endpoint, -600)
      const later = attemptRow(endpoint, -590, { dueAt: at(10_000) })
      yield* deliveries.insertMany([due, later])
      const first = yield* deliveries.claim({ now: at(0), until: at(1), token: "one", limit: 1000 })
      const mine = first.filter((row) => row.endpointId === endpoint.id)
      assert.deepStrictEqual(mine.map((row) => row.id), [due.id])
      assert.strictEqual(mine[0]?.claimToken, "one")
      const second = yield* deliveries.claim({ now: at(0), until: at(1), token: "two", limit: 1000 })
      assert.isFalse(second.some((row) => row.endpointId === endpoint.id))
      // The claim expires: another worker takes the row over, and the first worker's outcome is refused.
      const third = yield* deliveries.claim({ now: at(1), until: at(2), token: "three", limit: 1000 })
      assert.deepStrictEqual(third.filter((row) => row.endpointId === endpoint.id).map((row) => row.id), [due.id])
      const outcome = {
        id: due.id,
        status: "success" as const,
        attemptNumber: 1,
        httpStatusCode: 200,
        failureReason: null,
        nextRetryAt: null,
        completedAt: at(1),
        responseBody: "ok",
        at: at(1)
      }
      assert.isTrue(Option.isNone(yield* deliveries.complete({ ...outcome, token: "one" })))
      const written = Option.getOrThrow(yield* deliveries.complete({ ...outcome, token: "three" }))
      assert.strictEqual(written.status, "success")
      assert.isNull(written.dueAt)
      assert.isNull(written.claimToken)
      const fourth = yield* deliveries.claim({ now: at(5), until: at(6), token: "four", limit: 1000 })
      assert.isFalse(fourth.some((row) => row.id === due.id))
    }))

  it.effect("completeMany writes a round's outcomes in one statement, each only under its claim", () =>
    Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveriesRepo
      const { endpoint } = yield* oneEndpoint
      const [a, b, c] = [attemptRow(endpoint, -700), attemptRow(endpoint, -699), attemptRow(endpoint, -698)]
      yield* deliveries.insertMany([a, b, c])
      const claimed = yield* deliveries.claim({ now: at(0), until: at(1), token: "round", limit: 1000 })
      assert.includeMembers(claimed.map((row) => row.id), [a.id, b.id, c.id])
      const base = {
        token: "round",
        httpStatusCode: 500,
        failureReason: "http_500",
        completedAt: null,
        responseBody: "down",
        at: at(1)
      }
      const written = yield* deliveries.completeMany([
        { ...base, id: a.id, status: "retrying", attemptNumber: 1, nextRetryAt: at(30) },
        {
          ...base,
          id: b.id,
          status: "success",
          attemptNumber: 1,
          httpStatusCode: 200,
          failureReason: null,
          nextRetryAt: null,
          completedAt: at(1)
        },
        // Not this round's claim: refused.
        { ...base, id: c.id, token: "other", status: "failed", attemptNumber: 5, nextRetryAt: null }
      ])
      assert.sameMembers(written.map((row) => row.id), [a.id, b.id])
      const byId = new Map(written.map((row) => [row.id, row]))
      assert.strictEqual(byId.get(a.id)?.status, "retrying")
      assert.deepStrictEqual(byId.get(a.id)?.dueAt, at(30))
      assert.strictEqual(byId.get(a.id)?.failureReason, "http_500")
      assert.strictEqual(byId.get(b.id)?.status, "success")
      assert.isNull(byId.get(b.id)?.dueAt)
      assert.isNull(byId.get(b.id)?.claimToken)
      assert.strictEqual(
        Option.getOrThrow(yield* deliveries.find({ orgId: c.orgId, attemptId: c.id })).claimToken,
        "round"
      )
      assert.deepStrictEqual(yield* deliveries.completeMany([]), [])
    }))

  it.effect("a retry's nextRetryAt is when it is due again", () =>
    Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveriesRepo
      const { endpoint } = yield* oneEndpoint
      const row = attemptRow(endpoint, -500)
      yield* deliveries.insertMany([row])
      yield* deliveries.claim({ now: at(0), until: at(1), token: "t", limit: 1000 })
      yield* deliveries.complete({
        id: row.id,
        token: "t",
        status: "retrying",
        attemptNumber: 1,
        httpStatusCode: 500,
        failureReason: "http_500",
        nextRetryAt: at(30),
        completedAt: null,
        responseBody: null,
        at: at(0)
      })
      const early = yield* deliveries.claim({ now: at(29), until: at(30), token: "e", limit: 1000 })
      assert.isFalse(early.some((r) => r.id === row.id))
      const onTime = yield* deliveries.claim({ now: at(30), until: at(31), token: "o", limit: 1000 })
      assert.isTrue(onTime.some((r) => r.id === row.id))
    }))

  it.effect("lists attempts newest first; stats count the window; failedSince finds failed ones", () =>
    Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveriesRepo
      const { endpoint, org } = yield* oneEndpoint
      const rows = [
        attemptRow(endpoint, 1, { status: "success", dueAt: null, completedAt: at(1) }),
        attemptRow(endpoint, 2, { status: "failed", dueAt: null, completedAt: at(2), failureReason: "timeout" }),
        attemptRow(endpoint, 3, { status: "retrying", dueAt: at(100), nextRetryAt: at(100) }),
        attemptRow(endpoint, 4, { dueAt: at(100) }),
        attemptRow(endpoint, -100, { status: "failed", dueAt: null, completedAt: at(-100) })
      ]
      yield* deliveries.insertMany(rows)
      assert.deepStrictEqual(
        (yield* deliveries.list({ endpointId: endpoint.id, limit: 3 })).map((r) => r.id),
        [rows[3]?.id, rows[2]?.id, rows[1]?.id]
      )
      assert.deepStrictEqual(yield* deliveries.stats({ endpointId: endpoint.id, since: at(0) }), {
        success: 1,
        failed: 1,
        retrying: 1,
        pending: 1,
        lastSuccessAt: at(1),
        lastFailureAt: at(2)
      })
      assert.deepStrictEqual(
        (yield* deliveries.failedSince({ endpointId: endpoint.id, since: at(0) })).map((r) => r.id),
        [rows[1]?.id]
      )
      const found = yield* deliveries.find({ orgId: org.id, attemptId: rows[0]?.id ?? newId(DeliveryAttemptId, "") })
      assert.deepStrictEqual(found, Option.some(rows[0]))
    }))
})
