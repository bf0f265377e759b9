/**
 * Run secrets (run-state.md §3): resolve and output secrets, both bound to a live lease on the named job (the run is
 * locked and the lease checked, as a heartbeat is). Resolve reads active secrets of the run's environment, its project
 * and the workspace, the nearest scope winning, and records `secret.value.used` with the names only. Output secrets
 * create or rotate environment-scope secrets through the secrets service (its events and sealing).
 */
import {
  type Actor,
  Conflict,
  type LeaseLost,
  type NotFound,
  type OutputSecretsInput,
  type ResolvedWorkspace,
  type ResolveSecretsInput,
  type Secret,
  type ValidationFailed,
  validationFailed
} from "@cp/domain"
import { type RunKey, SecretsRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer } from "effect"
import { eventActorOf, EventLog } from "../platform/events.ts"
import { ServerKeys } from "../platform/keys.ts"
import { open } from "../platform/secretBox.ts"
import { type SecretScope, SecretsService } from "../secrets/service.ts"
import { RunsService } from "./service.ts"

/** Enough rows for every active secret of one scope (keys are unique per scope). */
const SCOPE_READ_LIMIT = 100_000

export class RunSecretsService extends Context.Service<RunSecretsService, {
  readonly resolve: (
    actor: Actor,
    key: RunKey,
    input: ResolveSecretsInput
  ) => Effect.Effect<
    { readonly secrets: Readonly<Record<string, string>>; readonly missing: ReadonlyArray<string> },
    NotFound | LeaseLost
  >
  readonly output: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    key: RunKey,
    input: OutputSecretsInput
  ) => Effect.Effect<{ readonly secrets: ReadonlyArray<Secret> }, NotFound | LeaseLost | ValidationFailed>
}>()("@cp/server/RunSecretsService") {
  static readonly layer = Layer.effect(
    RunSecretsService,
    Effect.gen(function*() {
      const runs = yield* RunsService
      const secretsRepo = yield* SecretsRepo
      const secretsService = yield* SecretsService
      const tx = yield* Transactor
      const events = yield* EventLog
      const { kek } = yield* ServerKeys

      return RunSecretsService.of({
        resolve: Effect.fn("RunSecrets.resolve")(function*(actor, key, input) {
          return yield* tx.withTransaction(Effect.gen(function*() {
            const { job, run } = yield* runs.requireLease(key, input.jobId, input)
            const scopes: Array<SecretScope> = [
              ...(run.environmentId === null
                ? []
                : [{ kind: "environment" as const, projectId: run.projectId, environmentId: run.environmentId }]),
              { kind: "project", projectId: run.projectId },
              { kind: "organization" }
            ]
            const wanted = new Set<string>(input.names)
            const secrets: Record<string, string> = {}
            for (const scope of scopes) {
              const rows = yield* secretsRepo.list({ orgId: run.orgId, filter: scope, limit: SCOPE_READ_LIMIT })
              for (const row of rows) {
                if (!wanted.has(row.secretKey) || secrets[row.secretKey] !== undefined) continue
                const value = open(kek, row.sealedValue)
                if (value !== undefined) secrets[row.secretKey] = value
              }
            }
            const missing = input.names.filter((name) => secrets[name] === undefined)
            yield* events.record({
              orgId: run.orgId,
              type: "secret.value.used",
              actor: eventActorOf(actor),
              subject: { kind: "run", id: run.id, name: null },
              // Names only: never a value.
              data: { runId: run.id, jobId: job.jobId, attempt: job.attempt, names: [...input.names], missing },
              projectId: run.projectId,
              environmentId: run.environmentId,
              description: `Run ${run.id} job ${job.jobId} resolved ${input.names.length} secret(s)`
            })
            return { secrets, missing }
          }))
        }),

        output: Effect.fn("RunSecrets.output")(function*(actor, workspace, key, input) {
          return yield* tx.withTransaction(
            Effect.gen(function*() {
              const { run } = yield* runs.requireLease(key, input.jobId, input)
              if (run.environmentId === null) {
                return yield* validationFailed({ runId: ["the run has no environment to publish secrets to"] })
              }
              const scope: SecretScope = {
                kind: "environment",
                projectId: run.projectId,
                environmentId: run.environmentId
              }
              const existing = yield* secretsRepo.list({ orgId: run.orgId, filter: scope, limit: SCOPE_READ_LIMIT })
              const published: Array<Secret> = []
              for (const [name, value] of Object.entries(input.secrets)) {
                const current = existing.find((row) => row.secretKey === name && row.status === "active")
                const { secret } = current === undefined
                  ? yield* secretsService.create(actor, workspace, scope, { secretKey: name, value, displayName: name })
                  : yield* secretsService.rotate(actor, workspace, scope, current.id, { value })
                published.push(secret)
              }
              return { secrets: published }
            }).pipe(
              // A key created concurrently at that scope: a 422 on `secrets` the runner may retry.
              Effect.mapError((error) =>
                error instanceof Conflict ? validationFailed({ secrets: [error.error.message] }) : error
              )
            )
          )
        })
      })
    })
  )
}
