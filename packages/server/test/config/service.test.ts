/**
 * The configuration service on memory repositories, with the edge's own workspace resolver: scope checks, value
 * types, the `overridable` rule, the resolution walk with the account guardrail and the built-in defaults, masking
 * by the caller's write permission, and events that carry no values. The layer graph is the server's own minus HTTP.
 */
import { type Actor, NotFound, type OrgId, ValidationFailed } from "@cp/domain"
import { EnvironmentsRepo, EventLogRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { BUILTIN_SETTING_DEFAULTS } from "../../src/config/resolution.ts"
import { ConfigService, type ConfigTarget } from "../../src/config/service.ts"
import { mint } from "../../src/platform/ids.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { fieldsOf } from "../support/errors.ts"
import { areaServicesLayer, seedMembership, seedProject, userActor } from "../support/services.ts"

const TestLayer = ConfigService.layer.pipe(Layer.provideMerge(areaServicesLayer))

const resolveWorkspace = (ref: string, actor: Actor) =>
  Effect.flatMap(WorkspaceResolver, (resolver) => resolver.resolve(ref, actor)).pipe(Effect.map(Option.getOrThrow))

/** A project and an environment of `orgId`, written straight into the repositories. */
const projectIn = (orgId: OrgId) =>
  Effect.gen(function*() {
    const now = new Date(0)
    const projectId = yield* seedProject(orgId)
    const environmentId = mint.environment(now.getTime())
    yield* (yield* EnvironmentsRepo).insert({
      id: environmentId,
      orgId,
      projectId,
      name: "E",
      slug: `e-${environmentId.slice(-8).toLowerCase()}`,
      status: "active",
      createdAt: now,
      updatedAt: now,
      archivedAt: null,
      lastActiveAt: null
    })
    return { projectId, environmentId }
  }).pipe(Effect.orDie)

/** An owner with an account root and a child workspace, each with a project and environment, as targets. */
const setup = Effect.gen(function*() {
  const owner = userActor()
  const workspaces = yield* WorkspacesService
  const root = (yield* workspaces.create(owner, { name: `Root ${owner.userId.slice(-6)}` })).organization
  const child = (yield* workspaces.create(owner, { name: `Child ${owner.userId.slice(-6)}` })).organization
  const targetsOf = Effect.fnUntraced(function*(orgId: OrgId, actor: Actor) {
    const workspace = yield* resolveWorkspace(orgId, actor)
    const { environmentId, projectId } = yield* projectIn(orgId)
    const ws: ConfigTarget = { workspace, projectId: null, environmentId: null }
    return { ws, prj: { ...ws, projectId }, env: { ...ws, projectId, environmentId } }
  })
  return { owner, root, child, rootT: yield* targetsOf(root.id, owner), childT: yield* targetsOf(child.id, owner) }
})

/** Where a key resolves from at `target`, and the value it resolves to. */
const resolvedFrom = (target: ConfigTarget, key = "walk") =>
  Effect.map(
    Effect.flatMap(ConfigService, (config) => config.resolveSetting(target, key)),
    ({ setting }) => [setting.inheritedFrom.scopeKind, setting.value]
  )

describe("ConfigService", () => {
  it.effect("a project or environment of another workspace is NotFound", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { childT, rootT } = yield* setup
      const ghost = { ...childT.ws, projectId: rootT.prj.projectId }
      const e1 = yield* Effect.flip(config.listSettings(ghost, {}))
      assert.instanceOf(e1, NotFound)
      assert.strictEqual(e1.error.message, "Project not found")
      const e2 = yield* Effect.flip(
        config.listFeatureFlags({ ...childT.prj, environmentId: rootT.env.environmentId }, {})
      )
      assert.instanceOf(e2, NotFound)
      assert.strictEqual(e2.error.message, "Environment not found")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a value not of its declared type is a ValidationFailed on value", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { owner, childT } = yield* setup
      const e3 = yield* Effect.flip(
        config.createSetting(owner, childT.ws, { key: "n", value: "x", valueType: "number" })
      )
      assert.instanceOf(e3, ValidationFailed)
      assert.deepStrictEqual(e3.error.details, { fields: { value: ["must be a number value"] } })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("overridable anywhere but an account root's workspace scope is a ValidationFailed on overridable", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { owner, childT, rootT } = yield* setup
      const e4 = yield* Effect.flip(config.createSetting(owner, childT.ws, { key: "n", value: 1, overridable: false }))
      assert.instanceOf(e4, ValidationFailed)
      assert.hasAllKeys(fieldsOf(e4), ["overridable"])
      const e5 = yield* Effect.flip(config.createSetting(owner, rootT.env, { key: "n", value: 1, overridable: true }))
      assert.instanceOf(e5, ValidationFailed)
      assert.hasAllKeys(fieldsOf(e5), ["overridable"])
      const ok = yield* config.createSetting(owner, rootT.ws, { key: "n", value: 1, overridable: false })
      assert.strictEqual(ok.setting.value, 1)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("resolve: a built-in key answers its default; a key set nowhere is NotFound", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { childT } = yield* setup
      assert.deepStrictEqual(yield* resolvedFrom(childT.env, "audit.retentionDays"), [
        "default",
        BUILTIN_SETTING_DEFAULTS["audit.retentionDays"]!.value
      ])
      const none = yield* Effect.flip(config.resolveSetting(childT.env, "walk"))
      assert.instanceOf(none, NotFound)
      assert.strictEqual(none.error.details["key"], "walk")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("resolve walks environment, project, workspace, account: the deepest scope set answers", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { owner, childT, rootT } = yield* setup
      yield* config.createSetting(owner, rootT.ws, { key: "walk", value: "account" })
      assert.deepStrictEqual(yield* resolvedFrom(childT.env), ["account", "account"])
      assert.deepStrictEqual(yield* resolvedFrom(rootT.env), ["organization", "account"])
      yield* config.createSetting(owner, childT.ws, { key: "walk", value: "ws" })
      assert.deepStrictEqual(yield* resolvedFrom(childT.env), ["organization", "ws"])
      yield* config.createSetting(owner, childT.prj, { key: "walk", value: "prj" })
      assert.deepStrictEqual(yield* resolvedFrom(childT.env), ["project", "prj"])
      yield* config.createSetting(owner, childT.env, { key: "walk", value: "env" })
      assert.deepStrictEqual(yield* resolvedFrom(childT.env), ["environment", "env"])
      yield* config.createSetting(owner, rootT.env, { key: "walk", value: "root-env" })
      assert.deepStrictEqual(yield* resolvedFrom(rootT.env), ["environment", "root-env"])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a locked guardrail on the account root wins at every scope of its children; the root answers itself", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { owner, childT, rootT } = yield* setup
      const account = yield* config.createSetting(owner, rootT.ws, { key: "walk", value: "account" })
      for (const target of [childT.ws, childT.prj, childT.env, rootT.env]) {
        yield* config.createSetting(owner, target, { key: "walk", value: "lower" })
      }
      yield* config.updateSetting(owner, rootT.ws, account.setting.id, { overridable: false })
      for (const target of [childT.env, childT.prj, childT.ws]) {
        const { setting } = yield* config.resolveSetting(target, "walk")
        assert.deepInclude(setting, { value: "account", overridable: false, inheritedFrom: { scopeKind: "account" } })
      }
      for (const target of [rootT.env, rootT.prj, rootT.ws]) {
        assert.deepStrictEqual(yield* resolvedFrom(target), ["organization", "account"])
      }
    }).pipe(Effect.provide(TestLayer)))

  it.effect("masked values: hidden without the write permission where the setting lives; writers see them marked", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { owner, child, childT } = yield* setup
      const viewer = userActor()
      yield* seedMembership(child.id, viewer, "viewer")
      const builder = userActor()
      yield* seedMembership(child.id, builder, "builder")
      yield* config.createSetting(owner, childT.prj, { key: "m", value: "s3cret", visibility: "masked" })
      const seenBy = Effect.fnUntraced(function*(actor: Actor) {
        const workspace = yield* resolveWorkspace(child.id, actor)
        const target = { ...childT.env, workspace }
        const { setting } = yield* config.resolveSetting(target, "m")
        const listed = (yield* config.listSettings({ ...childT.prj, workspace }, {})).data.settings[0]!
        return [setting.value, setting.masked, listed.value, listed.masked]
      })
      assert.deepStrictEqual(yield* seenBy(viewer), [null, true, null, true])
      assert.deepStrictEqual(yield* seenBy(builder), ["s3cret", true, "s3cret", true])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("events carry keys, ids and changed field names, never values", () =>
    Effect.gen(function*() {
      const config = yield* ConfigService
      const { owner, child, childT } = yield* setup
      const { setting } = yield* config.createSetting(owner, childT.env, { key: "e", value: "v1" })
      yield* config.updateSetting(owner, childT.env, setting.id, { value: "v2", visibility: "masked" })
      const { featureFlag } = yield* config.createFeatureFlag(owner, childT.prj, {
        key: "f",
        enabled: true,
        value: "fv"
      })
      yield* config.updateFeatureFlag(owner, childT.prj, featureFlag.id, { enabled: false })
      const events = yield* (yield* EventLogRepo).listEvents({ orgId: child.id })
      const mine = events.filter((e) => e.type === "settings.updated" || e.type === "feature.updated")
      assert.strictEqual(mine.length, 4)
      for (const event of mine) assert.notMatch(JSON.stringify(event.data), /v1|v2|fv/)
      const updated = mine.find((e) => e.data["action"] === "updated" && e.data["settingId"] === setting.id)
      assert.deepInclude(updated?.data, {
        action: "updated",
        settingId: setting.id,
        key: "e",
        scopeKind: "environment",
        changed: ["value", "visibility"]
      })
      // The setting as the API returns it, its value redacted (webhooks.md §1, audit redaction).
      assert.deepInclude(updated?.data["setting"], { id: setting.id, key: "e", value: "[REDACTED]" })
    }).pipe(Effect.provide(TestLayer)))
})
