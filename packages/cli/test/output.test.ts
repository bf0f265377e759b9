import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestConsole } from "effect/testing"
import { type Columns, errorLine, JsonOutput, printResult, renderJson, renderTable } from "../src/output.ts"

interface Row {
  readonly id: string
  readonly name: string | null
  readonly active: boolean
  readonly createdAt: Date
}

const columns: Columns<Row> = {
  id: (row) => row.id,
  name: (row) => row.name,
  active: (row) => row.active,
  created: (row) => row.createdAt
}

const rows: ReadonlyArray<Row> = [
  { id: "org_1", name: "Acme Corporation", active: true, createdAt: new Date("2025-01-02T03:04:05.000Z") },
  { id: "org_22", name: null, active: false, createdAt: new Date("2025-06-07T08:09:10.000Z") }
]

describe("renderTable", () => {
  it("aligns columns under upper-case headers, two spaces apart, without trailing spaces", () => {
    assert.strictEqual(
      renderTable(columns, rows),
      [
        "ID      NAME              ACTIVE  CREATED",
        "org_1   Acme Corporation  true    2025-01-02T03:04:05.000Z",
        "org_22  -                 false   2025-06-07T08:09:10.000Z"
      ].join("\n")
    )
  })

  it("prints only the headers for no rows", () => {
    assert.strictEqual(renderTable(columns, []), "ID  NAME  ACTIVE  CREATED")
  })
})

describe("printResult", () => {
  const result = { data: rows, cursor: null }
  const print = printResult(result, ({ data }) => renderTable(columns, data))

  it.effect("prints the human view by default", () =>
    Effect.gen(function*() {
      yield* Effect.provideService(print, JsonOutput, false)
      assert.deepStrictEqual(yield* TestConsole.logLines, [renderTable(columns, rows)])
    }))

  it.effect("prints the decoded value as JSON under --json, dates as ISO 8601", () =>
    Effect.gen(function*() {
      yield* Effect.provideService(print, JsonOutput, true)
      const [printed] = yield* TestConsole.logLines
      assert.strictEqual(printed, renderJson(result))
      assert.deepStrictEqual(JSON.parse(renderJson(result)), {
        data: [
          { id: "org_1", name: "Acme Corporation", active: true, createdAt: "2025-01-02T03:04:05.000Z" },
          { id: "org_22", name: null, active: false, createdAt: "2025-06-07T08:09:10.000Z" }
        ],
        cursor: null
      })
    }))
})

describe("errorLine", () => {
  it("is `error <code>: <message>`", () => {
    assert.strictEqual(errorLine("not_found", "Workspace not found"), "error not_found: Workspace not found")
  })
})
