/**
 * The resolution walk as a plain function: environment → project → workspace → account root → built-in default, and
 * the locked account-scope guardrail that wins over every lower scope.
 */
import type { EnvironmentId, ProjectId } from "@cp/domain"
import type { SettingRow } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import {
  BUILTIN_SETTING_DEFAULTS,
  builtinSetting,
  type ResolutionScope,
  resolvedFrom,
  resolveStored
} from "../../src/config/resolution.ts"
import { mint } from "../../src/platform/ids.ts"

const orgId = mint.org(0)
const projectId = mint.project(0)
const environmentId = mint.environment(0)

const setting = (
  at: { readonly projectId: ProjectId | null; readonly environmentId: EnvironmentId | null },
  value: string,
  overrides: Partial<SettingRow> = {}
): SettingRow => ({
  id: mint.setting(0),
  orgId,
  ...at,
  scopeKind: at.environmentId !== null ? "environment" : at.projectId !== null ? "project" : "organization",
  key: "walk",
  valueJson: JSON.stringify(value),
  valueType: "json",
  visibility: "internal",
  overridable: true,
  description: null,
  createdAt: new Date(1),
  updatedAt: new Date(1),
  ...overrides
})

const onWorkspace = { projectId: null, environmentId: null }
const onProject = { projectId, environmentId: null }
const onEnvironment = { projectId, environmentId }

/** An environment of a child workspace: the deepest scope a walk starts from. */
const childEnvironment: ResolutionScope = { isAccountRoot: false, ...onEnvironment }

const valueOf = (resolved: ReturnType<typeof resolveStored>) =>
  resolved === undefined ? undefined : [resolved.from, JSON.parse(resolved.row.valueJson)]

describe("resolveStored", () => {
  it("the environment's own row answers first", () => {
    const rows = [setting(onWorkspace, "ws"), setting(onProject, "prj"), setting(onEnvironment, "env")]
    assert.deepStrictEqual(valueOf(resolveStored(childEnvironment, rows, setting(onWorkspace, "acct"))), [
      "environment",
      "env"
    ])
  })

  it("then the project's", () => {
    const rows = [setting(onWorkspace, "ws"), setting(onProject, "prj")]
    assert.deepStrictEqual(valueOf(resolveStored(childEnvironment, rows, undefined)), ["project", "prj"])
  })

  it("then the workspace's", () => {
    const rows = [setting(onWorkspace, "ws")]
    assert.deepStrictEqual(valueOf(resolveStored(childEnvironment, rows, setting(onWorkspace, "acct"))), [
      "organization",
      "ws"
    ])
  })

  it("then the account root's, seen from a child workspace", () => {
    assert.deepStrictEqual(valueOf(resolveStored(childEnvironment, [], setting(onWorkspace, "acct"))), [
      "account",
      "acct"
    ])
  })

  it("nothing stored resolves to nothing (the built-in default applies)", () => {
    assert.isUndefined(resolveStored(childEnvironment, [], undefined))
  })

  it("a walk from the project or workspace scope skips the scopes below it", () => {
    const rows = [setting(onWorkspace, "ws"), setting(onProject, "prj"), setting(onEnvironment, "env")]
    assert.deepStrictEqual(valueOf(resolveStored({ isAccountRoot: false, ...onProject }, rows, undefined)), [
      "project",
      "prj"
    ])
    assert.deepStrictEqual(valueOf(resolveStored({ isAccountRoot: false, ...onWorkspace }, rows, undefined)), [
      "organization",
      "ws"
    ])
  })

  it("a locked account-root row seen from a child wins over every lower scope", () => {
    const rows = [setting(onWorkspace, "ws"), setting(onProject, "prj"), setting(onEnvironment, "env")]
    const locked = setting(onWorkspace, "acct", { overridable: false })
    assert.deepStrictEqual(valueOf(resolveStored(childEnvironment, rows, locked)), ["account", "acct"])
  })

  it("on the account root itself, its locked workspace-scope row wins and answers as the organization", () => {
    const rows = [setting(onWorkspace, "root", { overridable: false }), setting(onEnvironment, "env")]
    assert.deepStrictEqual(valueOf(resolveStored({ isAccountRoot: true, ...onEnvironment }, rows, undefined)), [
      "organization",
      "root"
    ])
  })

  it("on the account root, an overridable workspace-scope row yields to lower scopes", () => {
    const rows = [setting(onWorkspace, "root"), setting(onEnvironment, "env")]
    assert.deepStrictEqual(valueOf(resolveStored({ isAccountRoot: true, ...onEnvironment }, rows, undefined)), [
      "environment",
      "env"
    ])
  })
})

describe("resolvedFrom", () => {
  it("shows the row as resolved from its scope, with its overridable flag", () => {
    const row = setting(onProject, "prj", { overridable: false })
    const resolved = resolvedFrom({ row, from: "account" }, true)
    assert.deepInclude(resolved, {
      id: row.id,
      scopeKind: "account",
      value: "prj",
      overridable: false,
      inheritedFrom: { scopeKind: "account" }
    })
  })

  it("hides a masked value unless revealed", () => {
    const row = setting(onProject, "s3cret", { visibility: "masked" })
    assert.deepInclude(resolvedFrom({ row, from: "project" }, false), { value: null, masked: true })
    assert.deepInclude(resolvedFrom({ row, from: "project" }, true), { value: "s3cret" })
  })
})

describe("builtinSetting", () => {
  it("a built-in key resolves to its default: no id, scope `default`, overridable, epoch timestamps", () => {
    const key = "audit.retentionDays"
    assert.deepStrictEqual(builtinSetting(orgId, key), {
      id: null,
      orgId,
      projectId: null,
      environmentId: null,
      scopeKind: "default",
      key,
      value: BUILTIN_SETTING_DEFAULTS[key]!.value,
      description: BUILTIN_SETTING_DEFAULTS[key]!.description,
      overridable: true,
      inheritedFrom: { scopeKind: "default" },
      createdAt: new Date(0),
      updatedAt: new Date(0)
    })
  })

  it("any other key has no default", () => {
    assert.isUndefined(builtinSetting(orgId, "walk"))
  })
})
