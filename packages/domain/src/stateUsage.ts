/**
 * Workspace-scoped read models of the run-state plane (run-state.md §7): the state the workspace's projects keep
 * (objects and job logs) and the run feed across its projects. Not behind the contract-version gate.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { NotFound } from "./errors.ts"
import { ProjectId } from "./ids.ts"
import { Tally } from "./objects.ts"
import { doc } from "./reference.ts"
import { Run, RunStatus } from "./runs.ts"
import { PageQuery, requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope, Page } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

export const StateUsage = Schema.Struct({ objects: Tally, logs: Tally })
export type StateUsage = typeof StateUsage.Type

export const OrgRunsQuery = Schema.Struct({
  ...PageQuery,
  projectId: Schema.optionalKey(ProjectId.annotate({ description: "Only runs of this project" })),
  status: Schema.optionalKey(RunStatus.annotate({ description: "Only runs in this state" }))
})
export type OrgRunsQuery = typeof OrgRunsQuery.Type

const STATE = "/v1/organizations/:orgId/state"

export class StateReadModelsApi extends HttpApiGroup.make("stateReadModels")
  .add(
    HttpApiEndpoint.get("usage", `${STATE}/usage`, {
      params: { orgId: OrgRef },
      success: Envelope({ usage: StateUsage }),
      error: NotFound
    }).annotateMerge(doc("Get the workspace's state usage", "Objects and job logs across the workspace's projects."))
      .annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.get("runs", `${STATE}/runs`, {
      params: { orgId: OrgRef },
      query: OrgRunsQuery,
      success: Page({ runs: Schema.Array(Run) }),
      error: NotFound
    }).annotateMerge(
      doc("List the workspace's runs", "Across its projects, newest first; filter by project and state.")
    )
      .annotateMerge(requires.permission("state.run.read"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "State read models", description: "Workspace-wide run-state views" }))
{}
