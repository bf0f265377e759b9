/** cpctl's version: what `--version` prints and the `User-Agent` sends (a test keeps it equal to package.json's). */
export const VERSION = "0.1.0"

/** The `User-Agent` of every request cpctl sends. */
export const USER_AGENT = `cpctl/${VERSION}`
