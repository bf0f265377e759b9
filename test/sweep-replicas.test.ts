/**
 * The idle sweep on replicas sharing one PostgreSQL database (contract §1 "Several replicas"; spec: environment
 * "background sweep"): three server processes (`main.ts`, each its own pool and its own sweep) boot together over
 * seeded idle environments and sweep as they boot; and two replicas in this process, each with its own pool and its
 * own `EnvironmentSweep`, sweep at once, repeatedly. Every idle environment is archived exactly once with exactly one
 * `environment.archived` event (claims use `for update skip locked`). Runs only when `DATABASE_URL` names a server.
 */
import { EnvironmentId, IdPrefix, OrgId, ProjectId, WorkspaceRef } from "@cp/domain"
import { Database, EnvironmentsRepo, Migrations, OrganizationsRepo, ProjectsRepo } from "@cp/persistence"
import { AppConfig, parseConfig } from "@cp/server/platform/config"
import { EventLog } from "@cp/server/platform/events"
import { newId } from "@cp/server/platform/ids"
import { EnvironmentSweep } from "@cp/server/projects/sweep"
import { RepositoriesSql } from "@cp/server/repositories"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { startReplicaProcesses } from "./support/processes.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

/** The repositories over `url`, migrated, on a pool of the test's own: for seeding and reading back. */
const repositoriesOver = (url: string) =>
  RepositoriesSql.pipe(Layer.provide(Migrations.layer), Layer.provideMerge(Database.layerPostgres(url)), Layer.fresh)

/** One replica's sweep and repositories in this process, on a pool of its own. */
const replicaOver = (url: string) =>
  EnvironmentSweep.layer.pipe(
    Layer.provideMerge(EventLog.layer),
    Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
    Layer.provideMerge(repositoriesOver(url)),
    Layer.fresh
  )

/** Every environment of the project archived, each with exactly one `environment.archived` event by the system. */
const assertArchivedOnce = (sql: SqlClient.SqlClient, orgId: OrgId, projectId: ProjectId, total: number) =>
  Effect.gen(function*() {
    const activeRows = yield* sql<{ active: number }>`
      select count(*)::int as active from environments where project_id = ${projectId} and status = 'active'`
    assert.strictEqual(activeRows[0]?.active, 0)
    const perEnvironment = yield* sql<{ n: number }>`
      select count(*)::int as n from events
      where org_id = ${orgId} and type = 'environment.archived' and actor_type = 'system'
      group by subject_id`
    assert.strictEqual(perEnvironment.length, total)
    assert.isTrue(perEnvironment.every((row) => row.n === 1))
  })

/** Seeds through `replica` one workspace and one project with `total` environments idle since 2001: their ids. */
const seedIdleEnvironments = (
  replica: Context.Context<OrganizationsRepo | ProjectsRepo | EnvironmentsRepo>,
  total: number
) =>
  Effect.gen(function*() {
    const old = new Date("2001-01-01T00:00:00.000Z")
    const publicId = WorkspaceRef.make(newId(IdPrefix.workspace, Date.now()))
    const orgId = OrgId.make(newId(IdPrefix.org, Date.now()))
    yield* Context.get(replica, OrganizationsRepo).insert({
      id: orgId,
      publicId,
      name: "Sweep",
      slug: `sweep-${randomUUID()}`,
      kind: "account",
      accountId: publicId,
      isAccountRoot: true,
      createdAt: old,
      updatedAt: old
    })
    const projectId = ProjectId.make(newId(IdPrefix.project, Date.now()))
    yield* Context.get(replica, ProjectsRepo).insert({
      id: projectId,
      orgId,
      name: "Sweep",
      slug: "sweep",
      status: "active",
      createdAt: old,
      updatedAt: old,
      archivedAt: null
    })
    const environments = Context.get(replica, EnvironmentsRepo)
    for (let i = 0; i < total; i++) {
      yield* environments.insert({
        id: EnvironmentId.make(newId(IdPrefix.environment, Date.now())),
        orgId,
        projectId,
        name: `E${i}`,
        slug: `e${i}`,
        status: "active",
        createdAt: old,
        updatedAt: old,
        archivedAt: null,
        lastActiveAt: null
      })
    }
    return { orgId, projectId }
  }).pipe(Effect.orDie)

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("idle sweep on several replicas", () => {
  it.live(
    "three processes sweeping as they boot: every idle environment archived exactly once, one event each",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("cp_sweep")
        const seeding = yield* Layer.build(repositoriesOver(url))
        // Several batches' worth.
        const total = 250
        const { orgId, projectId } = yield* seedIdleEnvironments(seeding, total)
        const sql = Context.get(seeding, SqlClient.SqlClient)
        const countActive = Effect.map(
          sql<{ active: number }>`
          select count(*)::int as active from environments where project_id = ${projectId} and status = 'active'`,
          (rows) => rows[0]?.active ?? -1
        )

        // Each replica sweeps as it boots: three processes booting together sweep at the same time.
        const replicas = yield* startReplicaProcesses(url, 3)
        yield* countActive.pipe(
          Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (active) => active === 0 }),
          Effect.timeout("60 seconds")
        )
        // Every sweep has ended once every replica has stopped.
        yield* Effect.promise(() => Promise.all(replicas.map((replica) => replica.kill("SIGTERM"))))
        yield* assertArchivedOnce(sql, orgId, projectId, total)
      }).pipe(Effect.scoped, Effect.orDie),
    120_000
  )

  it.live(
    "two replicas in one process sweeping at once, three times each: the same, exactly once",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("cp_sweep")
        const [a, b] = yield* Effect.all([Layer.build(replicaOver(url)), Layer.build(replicaOver(url))], {
          concurrency: 2
        })
        const total = 250
        const { orgId, projectId } = yield* seedIdleEnvironments(a, total)
        const runs = yield* Effect.all(
          [a, b, a, b, a, b].map((replica) => Context.get(replica, EnvironmentSweep).runOnce),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(runs.reduce((sum, n) => sum + n, 0), total, `archived per run: ${runs.join(", ")}`)
        yield* assertArchivedOnce(Context.get(a, SqlClient.SqlClient), orgId, projectId, total)
      }).pipe(Effect.scoped, Effect.orDie),
    60_000
  )
})
