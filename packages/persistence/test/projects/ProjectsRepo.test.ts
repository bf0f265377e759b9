/**
 * The projects repositories' contract on memory, PGlite and (with `DATABASE_URL`) PostgreSQL: slugs unique per
 * workspace / project, archive and restore as guarded transitions, active counts, keyset lists, and the idle claim
 * that never hands the same environment to two concurrent sweeps. Also the entitlements seeded by migration 0008.
 */
import { EnvironmentId, IdPrefix, ProjectId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { EntitlementsRepo } from "../../src/entitlements/EntitlementsRepo.ts"
import { EnvironmentsRepo, ProjectsRepo } from "../../src/projects/ProjectsRepo.ts"
import type { EnvironmentRow, ProjectRow } from "../../src/projects/rows.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const orgRow = (): OrganizationRow => accountRootRow("Root")

const projectRow = (org: OrganizationRow, minutes: number, overrides: Partial<ProjectRow> = {}): ProjectRow => ({
  id: newId(ProjectId, IdPrefix.project),
  orgId: org.id,
  name: "Web",
  slug: `p-${randomUUID()}`,
  status: "active",
  createdAt: at(minutes),
  updatedAt: at(minutes),
  archivedAt: null,
  ...overrides
})

const environmentRow = (
  project: ProjectRow,
  created: Date,
  overrides: Partial<EnvironmentRow> = {}
): EnvironmentRow => ({
  id: newId(EnvironmentId, IdPrefix.environment),
  orgId: project.orgId,
  projectId: project.id,
  name: "Staging",
  slug: `e-${randomUUID()}`,
  status: "active",
  createdAt: created,
  updatedAt: created,
  archivedAt: null,
  lastActiveAt: null,
  ...overrides
})

const implementations = {
  memory: Layer.mergeAll(
    ProjectsRepo.memory,
    EnvironmentsRepo.memory,
    OrganizationsRepo.memory,
    EntitlementsRepo.memory
  ),
  sql: Layer.mergeAll(ProjectsRepo.sql, EnvironmentsRepo.sql, OrganizationsRepo.sql, EntitlementsRepo.sql)
}

const setup = Effect.gen(function*() {
  const org = orgRow()
  yield* (yield* OrganizationsRepo).insert(org).pipe(Effect.orDie)
  return org
})

describeContract("ProjectsRepo", implementations, (it) => {
  it.effect("insert, findById scoped to the workspace, slug conflicts, slug family, list newest first", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const org = yield* setup
      const other = yield* setup
      const a = projectRow(org, 1, { slug: "web" })
      const b = projectRow(org, 2, { slug: "web-2" })
      yield* projects.insert(a).pipe(Effect.orDie)
      yield* projects.insert(b).pipe(Effect.orDie)
      assert.deepStrictEqual(yield* projects.findById(org.id, a.id), Option.some(a))
      assert.isTrue(Option.isNone(yield* projects.findById(other.id, a.id)))
      const dup = yield* Effect.flip(projects.insert(projectRow(org, 3, { slug: "web" })))
      assert.strictEqual(dup.constraint, "projects_org_slug_key")
      yield* projects.insert(projectRow(other, 3, { slug: "web" })).pipe(Effect.orDie)
      assert.deepStrictEqual([...(yield* projects.slugsStartingWith(org.id, "web"))].sort(), ["web", "web-2"])
      assert.deepStrictEqual((yield* projects.list(org.id, { limit: 10 })).map((p) => p.id), [b.id, a.id])
      assert.deepStrictEqual(
        (yield* projects.list(org.id, { limit: 10, after: { at: b.createdAt, key: b.id } })).map((p) => p.id),
        [a.id]
      )
    }))

  it.effect("archive and restore are guarded transitions; countActive counts active only", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const org = yield* setup
      const a = projectRow(org, 1)
      yield* projects.insert(a).pipe(Effect.orDie)
      yield* projects.insert(projectRow(org, 2)).pipe(Effect.orDie)
      assert.strictEqual(yield* projects.countActive(org.id), 2)
      const archived = yield* tx.withTransaction(
        Effect.andThen(projects.lockWorkspace(org.id), projects.archive(org.id, a.id, at(5)))
      )
      assert.deepInclude(Option.getOrThrow(archived), { status: "archived", archivedAt: at(5) })
      assert.isTrue(Option.isNone(yield* projects.archive(org.id, a.id, at(6))))
      assert.strictEqual(yield* projects.countActive(org.id), 1)
      const restored = yield* projects.restore(org.id, a.id, at(7))
      assert.deepInclude(Option.getOrThrow(restored), { status: "active", archivedAt: null })
      assert.isTrue(Option.isNone(yield* projects.restore(org.id, a.id, at(8))))
      assert.strictEqual(yield* projects.countActive(org.id), 2)
    }))

  it.effect("environments: scoped lookup, slug per project, archive, markActive", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const org = yield* setup
      const p = projectRow(org, 1)
      const q = projectRow(org, 2)
      yield* projects.insert(p).pipe(Effect.orDie)
      yield* projects.insert(q).pipe(Effect.orDie)
      const e = environmentRow(p, at(3), { slug: "staging" })
      yield* environments.insert(e).pipe(Effect.orDie)
      yield* environments.insert(environmentRow(q, at(3), { slug: "staging" })).pipe(Effect.orDie)
      const dup = yield* Effect.flip(environments.insert(environmentRow(p, at(4), { slug: "staging" })))
      assert.strictEqual(dup.constraint, "environments_project_slug_key")
      assert.deepStrictEqual(yield* environments.findEnvironment(org.id, p.id, e.id), Option.some(e))
      assert.isTrue(Option.isNone(yield* environments.findEnvironment(org.id, q.id, e.id)))
      assert.deepStrictEqual((yield* environments.list(org.id, p.id, { limit: 10 })).map((row) => row.id), [e.id])
      assert.deepStrictEqual(yield* environments.slugsStartingWith(p.id, "staging"), ["staging"])
      const used = yield* environments.markActive(org.id, p.id, e.id, at(10))
      assert.deepStrictEqual(Option.getOrThrow(used).lastActiveAt, at(10))
      const archived = yield* environments.archive(org.id, p.id, e.id, at(11))
      assert.deepInclude(Option.getOrThrow(archived), { status: "archived", archivedAt: at(11) })
      assert.isTrue(Option.isNone(yield* environments.archive(org.id, p.id, e.id, at(12))))
    }))

  it.effect("archiveIdle claims idle environments (lastActiveAt, else createdAt) once, in batches", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const tx = yield* Transactor
      const org = yield* setup
      // Far in the past, so rows of other tests in this database are never idle by this cutoff.
      const old = new Date("2001-01-01T00:00:00.000Z")
      const cutoff = new Date("2001-02-01T00:00:00.000Z")
      const p = projectRow(org, 1)
      yield* projects.insert(p).pipe(Effect.orDie)
      const neverUsed = environmentRow(p, old)
      const usedLongAgo = environmentRow(p, old, { lastActiveAt: new Date("2001-01-15T00:00:00.000Z") })
      const usedRecently = environmentRow(p, old, { lastActiveAt: new Date("2001-03-01T00:00:00.000Z") })
      const alreadyArchived = environmentRow(p, old, { status: "archived", archivedAt: old })
      for (const row of [neverUsed, usedLongAgo, usedRecently, alreadyArchived]) {
        yield* environments.insert(row).pipe(Effect.orDie)
      }
      const now = at(100)
      const first = yield* tx.withTransaction(environments.archiveIdle(cutoff, now, 1))
      const second = yield* tx.withTransaction(environments.archiveIdle(cutoff, now, 10))
      const third = yield* environments.archiveIdle(cutoff, now, 10)
      assert.deepStrictEqual(first.map((row) => row.id), [neverUsed.id])
      assert.deepStrictEqual(second.map((row) => row.id), [usedLongAgo.id])
      assert.deepStrictEqual(third, [])
      assert.deepInclude(first[0]!, { status: "archived", archivedAt: now })
      assert.strictEqual(
        Option.getOrThrow(yield* environments.findEnvironment(org.id, p.id, usedRecently.id)).status,
        "active"
      )
    }))
})

describeContract("EntitlementsRepo", implementations, (it) => {
  it.effect("every workspace starts on the free plan seeded by migration 0008", () =>
    Effect.gen(function*() {
      const org = yield* setup
      const rows = yield* (yield* EntitlementsRepo).forWorkspace(org.id)
      const byKey = Object.fromEntries(rows.map((row) => [row.entitlementKey, row]))
      assert.deepInclude(byKey["limit.projects"], {
        planId: "free",
        valueType: "quantity",
        enabled: true,
        limitValue: 5
      })
      assert.deepInclude(byKey["limit.repo_links"], { planId: "free", enabled: true, limitValue: 5 })
      assert.deepInclude(byKey["feature.integrations.scmhost"], {
        planId: "free",
        valueType: "boolean",
        enabled: true,
        limitValue: null
      })
    }))
})
