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
import { UniqueViolation } from "../../src/errors.ts"
import { EnvironmentsRepo } from "../../src/projects/EnvironmentsRepo.ts"
import { ProjectsRepo } from "../../src/projects/ProjectsRepo.ts"
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
  it.effect("findById finds a project in its own workspace only", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const [org, other] = [yield* setup, yield* setup]
      const a = projectRow(org, 1)
      yield* projects.insert(a)
      assert.deepStrictEqual(yield* projects.findById({ orgId: org.id, projectId: a.id }), Option.some(a))
      assert.isTrue(Option.isNone(yield* projects.findById({ orgId: other.id, projectId: a.id })))
    }))

  it.effect("a slug is unique within its workspace only", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const [org, other] = [yield* setup, yield* setup]
      yield* projects.insert(projectRow(org, 1, { slug: "web" }))
      const dup = yield* Effect.flip(projects.insert(projectRow(org, 3, { slug: "web" })))
      assert.instanceOf(dup, UniqueViolation)
      assert.strictEqual(dup.constraint, "projects_org_slug_key")
      yield* projects.insert(projectRow(other, 3, { slug: "web" }))
    }))

  it.effect("slugsStartingWith lists the workspace's base slug and its numeric suffixes", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const org = yield* setup
      yield* projects.insert(projectRow(org, 1, { slug: "web" }))
      yield* projects.insert(projectRow(org, 2, { slug: "web-2" }))
      const family = yield* projects.slugsStartingWith({ orgId: org.id, base: "web" })
      assert.deepStrictEqual([...family].sort(), ["web", "web-2"])
    }))

  it.effect("list pages the workspace's projects newest first by keyset", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const org = yield* setup
      const [a, b] = [projectRow(org, 1), projectRow(org, 2)]
      yield* projects.insert(a)
      yield* projects.insert(b)
      assert.deepStrictEqual((yield* projects.list({ orgId: org.id, limit: 10 })).map((p) => p.id), [b.id, a.id])
      const after = { at: b.createdAt, key: b.id }
      assert.deepStrictEqual((yield* projects.list({ orgId: org.id, limit: 10, after })).map((p) => p.id), [a.id])
    }))

  it.effect("archive is a guarded transition from active, under the workspace lock", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const tx = yield* Transactor
      const org = yield* setup
      const a = projectRow(org, 1)
      yield* projects.insert(a)
      const archived = yield* tx.withTransaction(
        Effect.andThen(
          (yield* OrganizationsRepo).lockWorkspace(org.id),
          projects.archive({ orgId: org.id, projectId: a.id, at: at(5) })
        )
      )
      assert.deepInclude(Option.getOrThrow(archived), { status: "archived", archivedAt: at(5) })
      assert.isTrue(Option.isNone(yield* projects.archive({ orgId: org.id, projectId: a.id, at: at(6) })))
    }))

  it.effect("restore is a guarded transition from archived", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const org = yield* setup
      const a = projectRow(org, 1, { status: "archived", archivedAt: at(1) })
      yield* projects.insert(a)
      const restored = yield* projects.restore({ orgId: org.id, projectId: a.id, at: at(7) })
      assert.deepInclude(Option.getOrThrow(restored), { status: "active", archivedAt: null })
      assert.isTrue(Option.isNone(yield* projects.restore({ orgId: org.id, projectId: a.id, at: at(8) })))
    }))

  it.effect("countActive counts the workspace's active projects only", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsRepo
      const org = yield* setup
      const a = projectRow(org, 1)
      yield* projects.insert(a)
      yield* projects.insert(projectRow(org, 2))
      assert.strictEqual(yield* projects.countActive(org.id), 2)
      yield* projects.archive({ orgId: org.id, projectId: a.id, at: at(5) })
      assert.strictEqual(yield* projects.countActive(org.id), 1)
      yield* projects.restore({ orgId: org.id, projectId: a.id, at: at(7) })
      assert.strictEqual(yield* projects.countActive(org.id), 2)
    }))
})

