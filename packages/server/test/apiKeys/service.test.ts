/**
 * The API keys service and API-key bearer resolution on memory repositories under `TestClock` (time starts at 0
 * and moves only when a test moves it): the instant a key expires, the minute granularity of `lastUsedAt`, the
 * "in the future" boundary of `expiresAt`, the project a project key names, and the role-ceiling rule. The layer
 * graph is the server's own (`app.ts`) minus HTTP.
 */
import {
  type Actor,
  type ApiKeyId,
  type CreateApiKey,
  Forbidden,
  type Grant,
  type OrgId,
  type Role,
  ValidationFailed
} from "@cp/domain"
import { ApiKeysRepo, UsersRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { LAST_USED_PRECISION_MS } from "../../src/apiKeys/bearer.ts"
import { ApiKeysService } from "../../src/apiKeys/service.ts"
import { ActorResolverLive } from "../../src/identity/actors.ts"
import { SecurityLog } from "../../src/identity/securityLog.ts"
import { ActorResolver } from "../../src/platform/actors.ts"
import { AppConfig, parseConfig } from "../../src/platform/config.ts"
import { EventLog } from "../../src/platform/events.ts"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { Cursors } from "../../src/platform/pagination.ts"
import { coversRole } from "../../src/platform/rbac.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { RepositoriesMemory } from "../../src/repositories.ts"
import { WorkspaceResolverLive } from "../../src/workspaces/resolver.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { seedProject } from "../support/services.ts"

const HOUR = 3_600_000

/** The services the API keys area needs, on fresh memory repositories, in test mode. */
const TestLayer = ApiKeysService.layer.pipe(
  Layer.provideMerge(WorkspacesService.layer),
  Layer.provideMerge(Layer.mergeAll(ActorResolverLive, WorkspaceResolverLive, SecurityLog.layer)),
  Layer.provideMerge(Layer.mergeAll(EventLog.layer, Cursors.layer)),
  Layer.provideMerge(ServerKeys.layer),
  Layer.provideMerge(Layer.effect(AppConfig, parseConfig({ APP_ENV: "test" }))),
  Layer.provideMerge(RepositoriesMemory)
)

/** A user who owns a fresh `Personal` workspace, and that workspace as the edge would resolve it for them. */
const owner = Effect.gen(function*() {
  const now = new Date(0)
  const userId = mint.user(0)
  yield* (yield* UsersRepo).insert({
    id: userId,
    email: `${userId.toLowerCase()}@example.test`,
    displayName: null,
    lastOrgSlug: null,
    emailVerified: true,
    createdAt: now,
    updatedAt: now
  }).pipe(Effect.orDie)
  const { organization } = yield* (yield* WorkspacesService).createPersonal(userId, userId.toLowerCase())
  const actor: Actor = { kind: "user", userId, sessionId: mint.session(0) }
  const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
  return { actor, workspace }
})

/** A key minted by the owner of a fresh workspace, and that workspace's id. */
const createKey = (input: CreateApiKey) =>
  Effect.gen(function*() {
    const { actor, workspace } = yield* owner
    const { apiKey } = yield* (yield* ApiKeysService).create(actor, workspace, input)
    return { ...apiKey, orgId: workspace.organization.id }
  })

const resolve = (token: string) => Effect.flatMap(ActorResolver, (resolver) => resolver.resolve(token))

const lastUsedAt = (orgId: OrgId, id: ApiKeyId) =>
  Effect.map(
    Effect.flatMap(ApiKeysRepo, (repo) => repo.findById({ orgId, id })),
    (row) => Option.getOrThrow(row).lastUsedAt?.getTime() ?? null
  )

describe("API key lifetime", () => {
  it.effect("a key authenticates until the instant it expires, then never again", () =>
    Effect.gen(function*() {
      const key = yield* createKey({ label: "short-lived", role: "viewer", expiresAt: new Date(HOUR) })
      assert.deepStrictEqual(
        yield* resolve(key.secret),
        Option.some<Actor>({
          kind: "service_principal",
          principalId: key.servicePrincipal.id,
          apiKeyId: key.id,
          orgId: key.orgId,
          projectId: null,
          role: "viewer"
        })
      )
      yield* TestClock.adjust(HOUR - 1)
      assert.isTrue(Option.isSome(yield* resolve(key.secret)), "1 ms before expiry")
      yield* TestClock.adjust(1)
      assert.isTrue(Option.isNone(yield* resolve(key.secret)), "at expiry")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("expiresAt must be strictly in the future", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust(HOUR)
      const error = yield* Effect.flip(createKey({ label: "now", role: "viewer", expiresAt: new Date(HOUR) }))
      assert.instanceOf(error, ValidationFailed)
      assert.deepStrictEqual(error.error.details, { fields: { expiresAt: ["must be in the future"] } })
      const key = yield* createKey({ label: "next ms", role: "viewer", expiresAt: new Date(HOUR + 1) })
      assert.isTrue(Option.isSome(yield* resolve(key.secret)))
    }).pipe(Effect.provide(TestLayer)))

  it.effect("lastUsedAt moves at most once a minute", () =>
    Effect.gen(function*() {
      const key = yield* createKey({ label: "busy", role: "viewer" })
      assert.strictEqual(yield* lastUsedAt(key.orgId, key.id), null)
      yield* resolve(key.secret)
      assert.strictEqual(yield* lastUsedAt(key.orgId, key.id), 0, "the first use stamps it")
      yield* TestClock.adjust(1000)
      yield* resolve(key.secret)
      assert.strictEqual(yield* lastUsedAt(key.orgId, key.id), 0)
      yield* TestClock.adjust(LAST_USED_PRECISION_MS - 1000)
      yield* resolve(key.secret)
      assert.strictEqual(yield* lastUsedAt(key.orgId, key.id), 0, "exactly a minute later: still fresh")
      yield* TestClock.adjust(1)
      yield* resolve(key.secret)
      assert.strictEqual(yield* lastUsedAt(key.orgId, key.id), LAST_USED_PRECISION_MS + 1)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a revoked key stops resolving; only users manage keys", () =>
    Effect.gen(function*() {
      const { actor, workspace } = yield* owner
      const service = yield* ApiKeysService
      const { apiKey } = yield* service.create(actor, workspace, { label: "admin bot", role: "admin" })
      const keyActor = Option.getOrThrow(yield* resolve(apiKey.secret))
      assert.instanceOf(
        yield* Effect.flip(service.create(keyActor, workspace, { label: "x", role: "viewer" })),
        Forbidden
      )
      assert.instanceOf(yield* Effect.flip(service.revoke(keyActor, workspace, apiKey.id)), Forbidden)
      yield* service.revoke(actor, workspace, apiKey.id)
      assert.isTrue(Option.isNone(yield* resolve(apiKey.secret)))
    }).pipe(Effect.provide(TestLayer)))
})

describe("project keys", () => {
  it.effect("a project role's projectId must name a project of the workspace; an archived one counts", () =>
    Effect.gen(function*() {
      const { actor, workspace } = yield* owner
      const service = yield* ApiKeysService
      const other = yield* owner
      for (const projectId of [mint.project(0), yield* seedProject(other.workspace.organization.id)]) {
        const error = yield* Effect.flip(
          service.create(actor, workspace, { label: "ghost", role: "project_viewer", projectId })
        )
        assert.instanceOf(error, ValidationFailed)
        assert.deepStrictEqual(error.error.details, { fields: { projectId: ["names no project in this workspace"] } })
      }
      assert.deepStrictEqual((yield* service.list(workspace, {})).data.apiKeys, [])
      const archived = yield* seedProject(workspace.organization.id, "archived")
      const { apiKey } = yield* service.create(actor, workspace, {
        label: "old",
        role: "project_viewer",
        projectId: archived
      })
      assert.strictEqual(apiKey.servicePrincipal.projectId, archived)
    }).pipe(Effect.provide(TestLayer)))
})

describe("coversRole", () => {
  const project = mint.project(0)
  const other = mint.project(0)
  const on = (role: Role, scope: Partial<Grant> = {}): Grant => ({
    kind: "direct",
    role,
    scopeKind: "organization",
    scopeRef: null,
    ...scope
  })
  const covered = (grants: ReadonlyArray<Grant>, projectId: string | null = null) =>
    ([
      "owner",
      "admin",
      "builder",
      "viewer",
      "billing_admin",
      "project_admin",
      "project_builder",
      "project_viewer"
    ] as const)
      .filter((role) => coversRole(grants, role, role.startsWith("project_") ? projectId ?? project : null))

  it("an owner covers every role; an admin every role but owner and billing_admin", () => {
    assert.deepStrictEqual(covered([on("owner")]), [
      "owner",
      "admin",
      "builder",
      "viewer",
      "billing_admin",
      "project_admin",
      "project_builder",
      "project_viewer"
    ])
    assert.deepStrictEqual(covered([on("admin")]), [
      "admin",
      "builder",
      "viewer",
      "project_admin",
      "project_builder",
      "project_viewer"
    ])
    assert.deepStrictEqual(covered([on("admin", { kind: "account_cascade" })]), covered([on("admin")]))
  })

  it("lesser roles cover only what they hold", () => {
    // The matrix gives a builder every project-scoped permission, so it covers project_admin too.
    assert.deepStrictEqual(covered([on("builder")]), [
      "builder",
      "viewer",
      "project_admin",
      "project_builder",
      "project_viewer"
    ])
    assert.deepStrictEqual(covered([on("billing_admin")]), ["billing_admin"])
    assert.deepStrictEqual(covered([on("viewer")]), ["viewer", "project_viewer"])
  })

  it("a project role covers project roles on its own project only", () => {
    const grants = [on("project_admin", { scopeKind: "project", scopeRef: project })]
    assert.deepStrictEqual(covered(grants, project), ["project_admin", "project_builder", "project_viewer"])
    assert.deepStrictEqual(covered(grants, other), [])
  })
})
