/**
 * Configuration: settings and feature flags at workspace, project and environment scope, and the resolution of a
 * setting key through environment → project → workspace → account root → built-in default. A locked account-scope
 * guardrail (`overridable: false` on a setting of the account root's workspace scope) wins over every lower scope.
 * Masked settings show `value: null, masked: true` to callers without the write permission where the setting lives.
 * Events (`settings.updated`, `feature.updated`) and their audit entries carry keys and ids, never values.
 */
import {
  type Actor,
  type ConfigScopeKind,
  Conflict,
  type EnvironmentId,
  type FeatureFlag,
  FeatureFlagId,
  type FeatureFlagInput,
  type FeatureFlagPatch,
  NotFound,
  type OrgId,
  type Paged,
  type Permission,
  type ProjectId,
  type ResolvedScopeKind,
  type ResolvedSetting,
  type ResolvedWorkspace,
  type Setting,
  SettingId,
  type SettingInput,
  type SettingPatch,
  type SettingValueType,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  type ConfigPagePosition,
  type ConfigPageWindow,
  ConfigRepo,
  type ConfigScope,
  EnvironmentsRepo,
  type FeatureFlagRow,
  OrganizationsRepo,
  ProjectsRepo,
  type SettingRow,
  Transactor,
  type UniqueViolation
} from "@cp/persistence"
import { Clock, Context, Effect, Layer, Option, type Schema } from "effect"
import { eventActorOf, EventLog } from "../platform/events.ts"
import { newId } from "../platform/ids.ts"
import { Cursors, timeIdPage } from "../platform/pagination.ts"
import { decide } from "../platform/rbac.ts"
import { findEnvironment, findProject } from "../projects/scope.ts"
import type { PageRequest } from "../workspaces/service.ts"

/** The scope a request names: the workspace the edge resolved, and the project and environment of its path. */
export interface ConfigTarget {
  readonly workspace: ResolvedWorkspace
  readonly projectId: ProjectId | null
  readonly environmentId: EnvironmentId | null
}

/**
 * Built-in defaults, the last step of resolution (documented in docs/decisions.md). Each is public and overridable;
 * its resolved form has `id: null`, `scopeKind` / `inheritedFrom.scopeKind` `default` and epoch timestamps.
 */
export const BUILTIN_SETTING_DEFAULTS: Readonly<
  Record<string, { readonly value: Schema.Json; readonly description: string }>
> = {
  "session.timeoutMinutes": { value: 720, description: "Idle minutes before a session must sign in again" },
  "audit.retentionDays": { value: 365, description: "Days audit entries are kept" },
  "deploy.requireApproval": { value: false, description: "Whether a deploy waits for an approval" },
  "ui.theme": { value: "system", description: "Default UI theme" }
}

const scopeKindOf = (target: { readonly projectId: unknown; readonly environmentId: unknown }): ConfigScopeKind =>
  target.environmentId !== null ? "environment" : target.projectId !== null ? "project" : "organization"

const configScopeOf = (target: ConfigTarget): ConfigScope => ({
  orgId: target.workspace.organization.id,
  projectId: target.projectId,
  environmentId: target.environmentId
})

/** Whether `value` is of the declared type; `json` takes any JSON value. */
export const matchesType = (value: Schema.Json, valueType: SettingValueType): boolean => {
  switch (valueType) {
    case "string":
      return typeof value === "string"
    case "number":
      return typeof value === "number" && Number.isFinite(value)
    case "boolean":
      return typeof value === "boolean"
    case "json":
      return true
  }
}

const parseJson = (text: string): Schema.Json => JSON.parse(text) as Schema.Json

/** The write permission of the scope a stored row lives in, and the project it is decided on. */
const writePermissionOf = (row: { readonly projectId: string | null }): [Permission, string | undefined] =>
  row.projectId === null ? ["organization.config.write", undefined] : ["project.config.write", row.projectId]

const canWrite = (workspace: ResolvedWorkspace, row: { readonly projectId: string | null }): boolean => {
  const [permission, projectId] = writePermissionOf(row)
  return decide(workspace.grants, permission, projectId).allow
}

/** The wire value of a setting: masked ones hide their value from callers without the write permission. */
const shownValue = (row: SettingRow, reveal: boolean): { readonly value: Schema.Json; readonly masked?: true } =>
  row.visibility === "masked" && !reveal ? { value: null, masked: true } : { value: parseJson(row.valueJson) }

