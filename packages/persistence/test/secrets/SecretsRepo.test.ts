/** The secrets repository contract, on every backend: active-key uniqueness per scope, scoped lists, rotate, revoke. */
import { EnvironmentId, IdPrefix, ProjectId, SecretId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import type { SecretRow, SecretScopeFilter } from "../../src/secrets/rows.ts"
import { secretsActiveKeyConstraint, SecretsRepo } from "../../src/secrets/SecretsRepo.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const orgRow = (): OrganizationRow => accountRootRow("Root")

const workspace = Effect.gen(function*() {
  const org = orgRow()
  yield* Effect.flatMap(OrganizationsRepo, (repo) => repo.insert(org))
  return org
})

const projectId = () => newId(ProjectId, IdPrefix.project)
const environmentId = () => newId(EnvironmentId, IdPrefix.environment)

const secretRow = (org: OrganizationRow, minutes: number, overrides: Partial<SecretRow> = {}): SecretRow => ({
  id: newId(SecretId, IdPrefix.secret),
  orgId: org.id,
  projectId: null,
  environmentId: null,
  scopeKind: "organization",
  secretKey: `KEY_${randomUUID().slice(0, 8).toUpperCase().replaceAll("-", "_")}`,
  displayName: "A secret",
  status: "active",
  version: 1,
  sealedValue: "v1.kid.nonce.tag.ciphertext",
  kekId: "kid",
  rotationPolicy: null,
  lastRotatedAt: null,
  expiresAt: null,
  createdBy: "usr_01J0000000000000000000000A",
  createdAt: at(minutes),
  updatedAt: at(minutes),
  revokedAt: null,
  ...overrides
})

const repositories = {
  memory: Layer.mergeAll(OrganizationsRepo.memory, SecretsRepo.memory),
  sql: Layer.mergeAll(OrganizationsRepo.sql, SecretsRepo.sql)
}

/** One secret of each list: four on the workspace, one per project and environment, one revoked. */
const seededSecrets = Effect.gen(function*() {
  const repo = yield* SecretsRepo
  const org = yield* workspace
  const project = projectId()
  const environment = environmentId()
  const orgRows = [secretRow(org, 1), secretRow(org, 3), secretRow(org, 2), secretRow(org, 2)]
  const projectRow = secretRow(org, 5, { scopeKind: "project", projectId: project })
  const otherProjectRow = secretRow(org, 6, { scopeKind: "project", projectId: projectId() })
  const envRow = secretRow(org, 7, { scopeKind: "environment", projectId: project, environmentId: environment })
  const revoked = secretRow(org, 8)
  yield* Effect.forEach([...orgRows, projectRow, otherProjectRow, envRow, revoked], repo.insert, { discard: true })
  yield* repo.revoke({ orgId: org.id, secretId: revoked.id, at: at(9) })
  const all = newest([...orgRows, projectRow, otherProjectRow, envRow])
  return { org, project, environment, orgRows, projectRow, envRow, all }
})

const newest = (rows: ReadonlyArray<SecretRow>) =>
  [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1))

/** A secret of one workspace, and another workspace. */
const oneSecret = Effect.gen(function*() {
  const [org, other] = [yield* workspace, yield* workspace]
  const row = secretRow(org, 1)
  yield* (yield* SecretsRepo).insert(row)
  return { org, other, row, key: { orgId: org.id, secretId: row.id } }
})

