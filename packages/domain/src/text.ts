/**
 * The one rule for every string a request carries, and for free-form JSON values. PostgreSQL `text` and `jsonb`
 * cannot hold U+0000, and a lone UTF-16 surrogate has no UTF-8 form: both are refused at the schema (422 on the
 * field) instead of failing in the database (500). Single-line fields (names, labels, display names) also refuse
 * the other control characters, multi-line ones (descriptions) all but tab and line breaks; opaque values (secret
 * values, tokens, references) need only the first rule.
 */
import { Schema } from "effect"

/** An unpaired surrogate: with the `u` flag a pair reads as one code point above U+FFFF, never as `Cs`. */
const LONE_SURROGATE = /\p{Cs}/u

/** Whether `text` can be stored as-is: no U+0000 and no unpaired surrogate. */
export const isStorableText = (text: string): boolean => !text.includes("\u0000") && !LONE_SURROGATE.test(text)

/** Control characters (C0, DEL, C1) other than tab, line feed and carriage return. */
const CONTROL = /(?![\t\n\r])\p{Cc}/u
/** Control characters, line breaks included (a single-line field). */
const CONTROL_OR_BREAK = /[\p{Cc}\u2028\u2029]/u

export const TEXT_MESSAGE = "must not contain NUL characters or unpaired surrogates"

/** The shared filter: no U+0000, no unpaired surrogate. */
export const isText = Schema.makeFilter<string>((text) => isStorableText(text) || TEXT_MESSAGE)

/** Any text a request carries: no U+0000 and no unpaired surrogate. */
export const Text = Schema.String.check(isText)

/** Multi-line text (descriptions, values): tab and line breaks allowed, no other control character. */
export const MultilineText = Text.check(
  Schema.makeFilter<string>((text) =>
    !isStorableText(text) || !CONTROL.test(text) || "must not contain control characters other than tab or newline"
  )
)

/** Single-line text (names, labels, display names): no control character and no line break. */
export const LineText = Text.check(
  Schema.makeFilter<string>((text) =>
    !isStorableText(text) || !CONTROL_OR_BREAK.test(text) || "must not contain control characters or line breaks"
  )
)

/** How deep a free-form JSON value may nest (objects and arrays), the top level counting as 1. */
export const MAX_JSON_DEPTH = 32

/**
 * What is wrong with a JSON value, walked without recursion so no depth overflows the stack: nesting deeper than
 * `MAX_JSON_DEPTH`, or a string or object key that is not storable text. Undefined when nothing is.
 */
export const jsonValueProblem = (value: Schema.Json): string | undefined => {
  const stack: Array<{ readonly value: Schema.Json; readonly depth: number }> = [{ value, depth: 0 }]
  while (stack.length > 0) {
    const next = stack.pop()
    if (next === undefined) break
    const { depth, value: current } = next
    if (typeof current === "string") {
      if (!isStorableText(current)) return TEXT_MESSAGE
    } else if (current !== null && typeof current === "object") {
      if (depth + 1 > MAX_JSON_DEPTH) return `must not nest deeper than ${MAX_JSON_DEPTH} levels`
      if (Array.isArray(current)) {
        for (const item of current) stack.push({ value: item, depth: depth + 1 })
      } else {
        for (const [key, item] of Object.entries(current)) {
          if (!isStorableText(key)) return `keys ${TEXT_MESSAGE}`
          stack.push({ value: item, depth: depth + 1 })
        }
      }
    }
  }
  return undefined
}

/** A free-form JSON value a request carries (settings, flag values, metadata): bounded depth, storable strings. */
export const JsonValue = Schema.Json.check(
  Schema.makeFilter<Schema.Json>((value) => jsonValueProblem(value) ?? true)
)