export const toSetting = (row: SettingRow, reveal: boolean): Setting => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  environmentId: row.environmentId,
  scopeKind: row.scopeKind,
  key: row.key,
  ...shownValue(row, reveal),
  description: row.description,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

export const toFeatureFlag = (row: FeatureFlagRow): FeatureFlag => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  environmentId: row.environmentId,
  scopeKind: row.scopeKind,
  key: row.key,
  enabled: row.enabled,
  value: parseJson(row.valueJson),
  description: row.description,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

const resolvedFrom = (row: SettingRow, from: ResolvedScopeKind, reveal: boolean): ResolvedSetting => ({
  ...toSetting(row, reveal),
  scopeKind: from,
  overridable: row.overridable,
  inheritedFrom: { scopeKind: from }
})

const trusted = { disableChecks: true } as const

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

/** The names of the fields a change touched (never their values), for events and audit. */
const changedFields = (patch: object): Array<string> => Object.keys(patch).sort()

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

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      /** 404 unless the project (and environment) of the path exist in the workspace. */
      const checkScope = Effect.fnUntraced(function*(target: ConfigTarget) {
        const orgId = target.workspace.organization.id
        if (target.projectId === null) return
        if (target.environmentId !== null) {
          yield* findEnvironment(environments, orgId, target.projectId, target.environmentId)
          return
        }
        yield* findProject(projects, orgId, target.projectId)
      })

      const keysetPage = Effect.fnUntraced(function*<Row extends { readonly createdAt: Date; readonly id: string }>(
        endpoint: string,
        target: ConfigTarget,
        page: PageRequest,
        fetch: (
          window: { readonly limit: number; readonly after?: ConfigPagePosition }
        ) => Effect.Effect<ReadonlyArray<Row>>
      ) {
        const binding = {
          endpoint,
          scope: `${target.workspace.organization.id}/${target.projectId ?? ""}/${target.environmentId ?? ""}`
        }
        return yield* timeIdPage(cursors, binding, page, fetch)
      })

      /** A page of the rows of exactly the target's scope, once the scope is known to exist. */
      const scopedPage = <Row extends { readonly createdAt: Date; readonly id: string }>(
        endpoint: string,
        target: ConfigTarget,
        page: PageRequest,
        fetch: (scope: ConfigScope, window: ConfigPageWindow) => Effect.Effect<ReadonlyArray<Row>>
      ) =>
        Effect.andThen(
          checkScope(target),
          keysetPage(endpoint, target, page, (window) => fetch(configScopeOf(target), window))
        )

      /** `overridable` is accepted only on the workspace scope of an account root. */
      const overridableError = (target: ConfigTarget, overridable: boolean | undefined) =>
        overridable !== undefined && !(target.projectId === null && target.workspace.organization.isAccountRoot)
          ? ["is valid only on the workspace scope of an account root"]
          : undefined

      /** Records a change to a setting or a feature flag: its event and audit entry carry ids and keys, never values. */
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
          data: { action, [kind.idField]: row.id, key: row.key, scopeKind: row.scopeKind, changed },
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
        const stored = yield* store
        if (Option.isNone(stored)) return yield* notFound()
        yield* recordChange(kind, actor, stored.value, "updated", changedFields(patch))
        return stored.value
      })

      /** The account root's workspace-scope setting for `key`, seen from a child workspace; None on a root. */
      const accountSetting = Effect.fnUntraced(function*(workspace: ResolvedWorkspace, key: string) {
        if (workspace.organization.isAccountRoot) return Option.none<SettingRow>()
        const root = yield* organizations.findByPublicId(workspace.organization.accountId)
        if (Option.isNone(root) || root.value.id === workspace.organization.id) return Option.none<SettingRow>()
        const rows = yield* config.settingsWithKey(root.value.id as OrgId, key)
        return Option.fromUndefinedOr(rows.find((row) => row.projectId === null && row.environmentId === null))
      })

      return ConfigService.of({
        listSettings: Effect.fn("Config.listSettings")(function*(target, page) {
          const { items, cursor } = yield* scopedPage(
            "config.settings",
            target,
            page,
            (scope, window) => config.listSettings(scope, window)
          )
          return { data: { settings: items.map((row) => toSetting(row, canWrite(target.workspace, row))) }, cursor }
        }),

        createSetting: Effect.fn("Config.createSetting")(function*(actor, target, input) {
          yield* checkScope(target)
          const valueType = input.valueType ?? "json"
          const fields: Record<string, Array<string>> = {}
          if (!matchesType(input.value, valueType)) fields["value"] = [`must be a ${valueType} value`]
          const overridable = overridableError(target, input.overridable)
          if (overridable !== undefined) fields["overridable"] = overridable
          if (Object.keys(fields).length > 0) return yield* validationFailed(fields)
          const at = yield* now
          const row: SettingRow = {
            id: SettingId.make(newId("stg_", at.getTime()), trusted),
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
          const scope = configScopeOf(target)
          const overridable = overridableError(target, patch.overridable)
          if (overridable !== undefined) return yield* validationFailed({ overridable })
          const updated = yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* config.findSetting(scope, settingId)
            if (Option.isNone(current)) return yield* settingNotFound(settingId)
            const valueType = patch.valueType ?? current.value.valueType
            const value = patch.value !== undefined ? patch.value : parseJson(current.value.valueJson)
            if (!matchesType(value, valueType)) {
              return yield* validationFailed({ value: [`must be a ${valueType} value`] })
            }
            const next: SettingRow = {
              ...current.value,
              valueJson: JSON.stringify(value),
              valueType,
              visibility: patch.visibility ?? current.value.visibility,
              overridable: patch.overridable ?? current.value.overridable,
              description: patch.description !== undefined ? patch.description : current.value.description,
              updatedAt: yield* now
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
          const rows = yield* config.settingsWithKey(workspace.organization.id, key)
          const at = (projectId: string | null, environmentId: string | null) =>
            rows.find((row) => row.projectId === projectId && row.environmentId === environmentId)
          const own = at(null, null)
          const account = yield* accountSetting(workspace, key)
          const reveal = (row: SettingRow) => canWrite(workspace, row)

          // A locked guardrail on the account root wins over every lower scope.
          if (workspace.organization.isAccountRoot && own !== undefined && !own.overridable) {
            return { setting: resolvedFrom(own, "organization", reveal(own)) }
          }
          if (Option.isSome(account) && !account.value.overridable) {
            return { setting: resolvedFrom(account.value, "account", reveal(account.value)) }
          }
          const walk: Array<readonly [SettingRow | undefined, ResolvedScopeKind]> = [
            [target.environmentId === null ? undefined : at(target.projectId, target.environmentId), "environment"],
            [target.projectId === null ? undefined : at(target.projectId, null), "project"],
            [own, "organization"],
            [Option.getOrUndefined(account), "account"]
          ]
          for (const [row, from] of walk) {
            if (row !== undefined) return { setting: resolvedFrom(row, from, reveal(row)) }
          }
          const builtin = BUILTIN_SETTING_DEFAULTS[key]
          if (builtin === undefined) {
            return yield* wireError(NotFound, `No setting '${key}' resolves at this scope`, { key })
          }
          const epoch = new Date(0)
          return {
            setting: {
              id: null,
              orgId: workspace.organization.id,
              projectId: null,
              environmentId: null,
              scopeKind: "default",
              key,
              value: builtin.value,
              description: builtin.description,
              overridable: true,
              inheritedFrom: { scopeKind: "default" },
              createdAt: epoch,
              updatedAt: epoch
            }
          }
        }),

        listFeatureFlags: Effect.fn("Config.listFeatureFlags")(function*(target, page) {
          const { items, cursor } = yield* scopedPage(
            "config.featureFlags",
            target,
            page,
            (scope, window) => config.listFlags(scope, window)
          )
          return { data: { featureFlags: items.map(toFeatureFlag) }, cursor }
        }),

        createFeatureFlag: Effect.fn("Config.createFeatureFlag")(function*(actor, target, input) {
          yield* checkScope(target)
          const at = yield* now
          const row: FeatureFlagRow = {
            id: FeatureFlagId.make(newId("flg_", at.getTime()), trusted),
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
          const scope = configScopeOf(target)
          const updated = yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* config.findFlag(scope, flagId)
            if (Option.isNone(current)) return yield* flagNotFound(flagId)
            const next: FeatureFlagRow = {
              ...current.value,
              enabled: patch.enabled ?? current.value.enabled,
              valueJson: patch.value !== undefined ? JSON.stringify(patch.value) : current.value.valueJson,
              description: patch.description !== undefined ? patch.description : current.value.description,
              updatedAt: yield* now
            }
            return yield* storeUpdate(FLAG_CHANGE, actor, patch, config.updateFlag(next), () => flagNotFound(flagId))
          }))
          return { featureFlag: toFeatureFlag(updated) }
        })
      })
    })
  )
}