describeContract("SecretsRepo", repositories, (it) => {
  it.effect("inserts and finds within its workspace only", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const { org, other, row } = yield* oneSecret
      assert.deepStrictEqual(yield* repo.find({ orgId: org.id, secretId: row.id }), Option.some(row))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: other.id, secretId: row.id })))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, secretId: newId(SecretId, IdPrefix.secret) })))
    }))

  it.effect("keeps one active secret per key and scope; other scopes and revoked rows do not collide", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const org = yield* workspace
      const project = projectId()
      const environment = environmentId()
      const first = secretRow(org, 1, { secretKey: "DATABASE_URL" })
      yield* repo.insert(first)
      const duplicate = yield* Effect.flip(repo.insert(secretRow(org, 2, { secretKey: "DATABASE_URL" })))
      assert.instanceOf(duplicate, UniqueViolation)
      assert.strictEqual(duplicate.constraint, secretsActiveKeyConstraint)
      // The same key at project and environment scope is another secret.
      yield* repo.insert(secretRow(org, 3, { secretKey: "DATABASE_URL", scopeKind: "project", projectId: project }))
      yield* repo.insert(
        secretRow(org, 4, {
          secretKey: "DATABASE_URL",
          scopeKind: "environment",
          projectId: project,
          environmentId: environment
        })
      )
      // Once revoked, the key is free again.
      assert.isTrue(Option.isSome(yield* repo.revoke({ orgId: org.id, secretId: first.id, at: at(5) })))
      yield* repo.insert(secretRow(org, 6, { secretKey: "DATABASE_URL" }))
    }))

  it.effect("lists the active rows of exactly one scope, newest first", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const { org, project, environment, orgRows, projectRow, envRow } = yield* seededSecrets
      const list = (filter: SecretScopeFilter) => repo.list({ orgId: org.id, filter, limit: 10 })
      assert.deepStrictEqual(yield* list({ kind: "organization" }), newest(orgRows))
      assert.deepStrictEqual(yield* list({ kind: "project", projectId: project }), [projectRow])
      assert.deepStrictEqual(
        yield* list({ kind: "environment", projectId: project, environmentId: environment }),
        [envRow]
      )
    }))

  it.effect("lists the active rows of every scope of the workspace by keyset", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const { org, all } = yield* seededSecrets
      const filter = { kind: "all" as const }
      assert.deepStrictEqual(yield* repo.list({ orgId: org.id, filter, limit: 10 }), all)
      const page1 = yield* repo.list({ orgId: org.id, filter, limit: 3 })
      const last = page1[2]!
      const page2 = yield* repo.list({ orgId: org.id, filter, limit: 10, after: { at: last.createdAt, key: last.id } })
      assert.deepStrictEqual([...page1, ...page2], all)
      assert.deepStrictEqual(yield* repo.list({ orgId: (yield* workspace).id, filter, limit: 10 }), [])
    }))

  it.effect("rotates an active secret of its workspace: version + 1, lastRotatedAt", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const { other, row, key } = yield* oneSecret
      const elsewhere = { orgId: other.id, secretId: row.id }
      assert.isTrue(Option.isNone(yield* repo.rotate({ ...elsewhere, sealedValue: "x", kekId: "k", at: at(2) })))
      const rotated = Option.getOrThrow(yield* repo.rotate({ ...key, sealedValue: "v1.new", kekId: "k2", at: at(2) }))
      assert.deepStrictEqual(rotated, {
        ...row,
        sealedValue: "v1.new",
        kekId: "k2",
        version: 2,
        lastRotatedAt: at(2),
        updatedAt: at(2)
      })
    }))

  it.effect("revokes an active secret of its workspace once; a revoked secret no longer rotates", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const { other, row, key } = yield* oneSecret
      assert.isTrue(Option.isNone(yield* repo.revoke({ orgId: other.id, secretId: row.id, at: at(3) })))
      const revoked = Option.getOrThrow(yield* repo.revoke({ ...key, at: at(3) }))
      assert.deepStrictEqual(revoked, { ...row, status: "revoked", revokedAt: at(3), updatedAt: at(3) })
      assert.isTrue(Option.isNone(yield* repo.revoke({ ...key, at: at(4) })), "revoking twice changes nothing")
      assert.isTrue(Option.isNone(yield* repo.rotate({ ...key, sealedValue: "y", kekId: "k", at: at(4) })))
      assert.deepStrictEqual(yield* repo.find(key), Option.some(revoked))
    }))

  it.effect("an insert is undone with its transaction", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const tx = yield* Transactor
      const org = yield* workspace
      const row = secretRow(org, 1)
      yield* Effect.exit(tx.withTransaction(Effect.andThen(repo.insert(row), Effect.fail("abort"))))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, secretId: row.id })))
    }))
})
