/**
 * The resolution of a setting key as a plain function over the rows that hold it: environment → project → workspace
 * → account root → built-in default. A locked account-scope guardrail (`overridable: false` on a setting of the
 * account root's workspace scope) wins over every lower scope.
 */
import type { OrgId, ResolvedScopeKind, ResolvedSetting } from "@cp/domain"
import type { SettingRow } from "@cp/persistence"
import type { Schema } from "effect"
import { toSetting } from "./rules.ts"

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

/** Where a resolution starts: a workspace (account root or child), maybe one of its projects and environments. */
export interface ResolutionScope {
  readonly isAccountRoot: boolean
  readonly projectId: string | null
  readonly environmentId: string | null
}

/** The stored row a key resolves to, and the scope kind it answers as. */
export interface StoredResolution {
  readonly row: SettingRow
  readonly from: ResolvedScopeKind
}

/**
 * The row that answers for a key at `scope`, or undefined when none does (the built-in default, if any, applies).
 * `rows` are the workspace's own rows with the key, at any of its scopes; `account` is the account root's
 * workspace-scope row with the key, as seen from a child workspace (undefined on a root).
 */
export const resolveStored = (
  scope: ResolutionScope,
  rows: ReadonlyArray<SettingRow>,
  account: SettingRow | undefined
): StoredResolution | undefined => {
  const at = (projectId: string | null, environmentId: string | null) =>
    rows.find((row) => row.projectId === projectId && row.environmentId === environmentId)
  const own = at(null, null)
  // A locked guardrail on the account root wins over every lower scope.
  if (scope.isAccountRoot && own !== undefined && !own.overridable) return { row: own, from: "organization" }
  if (account !== undefined && !account.overridable) return { row: account, from: "account" }
  const walk: ReadonlyArray<readonly [SettingRow | undefined, ResolvedScopeKind]> = [
    [scope.environmentId === null ? undefined : at(scope.projectId, scope.environmentId), "environment"],
    [scope.projectId === null ? undefined : at(scope.projectId, null), "project"],
    [own, "organization"],
    [account, "account"]
  ]
  for (const [row, from] of walk) {
    if (row !== undefined) return { row, from }
  }
  return undefined
}

/** A stored row as a resolved setting answering from `from`; `reveal` shows a masked value. */
export const resolvedFrom = ({ row, from }: StoredResolution, reveal: boolean): ResolvedSetting => ({
  ...toSetting(row, reveal),
  scopeKind: from,
  overridable: row.overridable,
  inheritedFrom: { scopeKind: from }
})

/** The built-in default of `key` as the workspace's resolved setting, or undefined when there is none. */
export const builtinSetting = (orgId: OrgId, key: string): ResolvedSetting | undefined => {
  const builtin = BUILTIN_SETTING_DEFAULTS[key]
  if (builtin === undefined) return undefined
  const epoch = new Date(0)
  return {
    id: null,
    orgId,
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
