/**
 * Quota commands, in the workspace of `-w` (or the default): `quotas list`, `quotas set <metric> --limit n --period
 * p --enforcement e [--project p] [--environment e]` (creates the quota of that metric, period and scope, or changes
 * the existing one's limit and enforcement), `quotas delete <quotaId>` (asks unless --yes), `quotas check <metric>
 * [--project p] [--environment e]` and `quotas violations [--metric m] [--project p] [--environment e]
 * [--resource r]`.
 */
import { Conflict, Metric, type Quota, QuotaId, type QuotaViolation } from "@cp/domain"
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import {
  allRows,
  belowWorkspaceFlags,
  confirm,
  fetchRows,
  flagWords,
  optionalKey,
  pageFlags,
  scopeOf,
  workspaceFlag,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const quotaColumns: Columns<Quota> = {
  id: (quota) => quota.id,
  metric: (quota) => quota.metric,
  limit: (quota) => quota.limit,
  period: (quota) => quota.period,
  enforcement: (quota) => quota.enforcement,
  project: (quota) => quota.projectId,
  environment: (quota) => quota.environmentId
}

const violationColumns: Columns<QuotaViolation> = {
  id: (violation) => violation.id,
  metric: (violation) => violation.metric,
  used: (violation) => violation.used,
  limit: (violation) => violation.limit,
  period: (violation) => violation.period,
  periodStart: (violation) => violation.periodStart,
  project: (violation) => violation.projectId,
  environment: (violation) => violation.environmentId,
  resource: (violation) => violation.resourceId
}

const metricArgument = Argument.String("metric").pipe(Argument.withSchema(Metric), Argument.withDescription("Metric"))
const scopeFlags = belowWorkspaceFlags(
  "Project (prj_… or slug): a project quota, or the project of --environment",
  "Environment (env_… or slug) of --project: an environment quota"
)

/** The scope flags as the ids a quota body carries. */
const scopeIds = Effect.fnUntraced(function*(flags: Parameters<typeof scopeOf>[0]) {
  const scope = yield* scopeOf(flags)
  return {
    ...(scope.kind === "organization" ? {} : { projectId: scope.projectId }),
    ...(scope.kind === "environment" ? { environmentId: scope.environmentId } : {})
  }
})

const list = Command.make(
  "list",
  { workspace: workspaceFlag, ...pageFlags },
  Effect.fn("cpctl.quotas.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.quotas.list({ params: { orgId: flags.workspace }, query }),
        (page) => ({ rows: page.data.quotas, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: quotaColumns,
      empty: "No quotas: set one with `cpctl quotas set <metric> --limit n --period day --enforcement soft`.",
      command: ["cpctl", "quotas", "list", "-w", flags.workspace, ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List the workspace's quotas"), withClient)

const set = Command.make(
  "set",
  {
    workspace: workspaceFlag,
    metric: metricArgument,
    limit: Flag.Int("limit").pipe(Flag.withDescription("The limit (an integer ≥ 0)")),
    period: Flag.Literals("period", ["hour", "day", "month", "billing_cycle"]).pipe(
      Flag.withDescription("hour, day, month or billing_cycle")
    ),
    enforcement: Flag.Literals("enforcement", ["soft", "hard"]).pipe(Flag.withDescription("soft or hard")),
    ...scopeFlags
  },
  Effect.fn("cpctl.quotas.set")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const orgId = flags.workspace
    const scope = yield* scopeIds(flags)
    const payload = { metric: flags.metric, limit: flags.limit, period: flags.period, enforcement: flags.enforcement }
    const quota = yield* api.quotas.create({ params: { orgId }, payload: { ...payload, ...scope } }).pipe(
      Effect.map((answer) => answer.quota),
      // One quota per metric, period and scope: an existing one gets the new limit and enforcement.
      Effect.catchIf((error): error is Conflict => error instanceof Conflict, (conflict) =>
        Effect.gen(function*() {
          const quotas = yield* allRows((query) =>
            Effect.map(api.quotas.list({ params: { orgId }, query }), (page) => ({
              rows: page.data.quotas,
              next: page.cursor
            }))
          )
          const existing = quotas.find((quota) =>
            quota.metric === payload.metric && quota.period === payload.period &&
            quota.projectId === (scope.projectId ?? null) && quota.environmentId === (scope.environmentId ?? null)
          )
          if (existing === undefined) return yield* conflict
          const { quota } = yield* api.quotas.update({
            params: { orgId, quotaId: existing.id },
            payload: { limit: payload.limit, enforcement: payload.enforcement }
          })
          return quota
        }))
    )
    yield* printResult(quota, (row) => renderTable(quotaColumns, [row]))
  })
).pipe(
  Command.withDescription("Create a quota, or change the limit of the one at that metric, period and scope"),
  withClient
)

const remove = Command.make(
  "delete",
  {
    workspace: workspaceFlag,
    quota: Argument.String("quota").pipe(Argument.withSchema(QuotaId), Argument.withDescription("Quota id (quo_…)")),
    yes: yesFlag
  },
  Effect.fn("cpctl.quotas.delete")(function*({ quota, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(yes, `Delete quota ${quota}?`)
    const answer = yield* api.quotas.delete({ params: { orgId: workspace, quotaId: quota } })
    yield* printResult(answer, () => `Deleted quota ${quota}`)
  })
).pipe(Command.withDescription("Delete a quota (asks unless --yes)"), withClient)

const check = Command.make(
  "check",
  { workspace: workspaceFlag, metric: metricArgument, ...scopeFlags },
  Effect.fn("cpctl.quotas.check")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const decision = yield* api.quotas.check({
      params: { orgId: flags.workspace },
      payload: { metric: flags.metric, ...(yield* scopeIds(flags)) }
    })
    yield* printResult(decision, (value) =>
      renderTable({
        allowed: (d: typeof value) => d.allowed,
        used: (d) => d.used,
        limit: (d) => d.limit,
        remaining: (d) => d.remaining,
        period: (d) => d.period,
        enforcement: (d) => d.enforcement,
        reason: (d) => d.reason
      }, [value]))
  })
).pipe(Command.withDescription("Evaluate the quota that applies to a metric (records nothing)"), withClient)

const violations = Command.make(
  "violations",
  {
    workspace: workspaceFlag,
    metric: Flag.String("metric").pipe(
      Flag.withSchema(Metric),
      Flag.withDescription("Only this metric"),
      Flag.optional
    ),
    resource: Flag.String("resource").pipe(Flag.withDescription("Only this resource id"), Flag.optional),
    ...scopeFlags,
    ...pageFlags
  },
  Effect.fn("cpctl.quotas.violations")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const filters = {
      ...optionalKey("metric", flags.metric),
      ...optionalKey("resourceId", flags.resource),
      ...(yield* scopeIds(flags))
    }
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.quotas.violations({ params: { orgId: flags.workspace }, query: { ...query, ...filters } }),
        (page) => ({ rows: page.data.violations, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: violationColumns,
      empty: "No quota violations.",
      command: [
        "cpctl",
        "quotas",
        "violations",
        "-w",
        flags.workspace,
        ...flagWords("--metric", flags.metric),
        ...flagWords("--resource", flags.resource),
        ...flagWords("--project", flags.project),
        ...flagWords("--environment", flags.environment),
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List quota violations, newest first"), withClient)

/** `cpctl quotas`. */
export const quotas = Command.make("quotas").pipe(
  Command.withDescription("Manage quotas and read their violations"),
  Command.withSubcommands([list, set, remove, check, violations])
)
