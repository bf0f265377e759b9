/**
 * The API reference as a tool reads it: `redocly lint` with the recommended rules passes on the generated document,
 * and the points the docs page and generated clients depend on are in it.
 */
import { ControlPlaneApi } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"

const spec = OpenApi.fromApi(ControlPlaneApi)
const METHODS = ["get", "post", "put", "patch", "delete"] as const
const operations = Object.entries(spec.paths).flatMap(([path, item]) =>
  METHODS.flatMap((method) => {
    const operation = item[method]
    return operation === undefined ? [] : [{ path, method, operation }]
  })
)

describe("API reference", () => {
  it("passes redocly lint with the recommended rules", () => {
    const dir = mkdtempSync(join(tmpdir(), "cp-openapi-"))
    try {
      const file = join(dir, "openapi.json")
      writeFileSync(file, JSON.stringify(spec))
      const cli = createRequire(import.meta.url).resolve("@redocly/cli/bin/cli.js")
      const run = spawnSync(process.execPath, [cli, "lint", "--extends=recommended", "--format=stylish", file], {
        encoding: "utf8",
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" }
      })
      assert.strictEqual(run.status, 0, `${run.stdout}\n${run.stderr}`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("declares bearer authentication in lowercase, so tools offer a token field", () => {
    const schemes = spec.components.securitySchemes
    assert.deepStrictEqual(
      { type: schemes["bearer"]?.type, scheme: "scheme" in schemes["bearer"]! ? schemes["bearer"].scheme : undefined },
      { type: "http", scheme: "bearer" }
    )
  })

  it("gives every operation a summary and every parameter a description", () => {
    assert.isAbove(operations.length, 0)
    for (const { method, operation, path } of operations) {
      assert.isString(operation.summary, `${method} ${path}`)
      assert.isAbove(operation.summary?.length ?? 0, 3)
      for (const parameter of operation.parameters) {
        assert.isString(parameter.description, `${method} ${path} ${parameter.in} ${parameter.name}`)
      }
    }
  })

  it("types limit as an integer from 1 to 100 and describes it", () => {
    const limits = operations.flatMap(({ operation }) => operation.parameters.filter((p) => p.name === "limit"))
    assert.isAbove(limits.length, 5)
    for (const limit of limits) {
      assert.deepStrictEqual(limit.schema, { type: "integer", minimum: 1, maximum: 100, default: 50 })
      assert.isString(limit.description)
    }
  })

  it("offers Idempotency-Key on every write and on no read", () => {
    for (const { method, operation, path } of operations) {
      const offered = operation.parameters.some((p) => p.in === "header" && p.name === "Idempotency-Key")
      assert.strictEqual(offered, method !== "get", `${method} ${path}`)
    }
  })

  it("carries id patterns, date-time formats, a server and the introduction", () => {
    const project = spec.paths["/v1/organizations/{orgId}/projects/{projectId}"]?.get
    const projectId = project?.parameters.find((p) => p.name === "projectId")
    assert.deepStrictEqual(projectId?.schema, { type: "string", pattern: "^prj_[0-9A-HJKMNP-TV-Z]{26}$" })
    assert.include(JSON.stringify(spec), `"format":"date-time"`)
    assert.deepStrictEqual(spec.servers?.map((server) => server.url), ["/"])
    for (const heading of ["Authentication", "The envelope", "Errors", "Pagination", "Idempotency", "Rate limits"]) {
      assert.include(spec.info.description, `## ${heading}`)
    }
  })
})
