/**
 * The webhooks service on memory repositories: item routes check `project.webhook.*` on a project endpoint's project
 * and `organization.webhook.*` otherwise (a project admin reaches its project's endpoints by id and nothing else), and
 * the outbox rows of an event roll back with the mutation that failed after writing it.
 */
import { Conflict, Forbidden, type ResolvedWorkspace } from "@cp/domain"
import { MembersRepo, RoleBindingsRepo, WebhookDeliveriesRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { mint } from "../../src/platform/ids.ts"
import { WorkspaceResolver } from "../../src/platform/workspaceResolver.ts"
import { DestinationGuard, WebhookSender, WebhookWorker } from "../../src/webhooks/delivery.ts"
import { WebhooksService } from "../../src/webhooks/service.ts"
import { WorkspacesService } from "../../src/workspaces/service.ts"
import { areaServicesLayer, seedProject, userActor } from "../support/services.ts"

const TestLayer = WebhooksService.layer.pipe(
  Layer.provideMerge(WebhookWorker.layer),
  Layer.provideMerge(Layer.mergeAll(
    Layer.succeed(WebhookSender)({ send: () => Effect.succeed({ _tag: "Answered", status: 200, body: "" }) }),
    DestinationGuard.layer
  )),
  Layer.provideMerge(areaServicesLayer)
)

const URL_A = "https://192.0.2.1/a"

/** An owner's workspace with one workspace endpoint and one endpoint of a project; a project admin of that project. */
const setup = Effect.gen(function*() {
  const owner = userActor()
  const { organization } = yield* (yield* WorkspacesService).create(owner, { name: `Scope ${owner.userId.slice(-6)}` })
  const resolver = yield* WorkspaceResolver
  const resolve = (actor: typeof owner) => Effect.map(resolver.resolve(organization.id, actor), Option.getOrThrow)
  const workspace = yield* resolve(owner)
  const webhooks = yield* WebhooksService
  const projectId = yield* seedProject(organization.id)
  const workspaceEndpoint = (yield* webhooks.createEndpoint(owner, workspace, null, { url: URL_A })).endpoint
  const projectEndpoint = (yield* webhooks.createEndpoint(owner, workspace, projectId, { url: URL_A })).endpoint
  const admin = userActor()
  const subject = { orgId: organization.id, subjectType: "user" as const, subjectId: admin.userId }
  yield* (yield* MembersRepo).insert({ id: mint.member(0), ...subject, status: "active", joinedAt: new Date(0) })
  yield* (yield* RoleBindingsRepo).insert({
    id: mint.roleBinding(0),
    ...subject,
    role: "project_admin",
    scopeKind: "project",
    scopeRef: projectId,
    createdAt: new Date(0)
  }).pipe(Effect.orDie)
  const adminWorkspace: ResolvedWorkspace = yield* resolve(admin)
  return { owner, workspace, admin, adminWorkspace, projectId, workspaceEndpoint, projectEndpoint }
})

describe("WebhooksService", () => {
  it.effect("a project admin reaches its project's endpoint by id, and not the workspace's", () =>
    Effect.gen(function*() {
      const { admin, adminWorkspace, projectEndpoint, workspaceEndpoint } = yield* setup
      const webhooks = yield* WebhooksService
      const got = yield* webhooks.getEndpoint(adminWorkspace, projectEndpoint.id)
      assert.strictEqual(got.endpoint.id, projectEndpoint.id)
      const renamed = yield* webhooks.updateEndpoint(admin, adminWorkspace, projectEndpoint.id, { name: "mine" })
      assert.strictEqual(renamed.endpoint.name, "mine")
      const subscription = yield* webhooks.createSubscription(admin, adminWorkspace, {
        endpointId: projectEndpoint.id,
        eventType: "environment.*"
      })
      assert.strictEqual(subscription.subscription.endpointId, projectEndpoint.id)
      const denied = yield* Effect.flip(webhooks.getEndpoint(adminWorkspace, workspaceEndpoint.id))
      assert.instanceOf(denied, Forbidden)
      assert.strictEqual(denied.error.details["permission"], "organization.webhook.read")
      const deniedWrite = yield* Effect.flip(
        webhooks.createSubscription(admin, adminWorkspace, { endpointId: workspaceEndpoint.id, eventType: "*" })
      )
      assert.instanceOf(deniedWrite, Forbidden)
      assert.strictEqual(deniedWrite.error.details["permission"], "organization.webhook.write")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a project endpoint is created on the project route or with projectId on the workspace route", () =>
    Effect.gen(function*() {
      const { owner, projectId, projectEndpoint, workspace } = yield* setup
      assert.strictEqual(projectEndpoint.projectId, projectId)
      const viaBody = yield* (yield* WebhooksService).createEndpoint(owner, workspace, null, { url: URL_A, projectId })
      assert.strictEqual(viaBody.endpoint.projectId, projectId)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the deliveries an event wrote roll back with a mutation that fails after it", () =>
    Effect.gen(function*() {
      const { owner, workspace, workspaceEndpoint } = yield* setup
      const webhooks = yield* WebhooksService
      const other = (yield* webhooks.createEndpoint(owner, workspace, null, { url: URL_A })).endpoint
      yield* webhooks.createSubscription(owner, workspace, {
        endpointId: other.id,
        eventType: "webhook_subscription.*"
      })
      yield* webhooks.createSubscription(owner, workspace, { endpointId: workspaceEndpoint.id, eventType: "*" })
      const list = Effect.flatMap(WebhookDeliveriesRepo, (repo) => repo.list({ endpointId: other.id, limit: 100 }))
      assert.strictEqual((yield* list).length, 1)
      // The duplicate's event (and its delivery to `other`) is written before the insert that fails.
      const duplicate = yield* Effect.flip(
        webhooks.createSubscription(owner, workspace, { endpointId: workspaceEndpoint.id, eventType: "*" })
      )
      assert.instanceOf(duplicate, Conflict)
      assert.strictEqual((yield* list).length, 1)
    }).pipe(Effect.provide(TestLayer)))
})
