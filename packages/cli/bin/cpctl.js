#!/usr/bin/env node
// The installed `cpctl` command: plain JavaScript that any Node (20 included) runs, which starts the CLI's
// TypeScript entry on the Node version the repository pins (the `node` devDependency, 24.x, which runs .ts
// directly), wherever it is called from and through any symlink. Exit code and signals pass through.
import { spawn } from "node:child_process"
import { realpathSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import process from "node:process"
import { fileURLToPath } from "node:url"

const here = dirname(realpathSync(fileURLToPath(import.meta.url)))
const entry = join(here, "..", "src", "bin.ts")
const pinnedNode = () => {
  try {
    return join(dirname(createRequire(join(here, "..", "package.json")).resolve("node/package.json")), "bin", "node")
  } catch {
    return undefined
  }
}
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
const runsTypeScript = major > 22 || (major === 22 && minor >= 18)
const node = runsTypeScript ? process.execPath : pinnedNode()
if (node === undefined) {
  process.stderr.write(
    "error install: cpctl needs Node 22.18 or newer, or the repository's pinned Node (run `npm ci` in the clone)\n"
  )
  process.exit(1)
}
const child = spawn(node, [entry, ...process.argv.slice(2)], { stdio: "inherit" })
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal))
child.on("exit", (code, signal) => {
  if (signal !== null) process.kill(process.pid, signal)
  else process.exit(code ?? 1)
})
