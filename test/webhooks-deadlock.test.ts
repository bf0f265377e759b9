/**
 * Gap of issue 12: worker lanes recording terminal failures for many endpoints at once, on PostgreSQL. The lanes'
 * batches name the same endpoints in opposite orders, so rounds that update endpoint streaks in batch order deadlock;
 * the losing round's rows then stay claimed and are sent again once the 60 s claim expires (duplicates). Rounds must
 * lock endpoints in one global order and retry a failed write (never the request): every try is recorded exactly
 * once and nothing is left to send twice. Runs only when `DATABASE_URL` names a server.
 */
import type { OrgId, ResolvedWorkspace, WebhookEndpointId } from "@cp/domain"
import { type DeliveryRow, Migrations, WebhookDeliveriesRepo, WebhookEndpointsRepo } from "@cp/persistence"
import { mint } from "@cp/server/platform/ids"
import { WorkspaceResolver } from "@cp/server/platform/workspaceResolver"
import { RepositoriesSql } from "@cp/server/repositories"
import { DestinationGuard, WebhookSender, WebhookWorker, WORKER_BATCH } from "@cp/server/webhooks/delivery"
import { newAttempt } from "@cp/server/webhooks/outbox"
import { CLAIM_SECONDS, MAX_ATTEMPTS } from "@cp/server/webhooks/rules"
import { WebhooksService } from "@cp/server/webhooks/service"
import { WorkspacesService } from "@cp/server/workspaces/service"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { areaServicesOver, userActor } from "../packages/server/test/support/services.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

/** Endpoints, one row of each in every round's batch (a round claims `WORKER_BATCH` rows). */
const ENDPOINTS = WORKER_BATCH
/** Rounds run at once (the lanes of one worker, or workers of several processes: each holds its own connection). */
const ROUNDS = 8
/** Times the scenario runs (a deadlock needs the rounds' writes to interleave; each run is another chance). */
const SCENARIOS = 4

/** Every request by `X-Webhook-ID`; no answer until all rounds of a scenario are sending, so their writes overlap. */
const sends = new Map<string, number>()
let release: () => void = () => {}
let allSending = Promise.resolve()
const nextScenario = () => {
  sends.clear()
  allSending = new Promise<void>((resolve) => {
    release = resolve
  })
}
const FailingSender = Layer.succeed(WebhookSender)({
  send: (request) =>
    Effect.gen(function*() {
      const id = request.headers["x-webhook-id"] ?? ""
      sends.set(id, (sends.get(id) ?? 0) + 1)
      if ([...sends.values()].reduce((a, b) => a + b, 0) >= ENDPOINTS * ROUNDS) release()
      yield* Effect.promise(() => allSending)
      return { _tag: "Answered", status: 500, body: "down" } as const
    })
})

const TestLayer = WebhooksService.layer.pipe(
  Layer.provideMerge(WebhookWorker.layer),
  Layer.provideMerge(Layer.mergeAll(FailingSender, DestinationGuard.layer)),
  Layer.provideMerge(
    areaServicesOver(
      RepositoriesSql.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(databaseLayer("postgres")))
    )
  )
)

describe.skipIf(DATABASE_URL === undefined)("webhook rounds failing many endpoints at once (PostgreSQL)", () => {
  layer(TestLayer, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("record every terminal failure once, in any interleaving: no deadlock, nothing sent twice", () =>
      Effect.gen(function*() {
        for (let scenario = 0; scenario < SCENARIOS; scenario++) yield* manyEndpointsFailing
      }))
  })
})

const manyEndpointsFailing = Effect.gen(function*() {
  nextScenario()
  const actor = userActor()
  const workspaces = yield* WorkspacesService
  const webhooks = yield* WebhooksService
  const deliveries = yield* WebhookDeliveriesRepo
  let current: ResolvedWorkspace | undefined
  // At most 20 endpoints per workspace: as many workspaces as the batch needs.
  const endpoints: Array<{ readonly orgId: OrgId; readonly endpointId: WebhookEndpointId }> = []
  for (let i = 0; i < ENDPOINTS; i++) {
    if (i % 20 === 0) {
      const { organization } = yield* workspaces.create(actor, { name: `Deadlock ${i}` })
      current = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
    }
    const workspace = current!
    const { endpoint } = yield* webhooks.createEndpoint(actor, workspace, null, {
      url: `https://192.0.2.${(i % 250) + 1}/hook-${i}`
    })
    endpoints.push({ orgId: workspace.organization.id, endpointId: endpoint.id })
  }
  // Row k of round r is due at r * ENDPOINTS + k ms; odd rounds name the endpoints in reverse order, so any two
  // rounds of different parity meet every endpoint pair in opposite orders. Each row is on its last try.
  const base = Date.now() - 60_000
  const rows: Array<DeliveryRow> = []
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < ENDPOINTS; k++) {
      const target = endpoints[round % 2 === 0 ? k : ENDPOINTS - 1 - k]!
      const at = new Date(base + round * ENDPOINTS + k)
      const row = newAttempt(at, {
        ...target,
        subscriptionId: null,
        eventId: mint.eventId(at.getTime()),
        eventType: "team.created",
        body: "{}"
      }, null)
      rows.push({ ...row, status: "retrying", attemptNumber: MAX_ATTEMPTS - 1, dueAt: at })
    }
  }
  yield* deliveries.insertMany(rows)

  const worker = yield* WebhookWorker
  const tried = yield* Effect.all(
    Array.from({ length: ROUNDS }, () => worker.runOnce),
    { concurrency: "unbounded" }
  )
  assert.deepStrictEqual(tried, Array.from({ length: ROUNDS }, () => ENDPOINTS))

  // Every try was made once and recorded: terminal, unclaimed.
  assert.strictEqual(sends.size, ENDPOINTS * ROUNDS)
  assert.deepStrictEqual([...new Set(sends.values())], [1])
  for (const row of rows) {
    const stored = Option.getOrThrow(yield* deliveries.find({ orgId: row.orgId, attemptId: row.id }))
    assert.strictEqual(stored.status, "failed")
    assert.strictEqual(stored.attemptNumber, MAX_ATTEMPTS)
    assert.isNull(stored.claimToken)
  }
  // Each endpoint counted one terminal failure per round (more rounds than the auto-disable threshold).
  const endpointsRepo = yield* WebhookEndpointsRepo
  for (const key of endpoints) {
    const endpoint = Option.getOrThrow(yield* endpointsRepo.find(key))
    assert.strictEqual(endpoint.consecutiveFailures, ROUNDS)
    // Disabled once, by the round whose failure reached the threshold.
    assert.strictEqual(endpoint.status, "disabled")
    assert.strictEqual(endpoint.disabledReason, "repeated_delivery_failures")
  }
  // Nothing would be sent again once claims expire.
  const later = new Date(Date.now() + (CLAIM_SECONDS + 1) * 1000)
  const again = yield* deliveries.claim({ now: later, until: later, token: "probe", limit: 1000 })
  assert.strictEqual(again.length, 0)
})
