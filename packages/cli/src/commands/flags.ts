/**
 * Feature-flag commands, with the scope flags of `cpctl config`: `flags list`, `flags create <key> [--enabled]
 * [--value] [--description]` and `flags set <flag> [--enabled true|false] [--value] [--description]`.
 */
import { ConfigKey, type FeatureFlag, FeatureFlagId } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { withClient } from "../client.ts"
import { optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"
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

const list = Command.make(
  "list",
  scopeFlags,
  Effect.fn("cpctl.flags.list")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const page = yield* group.listFeatureFlags({ params, query: { limit: 100 } })
    yield* printResult(page.data, ({ featureFlags }) => renderTable(flagColumns, featureFlags))
  })
).pipe(Command.withDescription("List the feature flags of one scope"), withClient)

const create = Command.make(
  "create",
  {
    ...scopeFlags,
    key: Argument.String("key").pipe(Argument.withSchema(ConfigKey), Argument.withDescription("Flag key")),
    enabled: Flag.Boolean("enabled").pipe(Flag.withDescription("Create it switched on")),
    value: valueFlag,
    description: descriptionFlag
  },
  Effect.fn("cpctl.flags.create")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const created = yield* group.createFeatureFlag({
      params,
      payload: {
        key: flags.key,
        enabled: flags.enabled,
        ...optionalKey("value", Option.map(flags.value, parseValue)),
        ...optionalKey("description", flags.description)
      }
    })
    yield* printResult(created, ({ featureFlag }) => renderTable(flagColumns, [featureFlag]))
  })
).pipe(Command.withDescription("Create a feature flag"), withClient)

const set = Command.make(
  "set",
  {
    ...scopeFlags,
    flag: Argument.String("flag").pipe(
      Argument.withSchema(FeatureFlagId),
      Argument.withDescription("The flag's id (flg_…)")
    ),
    enabled: Flag.Literals("enabled", ["true", "false"]).pipe(
      Flag.withDescription("Switch it on or off"),
      Flag.optional
    ),
    value: valueFlag,
    description: descriptionFlag
  },
  Effect.fn("cpctl.flags.set")(function*(flags) {
    const { group, params } = yield* scopedApi(flags)
    const updated = yield* group.updateFeatureFlag({
      params: { ...params, flagId: flags.flag },
      payload: {
        ...optionalKey("enabled", Option.map(flags.enabled, (text) => text === "true")),
        ...optionalKey("value", Option.map(flags.value, parseValue)),
        ...optionalKey("description", flags.description)
      }
    })
    yield* printResult(updated, ({ featureFlag }) => renderTable(flagColumns, [featureFlag]))
  })
).pipe(Command.withDescription("Change a feature flag"), withClient)

/** `cpctl flags`: feature flags at workspace, project and environment scope. */
export const flags = Command.make("flags").pipe(
  Command.withDescription("List, create and change feature flags"),
  Command.withSubcommands([list, create, set])
)
