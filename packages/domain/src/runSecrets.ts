/**
 * Run secrets (run-state.md §3): a runner holding a live lease on a job resolves secret values for the run's
 * environment (environment → project → workspace), and publishes job-produced values as environment-scope secrets.
 * Both are lease-bound; every resolve is an audit entry naming the secrets, never their values.
 */
import { Context, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { LeaseLost, NotFound, ValidationFailed } from "./errors.ts"
import { ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { ContractVersionGate, JobKey, LeaseFence, RunId, StatePlaneRoute } from "./runs.ts"
import { Secret, SecretKey, SecretValue } from "./secrets.ts"
import { requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

export const ResolveSecretsInput = Schema.Struct({
  ...LeaseFence.fields,
  jobId: JobKey,
  names: Schema.Array(SecretKey).check(Schema.isMinLength(1), Schema.isMaxLength(100))
})
export type ResolveSecretsInput = typeof ResolveSecretsInput.Type

export const OutputSecretsInput = Schema.Struct({
  ...LeaseFence.fields,
  jobId: JobKey,
  secrets: Schema.Record(SecretKey, SecretValue).check(Schema.isMinProperties(1), Schema.isMaxProperties(50))
})
export type OutputSecretsInput = typeof OutputSecretsInput.Type

const runParams = { orgId: OrgRef, projectId: ProjectId, runId: RunId }
const RUN = "/v1/organizations/:orgId/projects/:projectId/state/runs/:runId"

export class RunSecretsApi extends HttpApiGroup.make("runSecrets")
  .add(
    HttpApiEndpoint.post("resolve", `${RUN}/secrets/resolve`, {
      params: runParams,
      payload: ResolveSecretsInput,
      success: Envelope({ secrets: Schema.Record(Schema.String, Schema.String), missing: Schema.Array(Schema.String) }),
      error: [NotFound, LeaseLost]
    }).annotateMerge(
      doc(
        "Resolve secrets for a job",
        "Needs a live lease on the job. Values resolve environment → project → workspace for the run's " +
          "environment; names not found are listed in `missing`. Each call is audited with the names, never the " +
          "values."
      )
    ).annotateMerge(requires.permission("secret.value.use")),
    HttpApiEndpoint.post("output", `${RUN}/output-secrets`, {
      params: runParams,
      payload: OutputSecretsInput,
      success: Envelope({ secrets: Schema.Array(Secret) }),
      error: [NotFound, LeaseLost, ValidationFailed]
    }).annotateMerge(
      doc(
        "Publish a job's output secrets",
        "Lease-fenced; creates or rotates environment-scope secrets of the run's environment (422 when the run " +
          "has none)."
      )
    ).annotateMerge(requires.permission("state.run.write"))
  )
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Run secrets", description: "Lease-bound secret resolution and output" }))
{}
