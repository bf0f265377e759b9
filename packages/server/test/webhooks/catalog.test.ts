/** The event catalog and its page for consumers (`docs/webhooks-events.md`) list the same types and fields. */
import { eventCatalog, lifecycleEventTypes } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"

const page = readFileSync(new URL("../../../../docs/webhooks-events.md", import.meta.url), "utf8")

describe("docs/webhooks-events.md", () => {
  it("has one row per catalog type, naming its resource, its fields and whether it is delivered", () => {
    const rows = page.split("\n").filter((line) => line.startsWith("| `"))
    assert.strictEqual(rows.length, Object.keys(eventCatalog).length)
    for (const [type, entry] of Object.entries(eventCatalog)) {
      const fields = entry.fields.map((field) => `\`${field}\``).join(", ")
      const delivered = lifecycleEventTypes.has(type) ? "never (log only)" : "yes"
      assert.include(rows, `| \`${type}\` | \`${entry.resource}\` | ${fields} | ${delivered} |`, type)
    }
  })
})
