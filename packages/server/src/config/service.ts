/**
 * Configuration: settings and feature flags at workspace, project and environment scope, and the resolution of a
 * setting key (`resolution.ts`). Masked settings show `value: null, masked: true` to callers without the write
 * permission where the setting lives (`rules.ts`). This module is the reads and writes: scope checks, transactions,
 * events (`settings.updated`, `feature.updated`) whose audit entries carry keys and ids, never values.
 */
import {
  type Actor,
  Conflict,
  type EnvironmentId,
  FeatureFlag,
  type FeatureFlagId,
  type FeatureFlagInput,
  type FeatureFlagPatch,
  NotFound,
  type Paged,
  type ProjectId,
  type ResolvedSetting,
  type ResolvedWorkspace,
  Setting,
  type SettingId,
  type SettingInput,
  type SettingPatch,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  ConfigRepo,
  type ConfigScope,
  EnvironmentsRepo,
  type FeatureFlagRow,
  idPosition,
  type JsonObject,
  OrganizationsRepo,
  type PageWindow,
  ProjectsRepo,
  type SettingRow,
  Transactor,
  type UniqueViolation
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { apiJson, eventActorOf, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { findEnvironment, findProject } from "../projects/scope.ts"
import { builtinSetting, resolvedFrom, resolveStored } from "./resolution.ts"
import {
  canWrite,
  changedFields,
  overridableProblem,
  parseJson,
  scopeKindOf,
  toFeatureFlag,
  toSetting,
  valueProblem
} from "./rules.ts"

/** The scope a request names: the workspace the edge resolved, and the project and environment of its path. */
export interface ConfigTarget {
  readonly workspace: ResolvedWorkspace
  readonly projectId: ProjectId | null
  readonly environmentId: EnvironmentId | null
}

const configScopeOf = (target: ConfigTarget): ConfigScope => ({
  orgId: target.workspace.organization.id,
  projectId: target.projectId,
  environmentId: target.environmentId
})

/** The `overridable` rule at a target: where the workspace is an account root and no project is named. */
const overridableAt = (target: ConfigTarget, overridable: boolean | undefined) =>
  overridableProblem(
    { projectId: target.projectId, isAccountRoot: target.workspace.organization.isAccountRoot },
    overridable
  )

const settingNotFound = (settingId: string) => wireError(NotFound, "Setting not found", { settingId })
const flagNotFound = (flagId: string) => wireError(NotFound, "Feature flag not found", { flagId })

/** How the events of one kind of configuration row name their type, subject and id field. */
interface ChangeKind {
  readonly type: string
  readonly subjectKind: string
  readonly idField: string
  readonly label: string
  readonly noun: string
}

const SETTING_CHANGE: ChangeKind = {
  type: "settings.updated",
  subjectKind: "setting",
  idField: "settingId",
  label: "Setting",
  noun: "setting"
}
const FLAG_CHANGE: ChangeKind = {
  type: "feature.updated",
  subjectKind: "feature_flag",
  idField: "flagId",
  label: "Feature flag",
  noun: "feature flag"
}

export class ConfigService extends Context.Service<ConfigService, {
  readonly listSettings: (
    target: ConfigTarget,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly settings: ReadonlyArray<Setting> }>, NotFound | ValidationFailed>
  readonly createSetting: (
    actor: Actor,
    target: ConfigTarget,
    input: SettingInput
  ) => Effect.Effect<{ readonly setting: Setting }, NotFound | Conflict | ValidationFailed>
  readonly updateSetting: (
    actor: Actor,
    target: ConfigTarget,
    settingId: SettingId,
    patch: SettingPatch
  ) => Effect.Effect<{ readonly setting: Setting }, NotFound | ValidationFailed>
  readonly resolveSetting: (
    target: ConfigTarget,
    key: string
  ) => Effect.Effect<{ readonly setting: ResolvedSetting }, NotFound>
  readonly listFeatureFlags: (
    target: ConfigTarget,
    page: PageRequest
  ) => Effect.Effect<Paged<{ readonly featureFlags: ReadonlyArray<FeatureFlag> }>, NotFound | ValidationFailed>
  readonly createFeatureFlag: (
    actor: Actor,
    target: ConfigTarget,
    input: FeatureFlagInput
  ) => Effect.Effect<{ readonly featureFlag: FeatureFlag }, NotFound | Conflict>
  readonly updateFeatureFlag: (
    actor: Actor,
    target: ConfigTarget,
    flagId: FeatureFlagId,
    patch: FeatureFlagPatch
  ) => Effect.Effect<{ readonly featureFlag: FeatureFlag }, NotFound>
}>()("@cp/server/ConfigService") {
  static readonly layer = Layer.effect(
    ConfigService,
    Effect.gen(function*() {
      const config = yield* ConfigRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const organizations = yield* OrganizationsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors

      /** 404 unless the project (and environment) of the path exist in the workspace. */
      const checkScope = Effect.fnUntraced(function*(target: ConfigTarget) {
        const orgId = target.workspace.organization.id
        const { projectId, environmentId } = target
        if (projectId === null) return
        if (environmentId !== null) {
          yield* findEnvironment(environments, { orgId, projectId, environmentId })
          return
        }
        yield* findProject(projects, orgId, projectId)
      })

      /** A page of the rows of exactly the target's scope, once the scope is known to exist. */
      const scopedPage = <Row extends { readonly createdAt: Date; readonly id: string }>(
        endpoint: string,
        target: ConfigTarget,
        page: PageRequest,
        fetch: (page: ConfigScope & PageWindow) => Effect.Effect<ReadonlyArray<Row>>
      ) =>
        Effect.andThen(
          checkScope(target),
          keysetPage(
            cursors,
            {
              endpoint,
              scope: `${target.workspace.organization.id}/${target.projectId ?? ""}/${target.environmentId ?? ""}`
            },
            page,
            (window) => fetch({ ...configScopeOf(target), ...window }),
            idPosition
          )
        )

      const resourceOf = (row: SettingRow | FeatureFlagRow): JsonObject =>
        "enabled" in row
          ? { featureFlag: apiJson(FeatureFlag, toFeatureFlag(row)) }
          : { setting: apiJson(Setting, toSetting(row, false)) }

      /** Records a change to a setting or a flag: its event and audit entry carry ids and keys, never values. */
      const recordChange = (
        kind: ChangeKind,
        actor: Actor,
        row: SettingRow | FeatureFlagRow,
        action: "created" | "updated",
        changed: Array<string>
      ) =>
        events.record({
          orgId: row.orgId,
          type: kind.type,
          actor: eventActorOf(actor),
          subject: { kind: kind.subjectKind, id: row.id, name: row.key },
          // webhooks.md §1: the row as the API returns it; its values read `[REDACTED]` (audit redaction of `value`).
          data: { action, [kind.idField]: row.id, key: row.key, scopeKind: row.scopeKind, changed, ...resourceOf(row) },
          projectId: row.projectId,
          environmentId: row.environmentId,
          description: `${kind.label} ${row.key} ${action} at ${row.scopeKind} scope`
        })

      /** Inserts a new row and records its creation in one transaction; a key taken at the scope is a 409 on `key`. */
      const insertNew = (
        kind: ChangeKind,
        actor: Actor,
        row: SettingRow | FeatureFlagRow,
        insert: Effect.Effect<void, UniqueViolation>
      ) =>
        tx.withTransaction(Effect.gen(function*() {
          yield* insert
          yield* recordChange(kind, actor, row, "created", [])
        })).pipe(
          Effect.catchTag("UniqueViolation", () =>
            Effect.fail(wireError(Conflict, `A ${kind.noun} with key '${row.key}' already exists at this scope`, {
              field: "key"
            })))
        )

      /** Runs the store of an updated row and records the fields the patch touched; a row gone meanwhile is a 404. */
      const storeUpdate = Effect.fnUntraced(function*<Row extends SettingRow | FeatureFlagRow>(
        kind: ChangeKind,
        actor: Actor,
        patch: object,
        store: Effect.Effect<Option.Option<Row>>,
        notFound: () => NotFound
      ) {
        const stored = yield* store.pipe(orFail(notFound))
        yield* recordChange(kind, actor, stored, "updated", changedFields(patch))
        return stored
      })

      /** The account root's workspace-scope setting for `key`, seen from a child workspace; undefined on a root. */
      const accountSetting = Effect.fnUntraced(function*(workspace: ResolvedWorkspace, key: string) {
        if (workspace.organization.isAccountRoot) return undefined
        const root = yield* organizations.findByPublicId(workspace.organization.accountId)
        if (Option.isNone(root) || root.value.id === workspace.organization.id) return undefined
        const rows = yield* config.settingsWithKey({ orgId: root.value.id, key })
        return rows.find((row) => row.projectId === null && row.environmentId === null)
      })

      return ConfigService.of({
        listSettings: Effect.fn("Config.listSettings")(function*(target, page) {
          const { items, cursor } = yield* scopedPage("config.settings", target, page, config.listSettings)
          const settings = items.map((row) => toSetting(row, canWrite(target.workspace.grants, row)))
          return { data: { settings }, cursor }
        }),

        createSetting: Effect.fn("Config.createSetting")(function*(actor, target, input) {
          yield* checkScope(target)
          const valueType = input.valueType ?? "json"
          const problems = {
            value: valueProblem(input.value, valueType),
            overridable: overridableAt(target, input.overridable)
          }
          const fields = Object.fromEntries(
            Object.entries(problems).flatMap(([field, problem]) => problem === undefined ? [] : [[field, [problem]]])
          )
          if (Object.keys(fields).length > 0) return yield* validationFailed(fields)
          const at = yield* currentDate
          const row: SettingRow = {
            id: mint.setting(at.getTime()),
            ...configScopeOf(target),
            scopeKind: scopeKindOf(target),
            key: input.key,
            valueJson: JSON.stringify(input.value),
            valueType,
            visibility: input.visibility ?? "internal",
            overridable: input.overridable ?? true,
            description: input.description ?? null,
            createdAt: at,
            updatedAt: at
          }
          yield* insertNew(SETTING_CHANGE, actor, row, config.insertSetting(row))
          return { setting: toSetting(row, true) }
        }),

        updateSetting: Effect.fn("Config.updateSetting")(function*(actor, target, settingId, patch) {
          yield* checkScope(target)
          const overridable = overridableAt(target, patch.overridable)
          if (overridable !== undefined) return yield* validationFailed({ overridable: [overridable] })
          const updated = yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* config.findSetting({ ...configScopeOf(target), id: settingId }).pipe(
              orFail(() => settingNotFound(settingId))
            )
            const valueType = patch.valueType ?? current.valueType
            const value = patch.value !== undefined ? patch.value : parseJson(current.valueJson)
            const problem = valueProblem(value, valueType)
            if (problem !== undefined) return yield* validationFailed({ value: [problem] })
            const next: SettingRow = {
              ...current,
              valueJson: JSON.stringify(value),
              valueType,
              visibility: patch.visibility ?? current.visibility,
              overridable: patch.overridable ?? current.overridable,
              description: patch.description !== undefined ? patch.description : current.description,
              updatedAt: yield* currentDate
            }
            return yield* storeUpdate(
              SETTING_CHANGE,
              actor,
              patch,
              config.updateSetting(next),
              () => settingNotFound(settingId)
            )
          }))
          return { setting: toSetting(updated, true) }
        }),

        resolveSetting: Effect.fn("Config.resolveSetting")(function*(target, key) {
          yield* checkScope(target)
          const { workspace } = target
          const orgId = workspace.organization.id
          const stored = resolveStored(
            { isAccountRoot: workspace.organization.isAccountRoot, ...target },
            yield* config.settingsWithKey({ orgId, key }),
            yield* accountSetting(workspace, key)
          )
          const setting = stored === undefined
            ? builtinSetting(orgId, key)
            : resolvedFrom(stored, canWrite(workspace.grants, stored.row))
          if (setting === undefined) {
            return yield* wireError(NotFound, `No setting '${key}' resolves at this scope`, { key })
          }
          return { setting }
        }),

        listFeatureFlags: Effect.fn("Config.listFeatureFlags")(function*(target, page) {
          const { items, cursor } = yield* scopedPage("config.featureFlags", target, page, config.listFlags)
          return { data: { featureFlags: items.map(toFeatureFlag) }, cursor }
        }),

        createFeatureFlag: Effect.fn("Config.createFeatureFlag")(function*(actor, target, input) {
          yield* checkScope(target)
          const at = yield* currentDate
          const row: FeatureFlagRow = {
            id: mint.featureFlag(at.getTime()),
            ...configScopeOf(target),
            scopeKind: scopeKindOf(target),
            key: input.key,
            enabled: input.enabled,
            valueJson: JSON.stringify(input.value ?? null),
            description: input.description ?? null,
            createdAt: at,
            updatedAt: at
          }
          yield* insertNew(FLAG_CHANGE, actor, row, config.insertFlag(row))
          return { featureFlag: toFeatureFlag(row) }
        }),

        updateFeatureFlag: Effect.fn("Config.updateFeatureFlag")(function*(actor, target, flagId, patch) {
          yield* checkScope(target)
          const updated = yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* config.findFlag({ ...configScopeOf(target), id: flagId }).pipe(
              orFail(() => flagNotFound(flagId))
            )
            const next: FeatureFlagRow = {
              ...current,
              enabled: patch.enabled ?? current.enabled,
              valueJson: patch.value !== undefined ? JSON.stringify(patch.value) : current.valueJson,
              description: patch.description !== undefined ? patch.description : current.description,
              updatedAt: yield* currentDate
            }
            return yield* storeUpdate(FLAG_CHANGE, actor, patch, config.updateFlag(next), () => flagNotFound(flagId))
          }))
          return { featureFlag: toFeatureFlag(updated) }
        })
      })
    })
  )
}
