/**
 * The integration connections repository contract, on every backend: the setup state is consumed once and only
 * before it expires; an installation binds one live connection across workspaces, a provider account one per
 * workspace; a revoked connection frees both.
 */
import { IdPrefix, IntegrationConnectionId } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { UniqueViolation } from "../../src/errors.ts"
import {
  connectionAccountConstraint,
  connectionInstallationConstraint,
  IntegrationConnectionsRepo
} from "../../src/integrations/ConnectionsRepo.ts"
import type { ConnectionRow } from "../../src/integrations/rows.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, newId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

const workspace = Effect.gen(function*() {
  const org = accountRootRow("Root")
  yield* Effect.flatMap(OrganizationsRepo, (repo) => repo.insert(org))
  return org
})

const pending = (org: OrganizationRow, minutes: number, overrides: Partial<ConnectionRow> = {}): ConnectionRow => ({
  id: newId(IntegrationConnectionId, IdPrefix.integrationConnection),
  orgId: org.id,
  provider: "scmhost",
  status: "pending",
  scope: "account",
  shareMode: "auto",
  displayName: "Source",
  externalAccountLogin: null,
  externalAccountType: null,
  externalAccountId: null,
  installationId: null,
  repositorySelection: null,
  permissionsJson: "{}",
  stateId: "state-1",
  stateIssuedAt: at(minutes),
  stateExpiresAt: at(minutes + 60),
  stateConsumedAt: null,
  sealedToken: null,
  wrappedDataKey: null,
  kekId: null,
  createdBy: "usr_01J0000000000000000000000A",
  connectedAt: null,
  revokedAt: null,
  suspendedAt: null,
  createdAt: at(minutes),
  updatedAt: at(minutes),
  ...overrides
})

const activeAs = (row: ConnectionRow, installationId: string, account: string): ConnectionRow => ({
  ...row,
  status: "active",
  installationId,
  externalAccountId: account,
  externalAccountLogin: account,
  connectedAt: at(2)
})

const repositories = {
  memory: Layer.mergeAll(OrganizationsRepo.memory, IntegrationConnectionsRepo.memory),
  sql: Layer.mergeAll(OrganizationsRepo.sql, IntegrationConnectionsRepo.sql)
}

const violation = <A>(exit: Exit.Exit<A, UniqueViolation>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit))?.constraint : undefined

describeContract("IntegrationConnectionsRepo", repositories, (it) => {
  it.effect("consumes a setup state once, only its own, only before it expires", () =>
    Effect.gen(function*() {
      const repo = yield* IntegrationConnectionsRepo
      const row = pending(yield* workspace, 1)
      yield* repo.insert(row)
      const key = { connectionId: row.id, stateId: "state-1" }
      assert.isTrue(Option.isNone(yield* repo.consumeState({ ...key, stateId: "other", at: at(2) })))
      assert.isTrue(Option.isNone(yield* repo.consumeState({ ...key, at: at(61) })))
      assert.isTrue(Option.isSome(yield* repo.consumeState({ ...key, at: at(2) })))
      assert.isTrue(Option.isNone(yield* repo.consumeState({ ...key, at: at(3) })))
    }))

  it.effect("binds an installation once across workspaces and an account once per workspace; revoking frees both", () =>
    Effect.gen(function*() {
      const repo = yield* IntegrationConnectionsRepo
      const [org, other] = [yield* workspace, yield* workspace]
      const first = pending(org, 1)
      const second = pending(other, 1)
      const third = pending(org, 1)
      for (const row of [first, second, third]) yield* repo.insert(row)
      const bound = activeAs(first, "1001", "acme")
      assert.isTrue(Option.isSome(yield* repo.update(bound)))
      assert.strictEqual(
        violation(yield* Effect.exit(repo.update(activeAs(second, "1001", "acme")))),
        connectionInstallationConstraint
      )
      assert.strictEqual(
        violation(yield* Effect.exit(repo.update(activeAs(third, "2002", "acme")))),
        connectionAccountConstraint
      )
      assert.deepStrictEqual(
        Option.map(yield* repo.findByInstallation({ provider: "scmhost", installationId: "1001" }), (r) => r.id),
        Option.some(first.id)
      )
      yield* repo.update({ ...bound, status: "revoked", revokedAt: at(5) })
      assert.isTrue(Option.isNone(yield* repo.findByInstallation({ provider: "scmhost", installationId: "1001" })))
      assert.isTrue(Option.isSome(yield* repo.update(activeAs(second, "1001", "acme"))))
      assert.deepStrictEqual((yield* repo.list(org.id)).map((r) => r.id).sort(), [first.id, third.id].sort())
    }))
})
