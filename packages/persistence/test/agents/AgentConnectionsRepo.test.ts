/**
 * The agent connections repository contract, on every backend: one live (provider, name) per workspace, lists newest
 * first with the provider filter, updates of live rows only, crypto-shredding, and the KEK rotation primitives.
 */
import { AgentConnectionId, IdPrefix } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { agentConnectionsNameConstraint, AgentConnectionsRepo } from "../../src/agents/AgentConnectionsRepo.ts"
import type { AgentConnectionRow } from "../../src/agents/rows.ts"
import { UniqueViolation } from "../../src/errors.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const workspace = Effect.gen(function*() {
  const org = accountRootRow("Root")
  yield* Effect.flatMap(OrganizationsRepo, (repo) => repo.insert(org))
  return org
})

const connectionRow = (
  org: OrganizationRow,
  minutes: number,
  overrides: Partial<AgentConnectionRow> = {}
): AgentConnectionRow => ({
  id: newId(AgentConnectionId, IdPrefix.agentConnection),
  orgId: org.id,
  provider: "openai",
  name: `conn-${randomUUID().slice(0, 8)}`,
  configJson: "{}",
  keyHint: "…abcd",
  status: "verified",
  lastVerifiedAt: at(minutes),
  sealedKey: "v1.dek.nonce.tag.ciphertext",
  wrappedDataKey: "v1.kid.nonce.tag.ciphertext",
  kekId: "kid",
  createdBy: "usr_01J0000000000000000000000A",
  createdAt: at(minutes),
  updatedAt: at(minutes),
  deletedAt: null,
  ...overrides
})

const repositories = {
  memory: Layer.mergeAll(OrganizationsRepo.memory, AgentConnectionsRepo.memory),
  sql: Layer.mergeAll(OrganizationsRepo.sql, AgentConnectionsRepo.sql)
}

