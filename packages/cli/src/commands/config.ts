/**
 * Settings commands, all with `--workspace <ref>` and optionally `--project <prj_…>` and `--environment <env_…>` to
 * pick the scope: `config get [key]` (settings defined at exactly that scope), `config set <key> <value> [--type]
 * [--visibility] [--description] [--locked]` (creates the setting, or updates it when the scope already has the key)
 * and `config resolve <key>` (the effective value with where it came from). A value that parses as JSON is sent as
 * that JSON; anything else is sent as a string.
 */
import {
  ConfigKey,
  EnvironmentId,
  ProjectId,
  type ResolvedSetting,
  type Setting,
  SettingValueType,
  SettingVisibility
} from "@cp/domain"
import { Effect, Option, type Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { belowWorkspaceFlags, optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"
import { workspaceFlag } from "./teams.ts"

const show = (value: Schema.Json, masked: boolean | undefined) => masked === true ? "(masked)" : JSON.stringify(value)

const settingColumns: Columns<Setting> = {
  id: (setting) => setting.id,
  key: (setting) => setting.key,
  value: (setting) => show(setting.value, setting.masked),
  scope: (setting) => setting.scopeKind,
  updated: (setting) => setting.updatedAt
}

const resolvedColumns: Columns<ResolvedSetting> = {
  key: (setting) => setting.key,
  value: (setting) => show(setting.value, setting.masked),
  from: (setting) => setting.inheritedFrom.scopeKind,
  overridable: (setting) => String(setting.overridable),
  id: (setting) => setting.id
}

/** `--project` and `--environment`: the scope below the workspace (an environment needs its project). */
export const scopeFlags = {
  workspace: workspaceFlag,
  ...belowWorkspaceFlags("Project scope (prj_…)", "Environment scope (env_…); needs --project")
}

export interface ScopeFlags {
  readonly workspace: string
  readonly project: Option.Option<ProjectId>
  readonly environment: Option.Option<EnvironmentId>
}

/**
 * The client group of the scope the flags name, and its path params. The three groups have the same endpoints; only
 * their paths (and so their params) differ, so they are used through the workspace group's type.
 */
export const scopedApi = Effect.fnUntraced(function*(flags: ScopeFlags) {
  const { api } = yield* ControlPlaneClient
  const orgId = flags.workspace
  if (Option.isSome(flags.environment)) {
    if (Option.isNone(flags.project)) return yield* Effect.die(new Error("--environment needs --project"))
    return {
      group: api.environmentConfiguration as unknown as typeof api.configuration,
      params: { orgId, projectId: flags.project.value, environmentId: flags.environment.value } as { orgId: string }
    }
  }
  if (Option.isSome(flags.project)) {
    return {
      group: api.projectConfiguration as unknown as typeof api.configuration,
      params: { orgId, projectId: flags.project.value } as { orgId: string }
    }
  }
  return { group: api.configuration, params: { orgId } }
})

/** A command-line value: JSON when it parses, else the string itself. */
export const parseValue = (text: string): Schema.Json => {
  try {
    return JSON.parse(text) as Schema.Json
  } catch {
    return text
  }
}

const keyArgument = Argument.String("key").pipe(Argument.withSchema(ConfigKey), Argument.withDescription("Setting key"))

const get = Command.make(
  "get",
  {
    ...scopeFlags,
    key: Argument.String("key").pipe(Argument.withDescription("Only this key"), Argument.optional)
  },
  Effect.fn("cpctl.config.get")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const page = yield* group.listSettings({ params, query: { limit: 100 } })
    const settings = Option.match(flags.key, {
      onNone: () => page.data.settings,
      onSome: (key) => page.data.settings.filter((setting) => setting.key === key)
    })
    yield* printResult({ settings }, ({ settings }) => renderTable(settingColumns, settings))
  })
).pipe(Command.withDescription("Show the settings defined at exactly one scope"), withClient)

const set = Command.make(
  "set",
  {
    ...scopeFlags,
    key: keyArgument,
    value: Argument.String("value").pipe(Argument.withDescription("The value: JSON, or else a string")),
    type: Flag.Literals("type", SettingValueType.literals).pipe(
      Flag.withDescription("Declared value type"),
      Flag.optional
    ),
    visibility: Flag.Literals("visibility", SettingVisibility.literals).pipe(
      Flag.withDescription("public, internal or masked"),
      Flag.optional
    ),
    description: Flag.String("description").pipe(Flag.withDescription("What the setting is for"), Flag.optional),
    locked: Flag.Boolean("locked").pipe(
      Flag.withDescription("Lock it for every lower scope (account root workspace scope only)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.config.set")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const value = parseValue(flags.value)
    const declared = {
      ...optionalKey("valueType", flags.type),
      ...optionalKey("visibility", flags.visibility),
      ...optionalKey("description", flags.description),
      ...optionalKey("overridable", Option.map(flags.locked, (locked) => !locked))
    }
    const existing = (yield* group.listSettings({ params, query: { limit: 100 } })).data.settings
      .find((setting) => setting.key === flags.key)
    const result = existing === undefined
      ? yield* group.createSetting({ params, payload: { key: flags.key, value, ...declared } })
      : yield* group.updateSetting({ params: { ...params, settingId: existing.id }, payload: { value, ...declared } })
    yield* printResult(result, ({ setting }) => renderTable(settingColumns, [setting]))
  })
).pipe(Command.withDescription("Create or update a setting at one scope"), withClient)

const resolve = Command.make(
  "resolve",
  { ...scopeFlags, key: keyArgument },
  Effect.fn("cpctl.config.resolve")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const resolved = yield* group.resolveSetting({ params, query: { key: flags.key } })
    yield* printResult(resolved, ({ setting }) => renderTable(resolvedColumns, [setting]))
  })
).pipe(
  Command.withDescription("Resolve a key: environment, project, workspace, account, then the built-in default"),
  withClient
)

/** `cpctl config`: settings at workspace, project and environment scope. */
export const config = Command.make("config").pipe(
  Command.withDescription("Read, write and resolve settings"),
  Command.withSubcommands([get, set, resolve])
)
