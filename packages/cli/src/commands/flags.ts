/**
 * Feature-flag commands, with the scope flags of `cpctl config`: `flags list`, `flags create <key> [--enabled]
 * [--value] [--description]` and `flags set <flag> [--enabled true|false] [--value] [--description]`, where
 * `<flag>` is an id (flg_…, found at whatever scope it lives, no `--project` needed) or a key at the given scope.
 */
import { ConfigKey, type FeatureFlag, FeatureFlagId } from "@cp/domain"
import { Effect, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import { allRows, optionalKey, type ScopeFlags } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"
import { parseValue, scopedApi, scopeFlags } from "./config.ts"

const flagColumns: Columns<FeatureFlag> = {
  id: (flag) => flag.id,
  key: (flag) => flag.key,
  enabled: (flag) => String(flag.enabled),
  value: (flag) => JSON.stringify(flag.value),
  scope: (flag) => flag.scopeKind,
  updated: (flag) => flag.updatedAt
}

const valueFlag = Flag.String("value").pipe(
  Flag.withDescription("The flag's value: JSON, or else a string"),
  Flag.optional
)
const descriptionFlag = Flag.String("description").pipe(Flag.withDescription("What the flag is for"), Flag.optional)

/** Every flag of the scope the flags name. */
const flagsAt = (flags: ScopeFlags) =>
  Effect.flatMap(scopedApi(flags), ({ group, params }) =>
    allRows((query) =>
      Effect.map(
        group.listFeatureFlags({ params, query }),
        (page) => ({ rows: page.data.featureFlags, next: page.cursor })
      )
    ))

/**
 * The scopes a flag may live at: the given one, or for an id with no `--project`, the workspace, then each project
 * and each of its environments (so a flag known by its id needs no scope flags).
 */
const candidateScopes = Effect.fnUntraced(function*(flags: ScopeFlags, isId: boolean) {
  if (!isId || Option.isSome(flags.project)) return [flags]
  const { api } = yield* ControlPlaneClient
  const orgId = flags.workspace
  const projects = yield* allRows((query) =>
    Effect.map(
      api.projects.list({ params: { orgId }, query }),
      (page) => ({ rows: page.data.projects, next: page.cursor })
    )
  )
  const scopes: Array<ScopeFlags> = [flags]
  for (const project of projects) {
    scopes.push({ workspace: orgId, project: Option.some(project.id), environment: Option.none() })
    const environments = yield* allRows((query) =>
      Effect.map(
        api.projects.listEnvironments({ params: { orgId, projectId: project.id }, query }),
        (page) => ({ rows: page.data.environments, next: page.cursor })
      )
    )
    for (const environment of environments) {
      scopes.push({ workspace: orgId, project: Option.some(project.id), environment: Option.some(environment.id) })
    }
  }
  return scopes
})

/** The flag an id or key names, and the scope flags that address it. */
const locateFlag = Effect.fnUntraced(function*(flags: ScopeFlags, ref: string) {
  const isId = Schema.is(FeatureFlagId)(ref)
  for (const scope of yield* candidateScopes(flags, isId)) {
    const found = (yield* flagsAt(scope)).find((flag) => (isId ? flag.id : flag.key) === ref)
    if (found !== undefined) return { scope, flag: found }
  }
  return yield* new CliFailure({
    code: "not_found",
    message: isId ? `No feature flag ${ref} in the workspace` : `No feature flag with key ${ref} at this scope`
  })
})

const list = Command.make(
  "list",
  scopeFlags,
  Effect.fn("cpctl.flags.list")(function*(flags) {
    yield* printList(yield* flagsAt(flags), null, {
      columns: flagColumns,
      empty: "No feature flags at this scope.",
      command: []
    })
  })
).pipe(Command.withDescription("List the feature flags of one scope"), withClient)

const create = Command.make(
  "create",
  {
    ...scopeFlags,
    key: Argument.String("key").pipe(Argument.withSchema(ConfigKey), Argument.withDescription("Flag key")),
    enabled: Flag.Boolean("enabled").pipe(
      Flag.withDescription("Create it switched on (off when absent)"),
      Flag.withDefault(false)
    ),
    value: valueFlag,
    description: descriptionFlag
  },
  Effect.fn("cpctl.flags.create")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const { featureFlag } = yield* group.createFeatureFlag({
      params,
      payload: {
        key: flags.key,
        enabled: flags.enabled,
        ...optionalKey("value", Option.map(flags.value, parseValue)),
        ...optionalKey("description", flags.description)
      }
    })
    yield* printResult(featureFlag, (flag) => renderTable(flagColumns, [flag]))
  })
).pipe(Command.withDescription("Create a feature flag"), withClient)

const set = Command.make(
  "set",
  {
    ...scopeFlags,
    flag: Argument.String("flag").pipe(
      Argument.withDescription("The flag's id (flg_…; found at any scope) or its key at the scope the flags name")
    ),
    enabled: Flag.Literals("enabled", ["true", "false"]).pipe(
      Flag.withDescription("Switch it on or off"),
      Flag.optional
    ),
    value: valueFlag,
    description: descriptionFlag
  },
  Effect.fn("cpctl.flags.set")(function*(flags) {
    const located = yield* locateFlag(flags, flags.flag)
    const { group, params } = yield* scopedApi(located.scope)
    const { featureFlag } = yield* group.updateFeatureFlag({
      params: { ...params, flagId: located.flag.id },
      payload: {
        ...optionalKey("enabled", Option.map(flags.enabled, (text) => text === "true")),
        ...optionalKey("value", Option.map(flags.value, parseValue)),
        ...optionalKey("description", flags.description)
      }
    })
    yield* printResult(featureFlag, (flag) => renderTable(flagColumns, [flag]))
  })
).pipe(Command.withDescription("Change a feature flag"), withClient)

/** `cpctl flags`: feature flags at workspace, project and environment scope. */
export const flags = Command.make("flags").pipe(
  Command.withDescription("List, create and change feature flags"),
  Command.withSubcommands([list, create, set])
)
