/** Headless Chromium for the browser tests: Debian's `chromium` (or `CHROMIUM_PATH`), driven by playwright-core. */
import { Effect } from "effect"
import { type Browser, chromium } from "playwright-core"

/** Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it when missing). */
export const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"

/** A browser for the test's scope. The flags keep a sandboxed, offline machine quiet. */
export const launch = Effect.acquireRelease(
  Effect.tryPromise(() =>
    chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
  ),
  (browser: Browser) => Effect.promise(() => browser.close())
)
