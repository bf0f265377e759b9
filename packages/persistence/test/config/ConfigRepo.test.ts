import { EnvironmentId, FeatureFlagId, IdPrefix, OrgId, ProjectId, SettingId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { ConfigRepo } from "../../src/config/ConfigRepo.ts"
import type { ConfigScope, FeatureFlagRow, SettingRow } from "../../src/config/rows.ts"
import { UniqueViolation } from "../../src/errors.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const repositories = {
  memory: Layer.mergeAll(OrganizationsRepo.memory, ConfigRepo.memory),
  sql: Layer.mergeAll(OrganizationsRepo.sql, ConfigRepo.sql)
}

const workspace = Effect.fnUntraced(function*() {
  const org = accountRootRow("Root")
  yield* (yield* OrganizationsRepo).insert(org)
  return org
})

const scopesOf = (orgId: OrgId): readonly [ConfigScope, ConfigScope, ConfigScope] => {
  const projectId = newId(ProjectId, IdPrefix.project)
  return [
    { orgId, projectId: null, environmentId: null },
    { orgId, projectId, environmentId: null },
    { orgId, projectId, environmentId: newId(EnvironmentId, IdPrefix.environment) }
  ]
}

const kindOf = (scope: ConfigScope) =>
  scope.environmentId !== null
    ? "environment" as const
    : scope.projectId !== null
    ? "project" as const
    : "organization" as const

const settingRow = (
  scope: ConfigScope,
  key: string,
  minutes: number,
  overrides: Partial<SettingRow> = {}
): SettingRow => ({
  id: newId(SettingId, IdPrefix.setting),
  ...scope,
  scopeKind: kindOf(scope),
  key,
  valueJson: JSON.stringify({ n: minutes }),
  valueType: "json",
  visibility: "internal",
  overridable: true,
  description: null,
  createdAt: at(minutes),
  updatedAt: at(minutes),
  ...overrides
})

const flagRow = (scope: ConfigScope, key: string, minutes: number): FeatureFlagRow => ({
  id: newId(FeatureFlagId, IdPrefix.featureFlag),
  ...scope,
  scopeKind: kindOf(scope),
  key,
  enabled: true,
  valueJson: "null",
  description: "d",
  createdAt: at(minutes),
  updatedAt: at(minutes)
})

class Abort extends Data.TaggedError("Abort")<{}> {}

/** A workspace's three scopes with settings: `a` at each (1, 4, 5 minutes), `b` and `c` on the workspace. */
const seededSettings = Effect.gen(function*() {
  const repo = yield* ConfigRepo
  const org = yield* workspace()
  const [ws, prj, env] = scopesOf(org.id)
  const rows = [
    settingRow(ws, "a", 1),
    settingRow(ws, "b", 3),
    settingRow(ws, "c", 2),
    settingRow(prj, "a", 4),
    settingRow(env, "a", 5)
  ]
  yield* Effect.forEach(rows, repo.insertSetting, { discard: true })
  return { org, ws, prj, env, rows }
})

