/**
 * Access commands: `access explain [-w <ref>] [--subject <usr_…|sp_…>] [--project <prj_…|slug>] [--allowed]`, every
 * permission with its decision and where it comes from (a direct role, a team, or the account root).
 */
import { type PermissionDecision, type Via } from "@cp/domain"
import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { optionalKey, resolveProject, workspaceFlag } from "../options.ts"
import { type Columns, printList } from "../output.ts"

/** `team:builder@organization (team_…)`: how the role is held, which role, on what scope, through which team. */
export const describeVia = (via: Via): string =>
  [
    `${via.kind}:${via.role}@${via.scopeKind}`,
    ...(via.scopeRef === null ? [] : [` ${via.scopeRef}`]),
    ...(via.teamId === undefined ? [] : [` (${via.teamId})`])
  ].join("")

const decisionColumns: Columns<PermissionDecision> = {
  action: (decision) => decision.action,
  allow: (decision) => (decision.allow ? "yes" : "no"),
  via: (decision) => (decision.via === null ? null : describeVia(decision.via))
}

const explain = Command.make(
  "explain",
  {
    workspace: workspaceFlag,
    subject: Flag.String("subject").pipe(
      Flag.withDescription("Whose access (usr_… or sp_…); yourself when absent. Needs organization.member.list"),
      Flag.optional
    ),
    project: Flag.String("project").pipe(
      Flag.withDescription("Decide project-scoped permissions within this project (prj_… or slug)"),
      Flag.optional
    ),
    allowed: Flag.Boolean("allowed").pipe(
      Flag.withDescription("Show only the permissions that are allowed"),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cpctl.access.explain")(function*({ workspace, subject, project, allowed }) {
    const { api } = yield* ControlPlaneClient
    const projectId = Option.isSome(project)
      ? Option.some(yield* resolveProject(workspace, project.value))
      : Option.none()
    const access = yield* api.workspaces.effectiveAccess({
      params: { orgId: workspace },
      query: { ...optionalKey("subjectId", subject), ...optionalKey("projectId", projectId) }
    })
    const permissions = allowed ? access.permissions.filter((decision) => decision.allow) : access.permissions
    yield* printList(permissions, null, { columns: decisionColumns, empty: "No permissions allowed.", command: [] })
  })
).pipe(Command.withDescription("Explain who may do what in a workspace, and why"), withClient)

/** `cpctl access`: effective access and its provenance. */
export const access = Command.make("access").pipe(
  Command.withDescription("Inspect effective access: each permission, allowed or not, and through which role"),
  Command.withSubcommands([explain])
)
