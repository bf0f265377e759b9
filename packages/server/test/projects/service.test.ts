/**
 * The projects service and the idle sweep on memory repositories under `TestClock`: the sweep is the server's
 * background layer (a scoped fiber on a `Schedule`, time from `Clock`) and archives environments idle past the
 * retention window, counting a never-used one from its creation, with `environment.archived` by the system actor.
 * Workflow (CI) actors hold the project_builder set in their bound project and nothing elsewhere, through the edge's
 * own workspace resolver and the RBAC decision.
 */
import {
  type Actor,
  type Permission,
  permissions,
  PreconditionFailed,
  type ProjectId,
  rolePermissions
} from "@cp/domain"
import { EventLogRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { Entitlements } from "../../src/platform/entitlements.ts"
import { EventLog } from "../../src/platform/events.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { decide } from "../../src/platform/rbac.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { ProjectsService } from "../../src/projects/service.ts"
import { EnvironmentSweep } from "../../src/projects/sweep.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspaceResolverLive } from "../../src/workspaces/resolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { userActor } from "../support/services.ts"

const layerWith = (env: Record<string, string> = {}) =>
  Layer.mergeAll(ProjectsService.layer, EnvironmentSweep.layer).pipe(
    Layer.provideMerge(WorkspacesService.layer),
    Layer.provideMerge(WorkspaceResolverLive),
    Layer.provideMerge(Layer.mergeAll(EventLog.layer, Cursors.layer, Entitlements.layer)),
    Layer.provideMerge(ServerKeys.layer),
    Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test", ...env }))),
    Layer.provideMerge(RepositoriesMemory)
  )

const resolve = (ref: string, actor: Actor) =>
  Effect.flatMap(WorkspaceResolver, (resolver) => resolver.resolve(ref, actor))

const newOwner = Effect.gen(function*() {
  const actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: `Root ${actor.userId.slice(-6)}` })
  const workspace = Option.getOrThrow(yield* resolve(organization.id, actor))
  return { actor, orgId: organization.id, workspace }
})

const DAY = Duration.days(1)