describeContract("ConfigRepo settings", repositories, (it) => {
  it.effect("findSetting finds a setting at exactly its scope", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { ws, prj, env, rows } = yield* seededSettings
      const first = rows[0]!
      assert.deepStrictEqual(yield* repo.findSetting({ ...ws, id: first.id }), Option.some(first))
      assert.isTrue(Option.isNone(yield* repo.findSetting({ ...prj, id: first.id })))
      assert.isTrue(Option.isNone(yield* repo.findSetting({ ...env, id: rows[3]!.id })))
    }))

  it.effect("listSettings pages one scope newest first by keyset", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { ws, env, rows } = yield* seededSettings
      const page1 = yield* repo.listSettings({ ...ws, limit: 2 })
      assert.deepStrictEqual(page1.map((row) => row.key), ["b", "c"])
      const page2 = yield* repo.listSettings({ ...ws, limit: 2, after: { at: page1[1]!.createdAt, key: page1[1]!.id } })
      assert.deepStrictEqual(page2.map((row) => row.key), ["a"])
      assert.deepStrictEqual((yield* repo.listSettings({ ...env, limit: 10 })).map((row) => row.id), [rows[4]!.id])
    }))

  it.effect("a key is unique per scope: the same key at the same scope is a UniqueViolation", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { ws, prj } = yield* seededSettings
      const dup = yield* Effect.flip(repo.insertSetting(settingRow(prj, "a", 6)))
      assert.deepStrictEqual(dup, new UniqueViolation({ constraint: "settings_scope_key" }))
      const dupWs = yield* Effect.flip(repo.insertSetting(settingRow(ws, "b", 6)))
      assert.instanceOf(dupWs, UniqueViolation)
      assert.strictEqual(dupWs.constraint, "settings_scope_key")
    }))

  it.effect("settingsWithKey finds the key at every scope of the workspace", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { org, rows } = yield* seededSettings
      const withKey = yield* repo.settingsWithKey({ orgId: org.id, key: "a" })
      assert.sameMembers(withKey.map((row) => row.id), [rows[0]!.id, rows[3]!.id, rows[4]!.id])
    }))

  it.effect("JSON values of every kind round-trip", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const org = yield* workspace()
      const [ws] = scopesOf(org.id)
      for (const value of [null, "s", 1.5, true, [1, { a: "b" }]]) {
        const row = settingRow(ws, `v${randomUUID()}`, 1, { valueJson: JSON.stringify(value) })
        yield* repo.insertSetting(row)
        const found = Option.getOrThrow(yield* repo.findSetting({ ...ws, id: row.id }))
        assert.deepStrictEqual(JSON.parse(found.valueJson), value)
      }
    }))

  it.effect("updateSetting replaces a row of the same scope only", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const org = yield* workspace()
      const [ws, prj] = scopesOf(org.id)
      const row = settingRow(ws, "upd", 1)
      yield* repo.insertSetting(row)
      const next: SettingRow = {
        ...row,
        valueJson: "\"x\"",
        valueType: "string",
        visibility: "masked",
        overridable: false,
        description: "now",
        updatedAt: at(9)
      }
      assert.deepStrictEqual(yield* repo.updateSetting(next), Option.some(next))
      assert.deepStrictEqual(yield* repo.findSetting({ ...ws, id: row.id }), Option.some(next))
      assert.isTrue(Option.isNone(yield* repo.updateSetting({ ...next, ...prj })))
    }))

  it.effect("an insert inside a failed transaction is rolled back", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const tx = yield* Transactor
      const org = yield* workspace()
      const [ws] = scopesOf(org.id)
      const row = settingRow(ws, "rolled", 1)
      yield* Effect.flip(tx.withTransaction(Effect.andThen(repo.insertSetting(row), Effect.fail(new Abort()))))
      assert.isTrue(Option.isNone(yield* repo.findSetting({ ...ws, id: row.id })))
    }))
})

/** A workspace's three scopes with flags `f` (at each scope) and `g` (on the workspace). */
const seededFlags = Effect.gen(function*() {
  const repo = yield* ConfigRepo
  const org = yield* workspace()
  const [ws, prj, env] = scopesOf(org.id)
  const flags = [flagRow(ws, "f", 1), flagRow(ws, "g", 2), flagRow(prj, "f", 3), flagRow(env, "f", 4)]
  yield* Effect.forEach(flags, repo.insertFlag, { discard: true })
  return { ws, prj, env, flags }
})

describeContract("ConfigRepo feature flags", repositories, (it) => {
  it.effect("findFlag finds a flag at exactly its scope", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { ws, env, flags } = yield* seededFlags
      assert.deepStrictEqual(yield* repo.findFlag({ ...ws, id: flags[0]!.id }), Option.some(flags[0]!))
      assert.isTrue(Option.isNone(yield* repo.findFlag({ ...env, id: flags[0]!.id })))
    }))

  it.effect("listFlags lists one scope newest first", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { ws, prj, flags } = yield* seededFlags
      assert.deepStrictEqual((yield* repo.listFlags({ ...ws, limit: 10 })).map((row) => row.key), ["g", "f"])
      assert.deepStrictEqual((yield* repo.listFlags({ ...prj, limit: 10 })).map((row) => row.id), [flags[2]!.id])
    }))

  it.effect("a key is unique per scope: the same key at the same scope is a UniqueViolation", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { env } = yield* seededFlags
      const dup = yield* Effect.flip(repo.insertFlag(flagRow(env, "f", 5)))
      assert.instanceOf(dup, UniqueViolation)
      assert.strictEqual(dup.constraint, "feature_flags_scope_key")
    }))

  it.effect("updateFlag replaces a row of the same scope only", () =>
    Effect.gen(function*() {
      const repo = yield* ConfigRepo
      const { ws, flags } = yield* seededFlags
      const next: FeatureFlagRow = {
        ...flags[3]!,
        enabled: false,
        valueJson: "{\"pct\":5}",
        description: null,
        updatedAt: at(8)
      }
      assert.deepStrictEqual(yield* repo.updateFlag(next), Option.some(next))
      assert.isTrue(Option.isNone(yield* repo.updateFlag({ ...next, ...ws })))
    }))
})
