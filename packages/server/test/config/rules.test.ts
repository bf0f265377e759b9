/** The configuration rules as plain functions: value types, where `overridable` may be set, and write access. */
import type { Grant } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { canWrite, matchesType, overridableProblem, scopeKindOf, valueProblem } from "../../src/config/rules.ts"

describe("matchesType", () => {
  it("a value matches its declared type; `json` takes any", () => {
    assert.isTrue(matchesType("a", "string"))
    assert.isFalse(matchesType(1, "string"))
    assert.isTrue(matchesType(1.5, "number"))
    assert.isFalse(matchesType("1", "number"))
    assert.isTrue(matchesType(false, "boolean"))
    assert.isFalse(matchesType(null, "boolean"))
    assert.isTrue(matchesType(null, "json"))
  })

  it("a mismatch reads as the 422 message on `value`", () => {
    assert.strictEqual(valueProblem("x", "number"), "must be a number value")
    assert.isUndefined(valueProblem(1, "number"))
  })
})

describe("overridableProblem", () => {
  it("`overridable` is valid only on the workspace scope of an account root", () => {
    assert.isUndefined(overridableProblem({ projectId: null, isAccountRoot: true }, false))
    assert.strictEqual(
      overridableProblem({ projectId: null, isAccountRoot: false }, false),
      "is valid only on the workspace scope of an account root"
    )
    assert.isDefined(overridableProblem({ projectId: "prj", isAccountRoot: true }, true))
  })

  it("leaving it out is always valid", () => {
    assert.isUndefined(overridableProblem({ projectId: "prj", isAccountRoot: false }, undefined))
  })
})

describe("scopeKindOf", () => {
  it("names the deepest scope a target names", () => {
    assert.strictEqual(scopeKindOf({ projectId: null, environmentId: null }), "organization")
    assert.strictEqual(scopeKindOf({ projectId: "prj", environmentId: null }), "project")
    assert.strictEqual(scopeKindOf({ projectId: "prj", environmentId: "env" }), "environment")
  })
})

describe("canWrite", () => {
  const builder: ReadonlyArray<Grant> = [{ kind: "direct", role: "builder", scopeKind: "organization", scopeRef: null }]
  const viewer: ReadonlyArray<Grant> = [{ kind: "direct", role: "viewer", scopeKind: "organization", scopeRef: null }]

  it("writing where a row lives needs the config write permission of its scope", () => {
    assert.isTrue(canWrite(builder, { projectId: null }))
    assert.isTrue(canWrite(builder, { projectId: "prj_1" }))
    assert.isFalse(canWrite(viewer, { projectId: null }))
    assert.isFalse(canWrite(viewer, { projectId: "prj_1" }))
  })
})
