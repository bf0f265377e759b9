import { ApiKeyId, IdPrefix, ProjectId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { type ApiKeyRow, ApiKeysRepo } from "../../src/apiKeys/ApiKeysRepo.ts"
import { UniqueViolation } from "../../src/errors.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, apiKeyRow as keyRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const orgRow = (): OrganizationRow => accountRootRow("Keys")

const projectKey = (org: OrganizationRow, minutes: number, projectId: ProjectId) =>
  keyRow(org, minutes, { role: "project_viewer", projectId })

const repositories = {
  memory: Layer.mergeAll(ApiKeysRepo.memory, OrganizationsRepo.memory),
  sql: Layer.mergeAll(ApiKeysRepo.sql, OrganizationsRepo.sql)
}

/** A fresh workspace with the given keys inserted. */
const seed = Effect.fnUntraced(function*(rows: (org: OrganizationRow) => ReadonlyArray<ApiKeyRow>) {
  const org = orgRow()
  yield* (yield* OrganizationsRepo).insert(org)
  const keys = rows(org)
  const repo = yield* ApiKeysRepo
  yield* Effect.forEach(keys, repo.insert, { discard: true })
  return { org, keys }
})

/** Keys of a workspace (some of `project`, one of another project) and of another workspace, newest first. */
const seededKeys = Effect.gen(function*() {
  const project = newId(ProjectId, IdPrefix.project)
  const { org, keys } = yield* seed((org) => [
    keyRow(org, 1),
    projectKey(org, 2, project),
    keyRow(org, 3),
    keyRow(org, 3),
    projectKey(org, 4, newId(ProjectId, IdPrefix.project)),
    projectKey(org, 5, project)
  ])
  yield* seed((other) => [keyRow(other, 6), projectKey(other, 6, project)])
  const newestFirst = [...keys].sort((a, b) =>
    b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
  )
  return { org, project, newestFirst }
})

class Abort extends Data.TaggedError("Abort")<{}> {}

describeContract("ApiKeysRepo", repositories, (it) => {
  it.effect("finds a key by id within its workspace only, and by secret hash", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org, keys: [key] } = yield* seed((org) => [keyRow(org, 0, { expiresAt: at(60) })])
      const other = yield* seed(() => [])
      if (key === undefined) return assert.fail("no key seeded")
      assert.deepStrictEqual(yield* repo.findById({ orgId: org.id, id: key.id }), Option.some(key))
      assert.isTrue(Option.isNone(yield* repo.findById({ orgId: other.org.id, id: key.id })))
      assert.deepStrictEqual(yield* repo.findBySecretHash(key.secretHash), Option.some(key))
      assert.isTrue(Option.isNone(yield* repo.findBySecretHash("0".repeat(64))))
    }))

  it.effect("a duplicate secret hash or principal is a UniqueViolation", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org, keys: [key] } = yield* seed((org) => [keyRow(org, 0)])
      if (key === undefined) return assert.fail("no key seeded")
      const sameHash = yield* Effect.flip(repo.insert(keyRow(org, 1, { secretHash: key.secretHash })))
      assert.instanceOf(sameHash, UniqueViolation)
      assert.strictEqual(sameHash.constraint, "api_keys_secret_hash_key")
      const samePrincipal = yield* Effect.flip(
        repo.insert(keyRow(org, 1, { servicePrincipalId: key.servicePrincipalId }))
      )
      assert.instanceOf(samePrincipal, UniqueViolation)
    }))

  it.effect("a failed transaction leaves neither the key nor its principal behind", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org } = yield* seed(() => [])
      const key = keyRow(org, 0)
      const error = yield* Effect.flip((yield* Transactor).withTransaction(Effect.gen(function*() {
        yield* repo.insert(key)
        return yield* new Abort()
      })))
      assert.instanceOf(error, Abort)
      assert.isTrue(Option.isNone(yield* repo.findById({ orgId: org.id, id: key.id })))
      // The principal went too: the same principal id inserts cleanly.
      yield* repo.insert(keyRow(org, 1, { servicePrincipalId: key.servicePrincipalId }))
    }))

  it.effect("lists a workspace's keys newest first, in keyset pages", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org, newestFirst } = yield* seededKeys
      assert.deepStrictEqual(yield* repo.list({ orgId: org.id, limit: 10 }), newestFirst)
      const first = yield* repo.list({ orgId: org.id, limit: 3 })
      assert.deepStrictEqual(first, newestFirst.slice(0, 3))
      const last = first[2]
      if (last === undefined) return assert.fail("short page")
      assert.deepStrictEqual(
        yield* repo.list({ orgId: org.id, limit: 10, after: { at: last.createdAt, key: last.id } }),
        newestFirst.slice(3)
      )
    }))

  it.effect("lists only the keys of one project when asked", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org, project, newestFirst } = yield* seededKeys
      assert.deepStrictEqual(
        yield* repo.list({ orgId: org.id, projectId: project, limit: 10 }),
        newestFirst.filter((key) => key.projectId === project)
      )
      assert.deepStrictEqual(
        yield* repo.list({ orgId: org.id, projectId: newId(ProjectId, IdPrefix.project), limit: 10 }),
        []
      )
    }))

  it.effect("revoke sets revokedAt once; a second revoke changes nothing", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org, keys: [key] } = yield* seed((org) => [keyRow(org, 0)])
      if (key === undefined) return assert.fail("no key seeded")
      assert.isTrue(yield* repo.revoke({ id: key.id, now: at(10) }))
      assert.isFalse(yield* repo.revoke({ id: key.id, now: at(20) }))
      assert.deepStrictEqual(
        yield* repo.findById({ orgId: org.id, id: key.id }),
        Option.some({ ...key, revokedAt: at(10) })
      )
      assert.isFalse(yield* repo.revoke({ id: Schema.decodeSync(ApiKeyId)(randomUUID()), now: at(10) }))
    }))

  it.effect("touchLastUsed writes when lastUsedAt is unset or stale, and not otherwise", () =>
    Effect.gen(function*() {
      const repo = yield* ApiKeysRepo
      const { org, keys: [key] } = yield* seed((org) => [keyRow(org, 0)])
      if (key === undefined) return assert.fail("no key seeded")
      assert.isTrue(yield* repo.touchLastUsed({ id: key.id, now: at(1), staleBefore: at(0) }))
      assert.isFalse(
        yield* repo.touchLastUsed({ id: key.id, now: at(1.5), staleBefore: at(0.5) }),
        "used 30 s ago: no write"
      )
      assert.deepStrictEqual(
        Option.map(yield* repo.findById({ orgId: org.id, id: key.id }), (row) => row.lastUsedAt),
        Option.some(at(1))
      )
      assert.isTrue(yield* repo.touchLastUsed({ id: key.id, now: at(3), staleBefore: at(2) }))
      assert.deepStrictEqual(
        Option.map(yield* repo.findById({ orgId: org.id, id: key.id }), (row) => row.lastUsedAt),
        Option.some(at(3))
      )
    }))
})
