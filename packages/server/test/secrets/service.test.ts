/**
 * The secrets service on memory repositories under `TestClock`: create/list/rotate/revoke at each scope, the scope
 * rules of the list (the two spec phrases), 404 for a project or environment the workspace lacks, 409 on a duplicate
 * active key, sealing under the server's KEK, and `secrets.updated` events that never carry the value.
 */
import { type EnvironmentId, type ErrorDetails, type ProjectId, type SecretId } from "@cp/domain"
import { EnvironmentsRepo, EventLogRepo, ProjectsRepo, SecretsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { newId } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { open } from "../../src/platform/secretBox.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { type SecretScope, SecretsService } from "../../src/secrets/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesLayer, userActor } from "../support/services.ts"

const TestLayer = SecretsService.layer.pipe(Layer.provideMerge(areaServicesLayer))

const PLAINTEXT = "hunter2-service-plaintext-7f3a"

/** A fresh owner, its workspace as the edge resolves it, and one project with one environment in it. */
const setup = Effect.gen(function*() {
  const actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: `Root ${actor.userId.slice(-6)}` })
  const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
  const projectId = newId("prj_", 0) as ProjectId
  const environmentId = newId("env_", 0) as EnvironmentId
  const now = new Date(0)
  yield* (yield* ProjectsRepo).insert({
    id: projectId,
    orgId: organization.id,
    name: "App",
    slug: `app-${projectId.slice(-6).toLowerCase()}`,
    status: "active",
    createdAt: now,
    updatedAt: now,
    archivedAt: null
  }).pipe(Effect.orDie)
  yield* (yield* EnvironmentsRepo).insert({
    id: environmentId,
    orgId: organization.id,
    projectId,
    name: "Production",
    slug: "production",
    status: "active",
    createdAt: now,
    updatedAt: now,
    archivedAt: null,
    lastActiveAt: null
  }).pipe(Effect.orDie)
  const scopes = {
    organization: { kind: "organization" } as SecretScope,
    project: { kind: "project", projectId } as SecretScope,
    environment: { kind: "environment", projectId, environmentId } as SecretScope
  }
  return { actor, workspace, projectId, environmentId, scopes }
})

const flipError = <A, E extends { readonly error: { readonly code: string; readonly details?: ErrorDetails } }, R>(
  self: Effect.Effect<A, E, R>
) => Effect.map(Effect.flip(self), (error) => ({ tag: error.error.code, details: error.error.details }))