describeContract("AgentConnectionsRepo", repositories, (it) => {
  it.effect("inserts and finds live connections within their workspace only", () =>
    Effect.gen(function*() {
      const repo = yield* AgentConnectionsRepo
      const [org, other] = [yield* workspace, yield* workspace]
      const row = connectionRow(org, 1)
      yield* repo.insert(row)
      assert.deepStrictEqual(yield* repo.find({ orgId: org.id, connectionId: row.id }), Option.some(row))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: other.id, connectionId: row.id })))
    }))

  it.effect("one live (provider, name) per workspace; other providers, workspaces, deleted rows do not collide", () =>
    Effect.gen(function*() {
      const repo = yield* AgentConnectionsRepo
      const [org, other] = [yield* workspace, yield* workspace]
      const first = connectionRow(org, 1, { name: "default" })
      yield* repo.insert(first)
      const duplicate = yield* Effect.flip(repo.insert(connectionRow(org, 2, { name: "default" })))
      assert.instanceOf(duplicate, UniqueViolation)
      assert.strictEqual(duplicate.constraint, agentConnectionsNameConstraint)
      yield* repo.insert(connectionRow(org, 3, { name: "default", provider: "anthropic" }))
      yield* repo.insert(connectionRow(other, 3, { name: "default" }))
      assert.isTrue(Option.isSome(yield* repo.shred({ orgId: org.id, connectionId: first.id, at: at(4) })))
      yield* repo.insert(connectionRow(org, 5, { name: "default" }))
    }))

  it.effect("lists live rows newest first, optionally of one provider", () =>
    Effect.gen(function*() {
      const repo = yield* AgentConnectionsRepo
      const org = yield* workspace
      const a = connectionRow(org, 1)
      const b = connectionRow(org, 3, { provider: "gemini" })
      const c = connectionRow(org, 2)
      const gone = connectionRow(org, 4)
      yield* Effect.forEach([a, b, c, gone], repo.insert, { discard: true })
      yield* repo.shred({ orgId: org.id, connectionId: gone.id, at: at(5) })
      assert.deepStrictEqual((yield* repo.list({ orgId: org.id, provider: null })).map((row) => row.id), [
        b.id,
        c.id,
        a.id
      ])
      assert.deepStrictEqual((yield* repo.list({ orgId: org.id, provider: "openai" })).map((row) => row.id), [
        c.id,
        a.id
      ])
    }))

  it.effect("updates a live row's mutable fields; a taken name is a UniqueViolation; a deleted row is None", () =>
    Effect.gen(function*() {
      const repo = yield* AgentConnectionsRepo
      const org = yield* workspace
      const row = connectionRow(org, 1)
      const taken = connectionRow(org, 2)
      yield* Effect.forEach([row, taken], repo.insert, { discard: true })
      const next = { ...row, name: "renamed", configJson: "{\"a\":1}", status: "invalid" as const, updatedAt: at(3) }
      assert.deepStrictEqual(yield* repo.update(next), Option.some(next))
      const clash = yield* Effect.flip(repo.update({ ...next, name: taken.name }))
      assert.strictEqual(clash.constraint, agentConnectionsNameConstraint)
      yield* repo.shred({ orgId: org.id, connectionId: row.id, at: at(4) })
      assert.isTrue(Option.isNone(yield* repo.update({ ...next, name: "again" })))
    }))

  it.effect("shredding destroys the sealed key and the wrapped data key, once", () =>
    Effect.gen(function*() {
      const repo = yield* AgentConnectionsRepo
      const org = yield* workspace
      const row = connectionRow(org, 1)
      yield* repo.insert(row)
      const shredded = yield* repo.shred({ orgId: org.id, connectionId: row.id, at: at(2) })
      assert.deepStrictEqual(
        shredded,
        Option.some({ ...row, sealedKey: null, wrappedDataKey: null, deletedAt: at(2), updatedAt: at(2) })
      )
      assert.isTrue(Option.isNone(yield* repo.shred({ orgId: org.id, connectionId: row.id, at: at(3) })))
      assert.isTrue(Option.isNone(yield* repo.find({ orgId: org.id, connectionId: row.id })))
    }))

  it.effect("rotation: claims keys not under a KEK, re-wraps only from the expected KEK, counts what remains", () =>
    Effect.gen(function*() {
      const repo = yield* AgentConnectionsRepo
      const org = yield* workspace
      const oldKid = `old-${randomUUID()}`
      const newKid = `new-${randomUUID()}`
      const rows = [connectionRow(org, 1, { kekId: oldKid }), connectionRow(org, 2, { kekId: oldKid })]
      const gone = connectionRow(org, 3, { kekId: oldKid })
      yield* Effect.forEach([...rows, gone], repo.insert, { discard: true })
      yield* repo.shred({ orgId: org.id, connectionId: gone.id, at: at(4) })
      const before = yield* repo.countNotUnder(newKid)
      const claimed = (yield* repo.claimWrappedNotUnder({ kekId: newKid, afterId: "", limit: 10_000 }))
        .filter((key) => key.kekId === oldKid)
      const ids = rows.map((row) => row.id).sort()
      assert.deepStrictEqual(claimed.map((key) => key.id), ids, "in id order")
      const after = yield* repo.claimWrappedNotUnder({ kekId: newKid, afterId: ids[0] ?? "", limit: 10_000 })
      assert.deepStrictEqual(after.filter((key) => key.kekId === oldKid).map((key) => key.id), ids.slice(1))
      const [first] = rows
      assert.isDefined(first)
      const rewrap = { id: first.id, previousKekId: oldKid, wrappedDataKey: "v1.new.n.t.c", kekId: newKid }
      assert.isTrue(yield* repo.rewrap(rewrap))
      assert.isFalse(yield* repo.rewrap(rewrap), "already re-wrapped: not from the expected KEK any more")
      assert.isFalse(yield* repo.rewrap({ ...rewrap, id: gone.id }), "a shredded key stays shredded")
      assert.strictEqual(yield* repo.countNotUnder(newKid), before - 1)
      const stored = yield* repo.find({ orgId: org.id, connectionId: first.id })
      assert.deepStrictEqual(
        Option.map(stored, (row) => [row.wrappedDataKey, row.kekId, row.sealedKey]),
        Option.some(["v1.new.n.t.c", newKid, first.sealedKey])
      )
    }))
})