/** A workspace with two projects, `p` and `q`. */
const twoProjects = Effect.gen(function*() {
  const projects = yield* ProjectsRepo
  const org = yield* setup
  const [p, q] = [projectRow(org, 1), projectRow(org, 2)]
  yield* projects.insert(p)
  yield* projects.insert(q)
  return { org, p, q }
})

describeContract("EnvironmentsRepo", implementations, (it) => {
  it.effect("a slug is unique within its project only", () =>
    Effect.gen(function*() {
      const environments = yield* EnvironmentsRepo
      const { p, q } = yield* twoProjects
      yield* environments.insert(environmentRow(p, at(3), { slug: "staging" }))
      yield* environments.insert(environmentRow(q, at(3), { slug: "staging" }))
      const dup = yield* Effect.flip(environments.insert(environmentRow(p, at(4), { slug: "staging" })))
      assert.instanceOf(dup, UniqueViolation)
      assert.strictEqual(dup.constraint, "environments_project_slug_key")
      assert.deepStrictEqual(yield* environments.slugsStartingWith({ projectId: p.id, base: "staging" }), ["staging"])
    }))

  it.effect("findById and list see an environment under its own project only", () =>
    Effect.gen(function*() {
      const environments = yield* EnvironmentsRepo
      const { org, p, q } = yield* twoProjects
      const e = environmentRow(p, at(3))
      yield* environments.insert(e)
      const key = { orgId: org.id, projectId: p.id, environmentId: e.id }
      assert.deepStrictEqual(yield* environments.findById(key), Option.some(e))
      assert.isTrue(Option.isNone(yield* environments.findById({ ...key, projectId: q.id })))
      const listed = yield* environments.list({ orgId: org.id, projectId: p.id, limit: 10 })
      assert.deepStrictEqual(listed.map((row) => row.id), [e.id])
    }))

  it.effect("markActive records the push; archive is a guarded transition from active", () =>
    Effect.gen(function*() {
      const environments = yield* EnvironmentsRepo
      const { org, p } = yield* twoProjects
      const e = environmentRow(p, at(3))
      yield* environments.insert(e)
      const key = { orgId: org.id, projectId: p.id, environmentId: e.id }
      const used = yield* environments.markActive({ ...key, at: at(10) })
      assert.deepStrictEqual(Option.getOrThrow(used).lastActiveAt, at(10))
      const archived = yield* environments.archive({ ...key, at: at(11) })
      assert.deepInclude(Option.getOrThrow(archived), { status: "archived", archivedAt: at(11) })
      assert.isTrue(Option.isNone(yield* environments.archive({ ...key, at: at(12) })))
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
      yield* projects.insert(p)
      const neverUsed = environmentRow(p, old)
      const usedLongAgo = environmentRow(p, old, { lastActiveAt: new Date("2001-01-15T00:00:00.000Z") })
      const usedRecently = environmentRow(p, old, { lastActiveAt: new Date("2001-03-01T00:00:00.000Z") })
      const alreadyArchived = environmentRow(p, old, { status: "archived", archivedAt: old })
      for (const row of [neverUsed, usedLongAgo, usedRecently, alreadyArchived]) yield* environments.insert(row)
      const now = at(100)
      const first = yield* tx.withTransaction(environments.archiveIdle({ cutoff, now, limit: 1 }))
      const second = yield* tx.withTransaction(environments.archiveIdle({ cutoff, now, limit: 10 }))
      const third = yield* environments.archiveIdle({ cutoff, now, limit: 10 })
      assert.deepStrictEqual(first.map((row) => row.id), [neverUsed.id])
      assert.deepStrictEqual(second.map((row) => row.id), [usedLongAgo.id])
      assert.deepStrictEqual(third, [])
      assert.deepInclude(first[0]!, { status: "archived", archivedAt: now })
      const recent = yield* environments.findById({ orgId: org.id, projectId: p.id, environmentId: usedRecently.id })
      assert.strictEqual(Option.getOrThrow(recent).status, "active")
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