describe("SecretsService", () => {
  it.effect("creates at each scope with metadata only, sealed under the KEK; rotate bumps version; delete revokes", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { kek } = yield* ServerKeys
      const { actor, workspace, projectId, environmentId, scopes } = yield* setup
      const created = (yield* secrets.create(actor, workspace, scopes.environment, {
        secretKey: "DATABASE_URL",
        value: PLAINTEXT,
        displayName: "Database"
      })).secret
      assert.deepStrictEqual(created, {
        id: created.id,
        orgId: workspace.organization.id,
        projectId,
        environmentId,
        scopeKind: "environment",
        secretKey: "DATABASE_URL",
        displayName: "Database",
        status: "active",
        version: 1,
        rotationPolicy: null,
        lastRotatedAt: null,
        expiresAt: null,
        createdBy: actor.userId,
        createdAt: new Date(0),
        updatedAt: new Date(0)
      })
      assert.match(created.id, /^sec_[0-9A-HJKMNP-TV-Z]{26}$/)
      assert.notInclude(JSON.stringify(created), PLAINTEXT)

      const stored = Option.getOrThrow(yield* (yield* SecretsRepo).find({ orgId: workspace.organization.id, secretId: created.id }))
      assert.strictEqual(stored.kekId, kek.id)
      assert.notInclude(stored.sealedValue, PLAINTEXT)
      assert.strictEqual(open(kek, stored.sealedValue), PLAINTEXT)

      yield* TestClock.adjust(5000)
      const rotated =
        (yield* secrets.rotate(actor, workspace, scopes.environment, created.id, { value: `${PLAINTEXT}-2` }))
          .secret
      assert.deepStrictEqual(rotated, {
        ...created,
        version: 2,
        lastRotatedAt: new Date(5000),
        updatedAt: new Date(5000)
      })
      const reStored = Option.getOrThrow(yield* (yield* SecretsRepo).find({ orgId: workspace.organization.id, secretId: created.id }))
      assert.strictEqual(open(kek, reStored.sealedValue), `${PLAINTEXT}-2`)

      yield* TestClock.adjust(5000)
      const revoked = (yield* secrets.revoke(actor, workspace, scopes.environment, created.id)).secret
      assert.deepStrictEqual(revoked, { ...rotated, status: "revoked", updatedAt: new Date(10_000) })
      // DELETE again answers the final state; rotate after revoke is 409.
      assert.deepStrictEqual((yield* secrets.revoke(actor, workspace, scopes.environment, created.id)).secret, revoked)
      const conflict = yield* flipError(
        secrets.rotate(actor, workspace, scopes.environment, created.id, { value: "x" })
      )
      assert.strictEqual(conflict.tag, "conflict")

      const events = yield* (yield* EventLogRepo).listEvents({ orgId: workspace.organization.id })
      const secretEvents = events.filter((event) => event.type === "secrets.updated")
      assert.deepStrictEqual(
        secretEvents.map((event) => (event.data as any).change),
        ["revoked", "rotated", "created"],
        "newest first"
      )
      assert.notInclude(JSON.stringify(events), PLAINTEXT)
      assert.notInclude(
        JSON.stringify(yield* (yield* EventLogRepo).listAudit({ orgId: workspace.organization.id } as never)),
        PLAINTEXT
      )
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a duplicate active key in one scope is 409; other scopes and revoked keys are free", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, scopes } = yield* setup
      const input = { secretKey: "API_TOKEN", value: "v", displayName: "Token" }
      const first = (yield* secrets.create(actor, workspace, scopes.organization, input)).secret
      const conflict = yield* flipError(secrets.create(actor, workspace, scopes.organization, input))
      assert.strictEqual(conflict.tag, "conflict")
      assert.deepStrictEqual(conflict.details, { secretKey: "API_TOKEN" })
      yield* secrets.create(actor, workspace, scopes.project, input)
      yield* secrets.create(actor, workspace, scopes.environment, input)
      yield* secrets.revoke(actor, workspace, scopes.organization, first.id)
      yield* secrets.create(actor, workspace, scopes.organization, input)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a project or environment the workspace lacks is 404, and a secret of another scope is 404", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, projectId, scopes } = yield* setup
      const input = { secretKey: "K", value: "v", displayName: "K" }
      const missingProject: SecretScope = { kind: "project", projectId: newId("prj_", 0) as ProjectId }
      const missingEnvironment: SecretScope = {
        kind: "environment",
        projectId,
        environmentId: newId("env_", 0) as EnvironmentId
      }
      for (const scope of [missingProject, missingEnvironment]) {
        assert.strictEqual((yield* flipError(secrets.create(actor, workspace, scope, input))).tag, "not_found")
        assert.strictEqual((yield* flipError(secrets.list(workspace, scope, {}))).tag, "not_found")
      }
      const atProject = (yield* secrets.create(actor, workspace, scopes.project, input)).secret
      for (const scope of [scopes.organization, scopes.environment]) {
        assert.strictEqual(
          (yield* flipError(secrets.rotate(actor, workspace, scope, atProject.id, { value: "w" }))).tag,
          "not_found"
        )
        assert.strictEqual((yield* flipError(secrets.revoke(actor, workspace, scope, atProject.id))).tag, "not_found")
      }
      const unknown = newId("sec_", 0) as SecretId
      assert.strictEqual((yield* flipError(secrets.revoke(actor, workspace, scopes.project, unknown))).tag, "not_found")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("lists one scope, or scope=all at workspace scope with cursors bound to the filter; other scopes are 422", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, scopes } = yield* setup
      const made: Array<string> = []
      for (
        const [i, scope] of [scopes.organization, scopes.project, scopes.environment, scopes.organization].entries()
      ) {
        yield* TestClock.adjust(1000)
        made.push(
          (yield* secrets.create(actor, workspace, scope, { secretKey: `KEY_${i}`, value: "v", displayName: "k" }))
            .secret.id
        )
      }
      const ids = (page: { readonly data: { readonly secrets: ReadonlyArray<{ readonly id: string }> } }) =>
        page.data.secrets.map((secret) => secret.id)
      assert.deepStrictEqual(ids(yield* secrets.list(workspace, scopes.organization, {})), [made[3], made[0]])
      assert.deepStrictEqual(ids(yield* secrets.list(workspace, scopes.project, {})), [made[1]])
      assert.deepStrictEqual(ids(yield* secrets.list(workspace, scopes.environment, {})), [made[2]])

      const page1 = yield* secrets.list(workspace, scopes.organization, { scope: "all", limit: 3 })
      assert.deepStrictEqual(ids(page1), [made[3], made[2], made[1]])
      assert.isString(page1.cursor)
      const page2 = yield* secrets.list(workspace, scopes.organization, {
        scope: "all",
        limit: 3,
        cursor: page1.cursor!
      })
      assert.deepStrictEqual(ids(page2), [made[0]])
      assert.isNull(page2.cursor)
      // The cursor is bound to `scope=all`: without it, it is refused.
      const rebound = yield* flipError(
        secrets.list(workspace, scopes.organization, { limit: 3, cursor: page1.cursor! })
      )
      assert.deepStrictEqual(rebound.details, {
        fields: { cursor: ["is not a valid cursor for this list and these filters"] }
      })

      const notAll = yield* flipError(secrets.list(workspace, scopes.organization, { scope: "project" }))
      assert.strictEqual(notAll.tag, "validation_failed")
      assert.include((notAll.details as any).fields.scope[0], "must be 'all' when present")
      for (const scope of [scopes.project, scopes.environment]) {
        const allHere = yield* flipError(secrets.list(workspace, scope, { scope: "all" }))
        assert.include((allHere.details as any).fields.scope[0], "'all' is valid only on the organization scope")
      }
    }).pipe(Effect.provide(TestLayer)))
})