describe("projects service", () => {
  it.effect("the idle sweep archives environments idle past the window (from creation when unused), once each", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsService
      const { actor, orgId, workspace } = yield* newOwner
      const { project } = yield* projects.create(actor, workspace, { name: "Sweep" })
      const stale = (yield* projects.createEnvironment(actor, workspace, project.id, { name: "Stale" })).environment
      yield* TestClock.adjust(Duration.days(20))
      const fresh = (yield* projects.createEnvironment(actor, workspace, project.id, { name: "Fresh" })).environment

      // The server's background layer: runs now, then every interval, for the life of this scope.
      yield* Layer.build(EnvironmentSweep.background)
      const statusOf = (environmentId: typeof stale.id) =>
        Effect.map(projects.getEnvironment(workspace, project.id, environmentId), (r) => r.environment.status)
      assert.strictEqual(yield* statusOf(stale.id), "active")

      // Day 31 after `stale` was created: past the default 30-day window; `fresh` is 11 days old.
      yield* TestClock.adjust(Duration.sum(Duration.days(11), Duration.hours(1)))
      assert.strictEqual(yield* statusOf(stale.id), "archived")
      assert.strictEqual(yield* statusOf(fresh.id), "active")
      yield* TestClock.adjust(Duration.days(20))
      assert.strictEqual(yield* statusOf(fresh.id), "archived")

      const archivedEvents = (yield* (yield* EventLogRepo).listEvents({ orgId })).filter((e) =>
        e.type === "environment.archived"
      )
      assert.deepStrictEqual(archivedEvents.map((e) => e.subjectId).sort(), [stale.id, fresh.id].sort())
      for (const event of archivedEvents) {
        assert.deepInclude(event, { actorType: "system", actorId: "system", projectId: project.id })
        assert.strictEqual(event.data["reason"], "idle")
        // webhooks.md §1: the environment as the API returns it, and what the archive changed.
        assert.deepInclude(event.data["environment"], {
          id: event.subjectId,
          status: "archived",
          projectId: project.id
        })
        assert.deepStrictEqual(event.data["previous"], { status: "active", archivedAt: null })
      }
      // Another run finds nothing left to do.
      assert.strictEqual(yield* (yield* EnvironmentSweep).runOnce, 0)
    }).pipe(Effect.scoped, Effect.provide(layerWith())))

  it.effect("ENVIRONMENT_RETENTION_DAYS sets the window; an archived environment is not swept again", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsService
      const sweep = yield* EnvironmentSweep
      const { actor, workspace } = yield* newOwner
      const { project } = yield* projects.create(actor, workspace, { name: "Short" })
      const env = (yield* projects.createEnvironment(actor, workspace, project.id, { name: "Dev" })).environment
      const gone = (yield* projects.createEnvironment(actor, workspace, project.id, { name: "Gone" })).environment
      yield* projects.archiveEnvironment(actor, workspace, project.id, gone.id)
      yield* TestClock.adjust(Duration.times(DAY, 2))
      assert.strictEqual(yield* sweep.runOnce, 0)
      yield* TestClock.adjust(Duration.sum(DAY, Duration.seconds(1)))
      assert.strictEqual(yield* sweep.runOnce, 1)
      assert.strictEqual((yield* projects.getEnvironment(workspace, project.id, env.id)).environment.status, "archived")
    }).pipe(Effect.provide(layerWith({ ENVIRONMENT_RETENTION_DAYS: "3" }))))

  it.effect("a workflow actor holds the project_builder set in its bound project only (run-state.md §8)", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsService
      const { actor, orgId, workspace } = yield* newOwner
      const bound = (yield* projects.create(actor, workspace, { name: "Bound" })).project
      const other = (yield* projects.create(actor, workspace, { name: "Other" })).project
      const workflow: Actor = {
        kind: "workflow",
        subject: "repo:acme/web:ref:refs/heads/main",
        orgId,
        projectId: bound.id
      }

      const seen = Option.getOrThrow(yield* resolve(orgId, workflow))
      assert.strictEqual(seen.organization.id, orgId)
      const allowed = (permission: Permission, projectId?: ProjectId) =>
        decide(seen.grants, permission, projectId).allow
      assert.isTrue(allowed("environment.read", bound.id))
      assert.isFalse(allowed("environment.read", other.id))
      assert.isFalse(allowed("environment.read"))
      const held = permissions.filter((permission) => allowed(permission, bound.id))
      assert.deepStrictEqual(
        held,
        [...rolePermissions.project_builder].filter((p) => permissions.includes(p)).sort((a, b) =>
          permissions.indexOf(a) - permissions.indexOf(b)
        )
      )
      assert.isFalse(permissions.some((permission) => allowed(permission, other.id)))
      assert.isFalse(permissions.some((permission) => allowed(permission)))

      // The listing itself, as the handler runs it with what the edge resolved.
      yield* projects.createEnvironment(actor, workspace, bound.id, { name: "CI" })
      const page = yield* projects.listEnvironments(seen, bound.id, {})
      assert.deepStrictEqual(page.data.environments.map((e) => e.slug), ["ci"])

      // Another workspace is not visible to it at all.
      const stranger = yield* newOwner
      assert.isTrue(Option.isNone(yield* resolve(stranger.orgId, workflow)))
    }).pipe(Effect.provide(layerWith())))

  it.effect("limit.projects reads the Entitlements service: create and restore stop at the ceiling", () =>
    Effect.gen(function*() {
      const projects = yield* ProjectsService
      const { actor, workspace } = yield* newOwner
      const made = []
      for (let i = 0; i < 5; i++) made.push((yield* projects.create(actor, workspace, { name: `P${i}` })).project)
      const refused = yield* Effect.flip(projects.create(actor, workspace, { name: "P5" }))
      assert.instanceOf(refused, PreconditionFailed)
      yield* projects.archive(actor, workspace, made[0]!.id)
      yield* projects.create(actor, workspace, { name: "P5" })
      const blocked = yield* Effect.flip(projects.restore(actor, workspace, made[0]!.id))
      assert.instanceOf(blocked, PreconditionFailed)
    }).pipe(Effect.provide(layerWith())))
})
