/**
 * Write-only input (secret values, provider keys): read from stdin (a pipe or a file) or, on a terminal, from a hidden
 * prompt — never from the command line, where it would land in shell history and process listings.
 */
import { Effect, Redacted } from "effect"
import { Prompt, TerminalCapabilities } from "effect/cli"
import { CliFailure } from "./errors.ts"

/** Everything on stdin, less one trailing newline (what `echo` and most editors add). */
export const readStdin = Effect.promise(async () => {
  const chunks: Array<Buffer> = []
  for await (const chunk of process.stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "")
})

/** The hidden value: a prompt saying `message` on a terminal, else stdin; empty is a failure naming `what`. */
export const readHidden = (message: string, what: string) =>
  Effect.gen(function*() {
    const { canPrompt } = yield* TerminalCapabilities.TerminalCapabilities
    const value = canPrompt && process.stdin.isTTY === true
      ? Redacted.value(yield* Prompt.Hidden({ message }))
      : yield* readStdin
    if (value === "") {
      return yield* new CliFailure({
        code: "input_required",
        message: `${what} is empty: pipe it on stdin or type it at the prompt`
      })
    }
    return value
  })
