/**
 * Settings commands, all with `--workspace <ref>` and optionally `--project <prj_…>` and `--environment <env_…>` to
 * pick the scope: `config get [key]` (settings defined at exactly that scope), `config set <key> <value> [--type]
 * [--visibility] [--description] [--locked]` (creates the setting, or updates it when the scope already has the key)
 * and `config resolve <key>` (the effective value with where it came from). A value that parses as JSON is sent as
 * that JSON; anything else is sent as a string.
 */
import { ConfigKey, type ResolvedSetting, type Setting, SettingValueType, SettingVisibility } from "@cp/domain"
import { Effect, Option, type Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { allRows, belowWorkspaceFlags, optionalKey, type ScopeFlags, scopeOf, workspaceFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

/**
 * A value as a table shows it. A masked setting shows `(masked)` unless `--reveal`; the server sends its value
 * only to callers who may write it, so revealing it without that permission still shows nothing.
 */
const show = (value: Schema.Json, masked: boolean | undefined, reveal: boolean) =>
  masked === true && (!reveal || value === null) ? "(masked)" : JSON.stringify(value)

const settingColumns = (reveal: boolean): Columns<Setting> => ({
  id: (setting) => setting.id,
  key: (setting) => setting.key,
  value: (setting) => show(setting.value, setting.masked, reveal),
  scope: (setting) => setting.scopeKind,
  updated: (setting) => setting.updatedAt
})

const resolvedColumns = (reveal: boolean): Columns<ResolvedSetting> => ({
  key: (setting) => setting.key,
  value: (setting) => show(setting.value, setting.masked, reveal),
  from: (setting) => setting.inheritedFrom.scopeKind,
  overridable: (setting) => String(setting.overridable),
  id: (setting) => setting.id
})

/** A setting as `--json` prints it: a masked value stays `null` unless `--reveal`. */
const masking = <S extends { readonly value: Schema.Json; readonly masked?: true }>(setting: S, reveal: boolean): S =>
  setting.masked === true && !reveal ? { ...setting, value: null } : setting

const revealFlag = Flag.Boolean("reveal").pipe(
  Flag.withDescription("Show masked values (only a caller who may write the setting receives them)"),
  Flag.withDefault(false)
)

/** The workspace, `--project` and `--environment` (ids or slugs): the scope a command works at. */
export const scopeFlags = {
  workspace: workspaceFlag,
  ...belowWorkspaceFlags(
    "Project scope (prj_… or slug)",
    "Environment scope (env_… or slug); needs --project"
  )
}

/**
 * The client group of the scope the flags name, and its path params. The three groups have the same endpoints; only
 * their paths (and so their params) differ, so they are used through the workspace group's type.
 */
export const scopedApi = Effect.fnUntraced(function*(flags: ScopeFlags) {
  const { api } = yield* ControlPlaneClient
  const scope = yield* scopeOf(flags)
  const { orgId } = scope
  switch (scope.kind) {
    case "environment":
      return {
        scope,
        group: api.environmentConfiguration as unknown as typeof api.configuration,
        params: { orgId, projectId: scope.projectId, environmentId: scope.environmentId } as { orgId: string }
      }
    case "project":
      return {
        scope,
        group: api.projectConfiguration as unknown as typeof api.configuration,
        params: { orgId, projectId: scope.projectId } as { orgId: string }
      }
    case "organization":
      return { scope, group: api.configuration, params: { orgId } }
  }
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

/** Every setting defined at exactly one scope. */
const settingsAt = (group: Effect.Success<ReturnType<typeof scopedApi>>) =>
  allRows((query) =>
    Effect.map(
      group.group.listSettings({ params: group.params, query }),
      (page) => ({ rows: page.data.settings, next: page.cursor })
    )
  )

const get = Command.make(
  "get",
  {
    ...scopeFlags,
    key: Argument.String("key").pipe(Argument.withDescription("Only this key"), Argument.optional),
    reveal: revealFlag
  },
  Effect.fn("cpctl.config.get")(function*(flags) {
    const settings = (yield* settingsAt(yield* scopedApi(flags)))
      .filter((setting) => Option.match(flags.key, { onNone: () => true, onSome: (key) => setting.key === key }))
      .map((setting) => masking(setting, flags.reveal))
    yield* printList(settings, null, {
      columns: settingColumns(flags.reveal),
      empty: "No settings at this scope.",
      command: []
    })
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
    const scoped = yield* scopedApi(flags)
    const { group, params } = scoped
    const value = parseValue(flags.value)
    const declared = {
      ...optionalKey("valueType", flags.type),
      ...optionalKey("visibility", flags.visibility),
      ...optionalKey("description", flags.description),
      ...optionalKey("overridable", Option.map(flags.locked, (locked) => !locked))
    }
    const existing = (yield* settingsAt(scoped)).find((setting) => setting.key === flags.key)
    const { setting } = existing === undefined
      ? yield* group.createSetting({ params, payload: { key: flags.key, value, ...declared } })
      : yield* group.updateSetting({ params: { ...params, settingId: existing.id }, payload: { value, ...declared } })
    yield* printResult(setting, (setting) => renderTable(settingColumns(true), [setting]))
  })
).pipe(Command.withDescription("Create or update a setting at one scope"), withClient)

const resolve = Command.make(
  "resolve",
  { ...scopeFlags, key: keyArgument, reveal: revealFlag },
  Effect.fn("cpctl.config.resolve")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const { setting } = yield* group.resolveSetting({ params, query: { key: flags.key } })
    yield* printResult(
      masking(setting, flags.reveal),
      (setting) => renderTable(resolvedColumns(flags.reveal), [setting])
    )
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
