/**
 * The secrets service on memory repositories under `TestClock`: create/list/rotate/revoke at each scope, the scope
 * rules of the list (the two spec phrases), 404 for a project or environment the workspace lacks, 409 on a duplicate
 * active key, sealing under the server's KEK, and `secrets.updated` events that never carry the value.
 */
import { Conflict, NotFound, ValidationFailed } from "@cp/domain"
import { EnvironmentsRepo, EventLogRepo, ProjectsRepo, SecretsRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { mint } from "../../src/platform/ids.ts"
import { ServerKeys } from "../../src/platform/keys.ts"
import { open } from "../../src/platform/secretBox.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { type SecretScope, SecretsService } from "../../src/secrets/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { fieldsOf } from "../support/errors.ts"
import { areaServicesLayer, userActor } from "../support/services.ts"

const TestLayer = SecretsService.layer.pipe(Layer.provideMerge(areaServicesLayer))

const PLAINTEXT = "hunter2-service-plaintext-7f3a"

/** A fresh owner, its workspace as the edge resolves it, and one project with one environment in it. */
const setup = Effect.gen(function*() {
  const actor = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(actor, { name: `Root ${actor.userId.slice(-6)}` })
  const workspace = Option.getOrThrow(yield* (yield* WorkspaceResolver).resolve(organization.id, actor))
  const projectId = mint.project(0)
  const environmentId = mint.environment(0)
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
  const scopes: Record<SecretScope["kind"], SecretScope> = {
    organization: { kind: "organization" },
    project: { kind: "project", projectId },
    environment: { kind: "environment", projectId, environmentId }
  }
  return { actor, workspace, projectId, environmentId, scopes }
})

/** A secret created at environment scope at time 0, with its workspace and scopes. */
const withSecret = Effect.gen(function*() {
  const context = yield* setup
  const created = (yield* (yield* SecretsService).create(context.actor, context.workspace, context.scopes.environment, {
    secretKey: "DATABASE_URL",
    value: PLAINTEXT,
    displayName: "Database"
  })).secret
  const stored = Effect.map(
    Effect.flatMap(
      SecretsRepo,
      (repo) => repo.find({ orgId: context.workspace.organization.id, secretId: created.id })
    ),
    Option.getOrThrow
  )
  return { ...context, created, stored }
})

describe("SecretsService create, rotate and revoke", () => {
  it.effect("create answers metadata only, at the scope of its route", () =>
    Effect.gen(function*() {
      const { actor, workspace, projectId, environmentId, created } = yield* withSecret
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
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the value is stored sealed under the KEK, with its key id", () =>
    Effect.gen(function*() {
      const { kek } = yield* ServerKeys
      const { stored } = yield* withSecret
      const row = yield* stored
      assert.strictEqual(row.kekId, kek.id)
      assert.notInclude(row.sealedValue, PLAINTEXT)
      assert.strictEqual(open(kek, row.sealedValue), PLAINTEXT)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("rotate seals the new value and bumps the version", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { kek } = yield* ServerKeys
      const { actor, workspace, scopes, created, stored } = yield* withSecret
      yield* TestClock.adjust(5000)
      const rotated = (yield* secrets.rotate(actor, workspace, scopes.environment, created.id, {
        value: `${PLAINTEXT}-2`
      })).secret
      assert.deepStrictEqual(rotated, {
        ...created,
        version: 2,
        lastRotatedAt: new Date(5000),
        updatedAt: new Date(5000)
      })
      assert.strictEqual(open(kek, (yield* stored).sealedValue), `${PLAINTEXT}-2`)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("delete revokes; again it answers the final state; a revoked secret does not rotate (Conflict)", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, scopes, created } = yield* withSecret
      yield* TestClock.adjust(10_000)
      const revoked = (yield* secrets.revoke(actor, workspace, scopes.environment, created.id)).secret
      assert.deepStrictEqual(revoked, { ...created, status: "revoked", updatedAt: new Date(10_000) })
      assert.deepStrictEqual((yield* secrets.revoke(actor, workspace, scopes.environment, created.id)).secret, revoked)
      const conflict = yield* Effect.flip(
        secrets.rotate(actor, workspace, scopes.environment, created.id, { value: "x" })
      )
      assert.instanceOf(conflict, Conflict)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("secrets.updated events, newest first, and their audit entries never carry the value", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const log = yield* EventLogRepo
      const { actor, workspace, scopes, created } = yield* withSecret
      yield* secrets.rotate(actor, workspace, scopes.environment, created.id, { value: `${PLAINTEXT}-2` })
      yield* secrets.revoke(actor, workspace, scopes.environment, created.id)
      const orgId = workspace.organization.id
      const events = yield* log.listEvents({ orgId })
      const secretEvents = events.filter((event) => event.type === "secrets.updated")
      assert.deepStrictEqual(
        secretEvents.map((event) => event.data["change"]),
        ["revoked", "rotated", "created"],
        "newest first"
      )
      assert.notInclude(JSON.stringify(events), PLAINTEXT)
      assert.notInclude(JSON.stringify(yield* log.listAudit({ orgId, limit: 100 })), PLAINTEXT)
      // webhooks.md §1: the secret's API metadata, field by field (not redacted whole), and what a rotation changed.
      const [revoked, rotated] = secretEvents
      assert.deepInclude(revoked?.data["secret"], { id: created.id, status: "revoked", version: 2 })
      assert.deepStrictEqual(rotated?.data["previous"], { version: 1 })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a duplicate active key in one scope is a Conflict; other scopes and revoked keys are free", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, scopes } = yield* setup
      const input = { secretKey: "API_TOKEN", value: "v", displayName: "Token" }
      const first = (yield* secrets.create(actor, workspace, scopes.organization, input)).secret
      const conflict = yield* Effect.flip(secrets.create(actor, workspace, scopes.organization, input))
      assert.instanceOf(conflict, Conflict)
      assert.deepStrictEqual(conflict.error.details, { secretKey: "API_TOKEN" })
      yield* secrets.create(actor, workspace, scopes.project, input)
      yield* secrets.create(actor, workspace, scopes.environment, input)
      yield* secrets.revoke(actor, workspace, scopes.organization, first.id)
      yield* secrets.create(actor, workspace, scopes.organization, input)
    }).pipe(Effect.provide(TestLayer)))
})

describe("SecretsService scopes", () => {
  it.effect("a project or environment the workspace lacks is NotFound, to create and to list", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, projectId } = yield* setup
      const input = { secretKey: "K", value: "v", displayName: "K" }
      const missingProject: SecretScope = { kind: "project", projectId: mint.project(0) }
      const missingEnvironment: SecretScope = { kind: "environment", projectId, environmentId: mint.environment(0) }
      for (const scope of [missingProject, missingEnvironment]) {
        assert.instanceOf(yield* Effect.flip(secrets.create(actor, workspace, scope, input)), NotFound)
        assert.instanceOf(yield* Effect.flip(secrets.list(workspace, scope, {})), NotFound)
      }
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a secret is NotFound under another scope's route, and an unknown one anywhere", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { actor, workspace, scopes } = yield* setup
      const input = { secretKey: "K", value: "v", displayName: "K" }
      const atProject = (yield* secrets.create(actor, workspace, scopes.project, input)).secret
      for (const scope of [scopes.organization, scopes.environment]) {
        assert.instanceOf(
          yield* Effect.flip(secrets.rotate(actor, workspace, scope, atProject.id, { value: "w" })),
          NotFound
        )
        assert.instanceOf(yield* Effect.flip(secrets.revoke(actor, workspace, scope, atProject.id)), NotFound)
      }
      const unknown = mint.secret(0)
      assert.instanceOf(yield* Effect.flip(secrets.revoke(actor, workspace, scopes.project, unknown)), NotFound)
    }).pipe(Effect.provide(TestLayer)))
})

/** One secret at each scope and a second at the workspace, a second apart, with their ids in creation order. */
const oneAtEachScope = Effect.gen(function*() {
  const secrets = yield* SecretsService
  const context = yield* setup
  const { actor, workspace, scopes } = context
  const made: Array<string> = []
  for (const [i, scope] of [scopes.organization, scopes.project, scopes.environment, scopes.organization].entries()) {
    yield* TestClock.adjust(1000)
    const input = { secretKey: `KEY_${i}`, value: "v", displayName: "k" }
    made.push((yield* secrets.create(actor, workspace, scope, input)).secret.id)
  }
  return { ...context, made }
})

const ids = (page: { readonly data: { readonly secrets: ReadonlyArray<{ readonly id: string }> } }) =>
  page.data.secrets.map((secret) => secret.id)

describe("SecretsService list", () => {
  it.effect("lists exactly one scope, newest first", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { workspace, scopes, made } = yield* oneAtEachScope
      assert.deepStrictEqual(ids(yield* secrets.list(workspace, scopes.organization, {})), [made[3], made[0]])
      assert.deepStrictEqual(ids(yield* secrets.list(workspace, scopes.project, {})), [made[1]])
      assert.deepStrictEqual(ids(yield* secrets.list(workspace, scopes.environment, {})), [made[2]])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("scope=all at workspace scope lists every scope, in pages", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { workspace, scopes, made } = yield* oneAtEachScope
      const page1 = yield* secrets.list(workspace, scopes.organization, { scope: "all", limit: 3 })
      assert.deepStrictEqual(ids(page1), [made[3], made[2], made[1]])
      assert.isString(page1.cursor)
      const cursor = page1.cursor ?? ""
      const page2 = yield* secrets.list(workspace, scopes.organization, { scope: "all", limit: 3, cursor })
      assert.deepStrictEqual(ids(page2), [made[0]])
      assert.isNull(page2.cursor)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a scope=all cursor is bound to the filter: without it, it is refused", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { workspace, scopes } = yield* oneAtEachScope
      const page1 = yield* secrets.list(workspace, scopes.organization, { scope: "all", limit: 3 })
      const rebound = yield* Effect.flip(
        secrets.list(workspace, scopes.organization, { limit: 3, cursor: page1.cursor ?? "" })
      )
      assert.instanceOf(rebound, ValidationFailed)
      assert.deepStrictEqual(rebound.error.details, {
        fields: { cursor: ["is not a valid cursor for this list and these filters"] }
      })
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a scope other than `all` is a ValidationFailed, and `all` below the workspace scope too", () =>
    Effect.gen(function*() {
      const secrets = yield* SecretsService
      const { workspace, scopes } = yield* setup
      const notAll = yield* Effect.flip(secrets.list(workspace, scopes.organization, { scope: "project" }))
      assert.instanceOf(notAll, ValidationFailed)
      assert.include(fieldsOf(notAll)["scope"]?.[0], "must be 'all' when present")
      for (const scope of [scopes.project, scopes.environment]) {
        const allHere = yield* Effect.flip(secrets.list(workspace, scope, { scope: "all" }))
        assert.instanceOf(allHere, ValidationFailed)
        assert.include(fieldsOf(allHere)["scope"]?.[0], "'all' is valid only on the organization scope")
      }
    }).pipe(Effect.provide(TestLayer)))
})
