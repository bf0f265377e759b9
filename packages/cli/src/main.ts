/** The `cpctl` command tree and how a run reports failure. */
import { type Cause, Effect } from "effect"
import { Command } from "effect/cli"
import { BaseUrlFlag, TokenFlag } from "./client.ts"
import { access } from "./commands/access.ts"
import { admin, agents } from "./commands/agents.ts"
import { apiKeys } from "./commands/apiKeys.ts"
import { audit } from "./commands/audit.ts"
import { login, logout, whoami } from "./commands/auth.ts"
import { billing } from "./commands/billing.ts"
import { config } from "./commands/config.ts"
import { flags } from "./commands/flags.ts"
import { integrations, repoLinks } from "./commands/integrations.ts"
import { invitations } from "./commands/invitations.ts"
import { members } from "./commands/members.ts"
import { gc, objects } from "./commands/objects.ts"
import { envs, projects } from "./commands/projects.ts"
import { quotas } from "./commands/quotas.ts"
import { jobs, link, logs, runner, runs } from "./commands/runs.ts"
import { secrets } from "./commands/secrets.ts"
import { catalog, refs, tfstate } from "./commands/state.ts"
import { teams } from "./commands/teams.ts"
import { usage } from "./commands/usage.ts"
import { webhooks } from "./commands/webhooks.ts"
import { workspaces } from "./commands/workspaces.ts"
import { type CpctlError, reportFailure } from "./errors.ts"
import { JsonOutput } from "./output.ts"
import { VERSION } from "./version.ts"

/** The whole command tree, with the flags every command accepts. */
export const cpctl = Command.make("cpctl").pipe(
  Command.withDescription("Admin CLI for the workspace control plane"),
  Command.withSubcommands([
    login,
    logout,
    whoami,
    workspaces,
    apiKeys,
    audit,
    members,
    invitations,
    teams,
    projects,
    envs,
    access,
    secrets,
    config,
    flags,
    webhooks,
    usage,
    quotas,
    billing,
    agents,
    admin,
    integrations,
    repoLinks,
    link,
    runs,
    jobs,
    logs,
    runner,
    objects,
    gc,
    refs,
    catalog,
    tfstate
  ]),
  Command.withGlobalFlags([BaseUrlFlag, TokenFlag, JsonOutput])
)

const runCpctl = Command.runWith(cpctl, { version: VERSION })

/** Runs cpctl on the given arguments; a failure is printed as `error <code>: <message>` and fails the run. */
export const run = (args: ReadonlyArray<string>) =>
  runCpctl(args).pipe(Effect.tapCause((cause: Cause.Cause<CpctlError>) => reportFailure(cause)))
