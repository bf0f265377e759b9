/** Pure rules of the object store: the references an object names, and the byte range a `Range` header asks for. */
import { Digest } from "@cp/domain"
import { Schema } from "effect"

const isDigest = Schema.is(Digest)

/**
 * The digests a JSON object names in a top-level `"references": ["sha256:…", …]` array (GC follows them), each once;
 * bytes that are not such a JSON object name none.
 */
export const referencesIn = (bytes: Uint8Array): ReadonlyArray<Digest> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return []
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !("references" in parsed)) return []
  const references = parsed.references
  return Array.isArray(references) ? Array.from(new Set(references.filter(isDigest))) : []
}

/** What a `Range` header means for an object of `size` bytes. */
export type RangeRequest =
  | { readonly _tag: "Whole" }
  | { readonly _tag: "Partial"; readonly start: number; readonly end: number }
  | { readonly _tag: "Unsatisfiable" }

/**
 * A single `bytes=` range (`a-b`, `a-`, `-n`) of an object of `size` bytes; `end` is exclusive. No header, another
 * unit, several ranges or a malformed one mean the whole object (RFC 9110 lets a server ignore them); a range starting
 * past the end is unsatisfiable.
 */
export const rangeOf = (header: string | undefined, size: number): RangeRequest => {
  if (header === undefined) return { _tag: "Whole" }
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header)
  if (match === null) return { _tag: "Whole" }
  const [, first = "", last = ""] = match
  if (first === "" && last === "") return { _tag: "Whole" }
  if (first === "") {
    const suffix = Number(last)
    if (suffix === 0 || size === 0) return { _tag: "Unsatisfiable" }
    return { _tag: "Partial", start: Math.max(0, size - suffix), end: size }
  }
  const start = Number(first)
  const end = last === "" ? size : Number(last) + 1
  if (last !== "" && end <= start) return { _tag: "Whole" }
  if (start >= size) return { _tag: "Unsatisfiable" }
  return { _tag: "Partial", start, end: Math.min(end, size) }
}
