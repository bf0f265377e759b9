/** The secrets repository contract, on every backend: active-key uniqueness per scope, scoped lists, rotate, revoke. */
import { EnvironmentId, ProjectId } from "@cp/domain/ids"
import { SecretId } from "@cp/domain/secrets"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import type { SecretRow } from "../../src/secrets/rows.ts"
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

const projectId = () => newId(ProjectId, "prj_")
const environmentId = () => newId(EnvironmentId, "env_")

const secretRow = (org: OrganizationRow, minutes: number, overrides: Partial<SecretRow> = {}): SecretRow => ({
  id: newId(SecretId, "sec_"),
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

describeContract("SecretsRepo", repositories, (it) => {
  it.effect("inserts and finds within its workspace only", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const [org, other] = [yield* workspace, yield* workspace]
      const row = secretRow(org, 1)
      yield* repo.insert(row)
      assert.deepStrictEqual(yield* repo.find(org.id, row.id), Option.some(row))
      assert.isTrue(Option.isNone(yield* repo.find(other.id, row.id)))
      assert.isTrue(Option.isNone(yield* repo.find(org.id, newId(SecretId, "sec_"))))
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
      assert.isTrue(Option.isSome(yield* repo.revoke(org.id, first.id, at(5))))
      yield* repo.insert(secretRow(org, 6, { secretKey: "DATABASE_URL" }))
    }))

  it.effect("lists active rows of exactly one scope, or all scopes, newest first by keyset", () =>
    Effect.gen(function*() {
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
      yield* repo.revoke(org.id, revoked.id, at(9))
      const newest = (rows: ReadonlyArray<SecretRow>) =>
        [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1))

      assert.deepStrictEqual(yield* repo.list(org.id, { kind: "organization" }, { limit: 10 }), newest(orgRows))
      assert.deepStrictEqual(yield* repo.list(org.id, { kind: "project", projectId: project }, { limit: 10 }), [
        projectRow
      ])
      assert.deepStrictEqual(
        yield* repo.list(org.id, { kind: "environment", projectId: project, environmentId: environment }, {
          limit: 10
        }),
        [envRow]
      )
      const all = newest([...orgRows, projectRow, otherProjectRow, envRow])
      assert.deepStrictEqual(yield* repo.list(org.id, { kind: "all" }, { limit: 10 }), all)
      const page1 = yield* repo.list(org.id, { kind: "all" }, { limit: 3 })
      const last = page1[2]!
      const page2 = yield* repo.list(org.id, { kind: "all" }, {
        limit: 10,
        after: { at: last.createdAt, key: last.id }
      })
      assert.deepStrictEqual([...page1, ...page2], all)
      assert.deepStrictEqual(yield* repo.list((yield* workspace).id, { kind: "all" }, { limit: 10 }), [])
    }))

  it.effect("rotates an active secret (version + 1, lastRotatedAt) and revokes it once", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const [org, other] = [yield* workspace, yield* workspace]
      const row = secretRow(org, 1)
      yield* repo.insert(row)
      assert.isTrue(Option.isNone(yield* repo.rotate(other.id, row.id, { sealedValue: "x", kekId: "k", at: at(2) })))
      const rotated = Option.getOrThrow(
        yield* repo.rotate(org.id, row.id, { sealedValue: "v1.new", kekId: "k2", at: at(2) })
      )
      assert.deepStrictEqual(rotated, {
        ...row,
        sealedValue: "v1.new",
        kekId: "k2",
        version: 2,
        lastRotatedAt: at(2),
        updatedAt: at(2)
      })
      assert.isTrue(Option.isNone(yield* repo.revoke(other.id, row.id, at(3))))
      const revoked = Option.getOrThrow(yield* repo.revoke(org.id, row.id, at(3)))
      assert.deepStrictEqual(revoked, { ...rotated, status: "revoked", revokedAt: at(3), updatedAt: at(3) })
      assert.isTrue(Option.isNone(yield* repo.revoke(org.id, row.id, at(4))), "revoking twice changes nothing")
      assert.isTrue(Option.isNone(yield* repo.rotate(org.id, row.id, { sealedValue: "y", kekId: "k", at: at(4) })))
      assert.deepStrictEqual(yield* repo.find(org.id, row.id), Option.some(revoked))
    }))

  it.effect("an insert is undone with its transaction", () =>
    Effect.gen(function*() {
      const repo = yield* SecretsRepo
      const tx = yield* Transactor
      const org = yield* workspace
      const row = secretRow(org, 1)
      yield* Effect.exit(tx.withTransaction(Effect.andThen(repo.insert(row), Effect.fail("abort"))))
      assert.isTrue(Option.isNone(yield* repo.find(org.id, row.id)))
    }))
})
