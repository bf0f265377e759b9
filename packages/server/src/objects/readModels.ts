/**
 * Workspace-wide read models of the run-state plane (run-state.md §7): the state its projects keep (objects and job
 * logs) and the run feed across its projects, newest first.
 */
import type { OrgId, OrgRunsQuery, Paged, Run, StateUsage, ValidationFailed } from "@cp/domain"
import { idPosition, JobLogsRepo, ObjectsRepo, RunsRepo } from "@cp/persistence"
import { Context, Effect, Layer } from "effect"
import { Cursors, keysetPage } from "../platform/pagination.ts"
import { toRun } from "../runs/service.ts"

export class StateReadModels extends Context.Service<StateReadModels, {
  readonly usage: (orgId: OrgId) => Effect.Effect<{ readonly usage: StateUsage }>
  readonly runs: (
    orgId: OrgId,
    query: OrgRunsQuery
  ) => Effect.Effect<Paged<{ readonly runs: ReadonlyArray<Run> }>, ValidationFailed>
}>()("@cp/server/StateReadModels") {
  static readonly layer = Layer.effect(
    StateReadModels,
    Effect.gen(function*() {
      const objects = yield* ObjectsRepo
      const logs = yield* JobLogsRepo
      const runs = yield* RunsRepo
      const cursors = yield* Cursors
      return StateReadModels.of({
        usage: Effect.fn("StateReadModels.usage")(function*(orgId) {
          const [objectUsage, logUsage] = yield* Effect.all([objects.usage(orgId), logs.usage(orgId)])
          return { usage: { objects: objectUsage, logs: logUsage } }
        }),
        runs: Effect.fn("StateReadModels.runs")(function*(orgId, query) {
          const filters = { projectId: query.projectId, status: query.status }
          const { cursor, items } = yield* keysetPage(
            cursors,
            { endpoint: "state.runs", scope: orgId, filters },
            query,
            (window) =>
              runs.list({
                orgId,
                ...window,
                ...(query.projectId === undefined ? {} : { projectId: query.projectId }),
                ...(query.status === undefined ? {} : { status: query.status })
              }),
            idPosition
          )
          return { data: { runs: items.map(toRun) }, cursor }
        })
      })
    })
  )
}
