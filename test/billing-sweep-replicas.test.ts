/**
 * The billing period-end sweep on replicas sharing one PostgreSQL database (metering-billing.md §5: `cancelAtPeriodEnd`
 * keeps the plan until `currentPeriodEnd`, then a sweep downgrades to `free`; contract §1 "Several replicas"): two
 * server processes (`main.ts`, each its own pool and its own `BillingSweep`) boot together over seeded workspaces
 * whose subscriptions were set to cancel at a period end already past, and sweep as they boot. Every workspace is
 * downgraded exactly once, with exactly one `subscription.canceled` event (claims use `for update skip locked`).
 * Runs only when `DATABASE_URL` names a server.
 */
import { IdPrefix, OrgId, WorkspaceRef } from "@cp/domain"
import { BillingRepo, Database, Migrations, OrganizationsRepo, Transactor } from "@cp/persistence"
import { BillingState } from "@cp/server/billing/state"
import { BillingSweep } from "@cp/server/billing/sweep"
import { AppConfig, parseConfig } from "@cp/server/platform/config"
import { EventLog } from "@cp/server/platform/events"
import { newId } from "@cp/server/platform/ids"
import { RepositoriesSql } from "@cp/server/repositories"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { billedCustomer } from "../packages/server/test/support/billing.ts"
import { startReplicaProcesses } from "./support/processes.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

/** Billing state over the repositories at `url`, migrated, on a pool of the test's own: for seeding. */
const seedingOver = (url: string) =>
  BillingState.layer.pipe(
    Layer.provideMerge(EventLog.layer),
    Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
    Layer.provideMerge(
      RepositoriesSql.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(Database.layerPostgres(url)))
    ),
    Layer.fresh
  )

/** One replica's billing sweep in this process, on a pool of its own. */
const replicaOver = (url: string) => BillingSweep.layer.pipe(Layer.provideMerge(seedingOver(url)), Layer.fresh)

/** A workspace on `team` through a subscription set to cancel at a period end that has passed: its id. */
const seedCancelled = Effect.gen(function*() {
  const now = new Date()
  const past = new Date(now.getTime() - 60_000)
  const publicId = WorkspaceRef.make(newId(IdPrefix.workspace, now.getTime()))
  const orgId = OrgId.make(newId(IdPrefix.org, now.getTime()))
  yield* (yield* OrganizationsRepo).insert({
    id: orgId,
    publicId,
    name: "Billed",
    slug: `billed-${randomUUID()}`,
    kind: "account",
    accountId: publicId,
    isAccountRoot: true,
    createdAt: now,
    updatedAt: now
  })
  const customerId = `cus_${orgId}`
  yield* (yield* BillingRepo).insertCustomer(billedCustomer(orgId, now))
  const applied = yield* (yield* Transactor).withTransaction((yield* BillingState).applySubscription({
    id: `sub_${orgId}`,
    customerId,
    productId: "prod_team",
    status: "active",
    currentPeriodStart: new Date(past.getTime() - 30 * 24 * 3_600_000).toISOString(),
    currentPeriodEnd: past.toISOString(),
    trialEnd: null,
    cancelAtPeriodEnd: true,
    canceledAt: null,
    modifiedAt: now.toISOString(),
    metadata: { orgId }
  }, false))
  assert.strictEqual(applied._tag, "applied")
  return orgId
})

/** Seeds `total` due workspaces through `seeding`: their ids, and a count of those still on `team`. */
const seedDue = (seeding: Context.Context<Layer.Success<ReturnType<typeof seedingOver>>>, total: number) =>
  Effect.gen(function*() {
    const orgIds = yield* Effect.forEach(
      Array.from({ length: total }, (_, i) => i),
      () => Effect.provide(seedCancelled, seeding),
      { concurrency: 8 }
    )
    const sql = Context.get(seeding, SqlClient.SqlClient)
    const onTeam = Effect.map(
      sql<{ n: number }>`
        select count(*)::int as n from workspace_plans where org_id in ${sql.in(orgIds)} and plan_id = 'team'`,
      (rows) => rows[0]?.n ?? -1
    )
    assert.strictEqual(yield* onTeam, total)
    return { orgIds, onTeam }
  })

/** Every seeded subscription ended, each workspace with exactly one `subscription.canceled` event by the system. */
const assertDowngradedOnce = (sql: SqlClient.SqlClient, orgIds: ReadonlyArray<OrgId>) =>
  Effect.gen(function*() {
    const canceled = yield* sql<{ n: number }>`
      select count(*)::int as n from billing_subscriptions
      where org_id in ${sql.in(orgIds)} and status = 'canceled' and cancel_at is null`
    assert.strictEqual(canceled[0]?.n, orgIds.length)
    const perWorkspace = yield* sql<{ n: number }>`
      select count(*)::int as n from events
      where org_id in ${sql.in(orgIds)} and type = 'subscription.canceled' and actor_type = 'system'
      group by org_id`
    assert.strictEqual(perWorkspace.length, orgIds.length)
    const twice = perWorkspace.filter((row) => row.n !== 1).length
    assert.strictEqual(twice, 0, `workspaces with more than one subscription.canceled: ${twice}`)
  })

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("billing sweep on several replicas", () => {
  it.live(
    "two processes sweeping as they boot: every due workspace downgraded exactly once, one event each",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("cp_billing_sweep")
        const seeding = yield* Layer.build(seedingOver(url))
        // Several batches (100) of due subscriptions, so the two boots' sweeps overlap.
        const { onTeam, orgIds } = yield* seedDue(seeding, 800)
        const replicas = yield* startReplicaProcesses(url, 2)
        yield* onTeam.pipe(
          Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (n) => n === 0 }),
          Effect.timeout("60 seconds")
        )
        // Every sweep has ended once every replica has stopped.
        yield* Effect.promise(() => Promise.all(replicas.map((replica) => replica.kill("SIGTERM"))))
        yield* assertDowngradedOnce(Context.get(seeding, SqlClient.SqlClient), orgIds)
      }).pipe(Effect.scoped, Effect.orDie),
    120_000
  )

  it.live(
    "two replicas in one process sweeping at once, twice each: the same, exactly once",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("cp_billing_sweep")
        const [a, b] = yield* Effect.all([Layer.build(replicaOver(url)), Layer.build(replicaOver(url))], {
          concurrency: 2
        })
        const total = 250
        const { orgIds } = yield* seedDue(a, total)
        const runs = yield* Effect.all(
          [a, b, a, b].map((replica) => Context.get(replica, BillingSweep).runOnce),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(runs.reduce((sum, n) => sum + n, 0), total, `ended per run: ${runs.join(", ")}`)
        yield* assertDowngradedOnce(Context.get(a, SqlClient.SqlClient), orgIds)
      }).pipe(Effect.scoped, Effect.orDie),
    60_000
  )
})
