/**
 * The repo links and inbound deliveries repository contracts, on every backend: one live link per (project,
 * repository), unlinking frees it, ingress finds the live links of a repository; a delivery id is stored once per
 * provider and its outcome recorded.
 */
import { IdPrefix, InboundDeliveryId, IntegrationConnectionId, RepoLinkId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { IntegrationConnectionsRepo } from "../../src/integrations/ConnectionsRepo.ts"
import { InboundDeliveriesRepo, inboundDeliveryKeyConstraint } from "../../src/integrations/InboundDeliveriesRepo.ts"
import { repoLinkProjectRepoConstraint, RepoLinksRepo } from "../../src/integrations/RepoLinksRepo.ts"
import type { ConnectionRow, InboundDeliveryRow, RepoLinkRow } from "../../src/integrations/rows.ts"
import { ProjectsRepo } from "../../src/projects/ProjectsRepo.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { at, newId, storedProjectScope } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const scope = Effect.gen(function*() {
  const { org, projectId } = yield* storedProjectScope("Links")
  const connection: ConnectionRow = {
    id: newId(IntegrationConnectionId, IdPrefix.integrationConnection),
    orgId: org.id,
    provider: "scmhost",
    status: "active",
    scope: "account",
    shareMode: "auto",
    displayName: "Source",
    externalAccountLogin: "acme",
    externalAccountType: "Organization",
    externalAccountId: `acct-${org.id}`,
    installationId: null,
    repositorySelection: "all",
    permissionsJson: "{}",
    stateId: null,
    stateIssuedAt: null,
    stateExpiresAt: null,
    stateConsumedAt: null,
    sealedToken: null,
    wrappedDataKey: null,
    kekId: null,
    createdBy: "usr_01J0000000000000000000000A",
    connectedAt: at(0),
    revokedAt: null,
    suspendedAt: null,
    createdAt: at(0),
    updatedAt: at(0)
  }
  yield* (yield* IntegrationConnectionsRepo).insert(connection).pipe(Effect.orDie)
  return { org, projectId, connection }
})

const link = (
  s: Effect.Success<typeof scope>,
  repoExternalId: string,
  minutes: number
): RepoLinkRow => ({
  id: newId(RepoLinkId, IdPrefix.repoLink),
  orgId: s.org.id,
  projectId: s.projectId,
  connectionId: s.connection.id,
  repoExternalId,
  repoFullName: `acme/${repoExternalId}`,
  defaultBranch: "main",
  branchEnvMapJson: "{}",
  createdBy: "usr_01J0000000000000000000000A",
  createdAt: at(minutes),
  updatedAt: at(minutes),
  deletedAt: null
})

const repositories = {
  memory: Layer.mergeAll(
    OrganizationsRepo.memory,
    ProjectsRepo.memory,
    IntegrationConnectionsRepo.memory,
    RepoLinksRepo.memory,
    InboundDeliveriesRepo.memory
  ),
  sql: Layer.mergeAll(
    OrganizationsRepo.sql,
    ProjectsRepo.sql,
    IntegrationConnectionsRepo.sql,
    RepoLinksRepo.sql,
    InboundDeliveriesRepo.sql
  )
}

describeContract("RepoLinksRepo and InboundDeliveriesRepo", repositories, (it) => {
  it.effect("one live link per (project, repository); unlinking frees it; ingress finds live links", () =>
    Effect.gen(function*() {
      const repo = yield* RepoLinksRepo
      const s = yield* scope
      const first = link(s, "11", 1)
      yield* repo.insert(first)
      const again = yield* Effect.exit(repo.insert(link(s, "11", 2)))
      assert.isTrue(Exit.isFailure(again))
      assert.strictEqual(
        Exit.isFailure(again) ? Option.getOrUndefined(Exit.findErrorOption(again))?.constraint : undefined,
        repoLinkProjectRepoConstraint
      )
      yield* repo.insert(link(s, "12", 3))
      assert.strictEqual(yield* repo.countLive(s.org.id), 2)
      assert.deepStrictEqual(
        (yield* repo.liveForRepo({ connectionId: s.connection.id, repoExternalId: "11" })).map((r) => r.id),
        [first.id]
      )
      const removed = yield* repo.remove({ orgId: s.org.id, projectId: s.projectId, repoLinkId: first.id, at: at(4) })
      assert.deepStrictEqual(Option.map(removed, (r) => r.deletedAt), Option.some(at(4)))
      assert.isTrue(
        Option.isNone(yield* repo.remove({ orgId: s.org.id, projectId: s.projectId, repoLinkId: first.id, at: at(5) }))
      )
      assert.strictEqual(yield* repo.countLive(s.org.id), 1)
      assert.deepStrictEqual(yield* repo.liveForRepo({ connectionId: s.connection.id, repoExternalId: "11" }), [])
      yield* repo.insert(link(s, "11", 6))
    }))

  it.effect("stores a delivery id once per provider and records its outcome", () =>
    Effect.gen(function*() {
      const repo = yield* InboundDeliveriesRepo
      const s = yield* scope
      const row: InboundDeliveryRow = {
        id: newId(InboundDeliveryId, IdPrefix.inboundDelivery),
        provider: "scmhost",
        deliveryKey: `d-${s.org.id}`,
        connectionId: null,
        installationId: "1001",
        event: "push",
        action: null,
        status: "received",
        signatureOk: true,
        failureReason: null,
        headersJson: "{}",
        bodyBase64: Buffer.from("{}").toString("base64"),
        receivedAt: at(1),
        processedAt: null
      }
      yield* repo.insert(row)
      const repeat = yield* Effect.exit(repo.insert({ ...row, id: newId(InboundDeliveryId, IdPrefix.inboundDelivery) }))
      assert.strictEqual(
        Exit.isFailure(repeat) ? Option.getOrUndefined(Exit.findErrorOption(repeat))?.constraint : undefined,
        inboundDeliveryKeyConstraint
      )
      yield* repo.setOutcome({
        id: row.id,
        connectionId: s.connection.id,
        status: "emitted",
        failureReason: null,
        processedAt: at(2)
      })
      const listed = yield* repo.listForConnection(s.connection.id)
      assert.deepStrictEqual(listed.map((r) => [r.id, r.status]), [[row.id, "emitted"]])
      assert.deepStrictEqual(
        Option.map(yield* repo.findByKey({ provider: "scmhost", deliveryKey: row.deliveryKey }), (r) => r.id),
        Option.some(row.id)
      )
    }))
})
