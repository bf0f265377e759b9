/**
 * `npm run docs:webhooks`: rewrites the catalog table of `docs/webhooks-events.md` from `eventCatalog`
 * (`packages/domain/src/webhooks.ts`), the one place event types and their `data` fields are declared.
 */
import { eventCatalog, lifecycleEventTypes } from "@cp/domain"
import { readFileSync, writeFileSync } from "node:fs"

const path = new URL("../docs/webhooks-events.md", import.meta.url)
const lines = readFileSync(path, "utf8").split("\n")
const rows = Object.entries(eventCatalog).map(([type, entry]) =>
  `| \`${type}\` | \`${entry.resource}\` | ${entry.fields.map((field) => `\`${field}\``).join(", ")} | ${
    lifecycleEventTypes.has(type) ? "never (log only)" : "yes"
  } |`
)
const first = lines.findIndex((line) => line.startsWith("| `"))
const kept = lines.filter((line) => !line.startsWith("| `"))
kept.splice(first, 0, ...rows)
writeFileSync(path, kept.join("\n"))
