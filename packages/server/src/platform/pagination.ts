/**
 * Cursor pagination (contract §4): opaque, HMAC-signed cursors bound to the endpoint, the workspace and
 * the filters, carrying a keyset position so a walk returns every row exactly once.
 */
import { type ValidationFailed, validationFailed } from "@cp/domain"
import { Context, Effect, Layer, Schema } from "effect"
import { signToken, verifyToken } from "./crypto.ts"
import { canonicalJson } from "./idempotency.ts"
import { ServerKeys } from "./keys.ts"

export const DEFAULT_PAGE_SIZE = 50

/** What a cursor is valid for: one endpoint, one scope (workspace or user), one set of filters. */
export interface CursorBinding {
  readonly endpoint: string
  readonly scope: string
  readonly filters?: Readonly<Record<string, unknown>>
}

/** The keyset position most lists use: newest first by (createdAt, id). */
export const TimeIdPosition = Schema.Struct({ at: Schema.String, id: Schema.String })
export type TimeIdPosition = typeof TimeIdPosition.Type

const CursorPayload = Schema.Struct({ b: Schema.String, p: Schema.Unknown })
const isCursorPayload = Schema.is(CursorPayload)

const bindingKey = (binding: CursorBinding) => canonicalJson([binding.endpoint, binding.scope, binding.filters ?? {}])

const invalidCursor = () => validationFailed({ cursor: ["is not a valid cursor for this list and these filters"] })

export class Cursors extends Context.Service<Cursors, {
  readonly encode: (binding: CursorBinding, position: unknown) => string
  readonly decode: <P>(
    binding: CursorBinding,
    cursor: string | undefined,
    position: Schema.Codec<P, unknown>
  ) => Effect.Effect<P | undefined, ValidationFailed>
}>()("@cp/server/Cursors") {
  static readonly layer = Layer.effect(
    Cursors,
    Effect.map(ServerKeys, ({ signingKey }) =>
      Cursors.of({
        encode: (binding, position) => signToken(signingKey, "cursor", { b: bindingKey(binding), p: position }),
        decode: (binding, cursor, position) => {
          if (cursor === undefined) return Effect.succeed(undefined)
          const payload = verifyToken(signingKey, "cursor", cursor)
          if (!isCursorPayload(payload) || payload.b !== bindingKey(binding)) return Effect.fail(invalidCursor())
          return Schema.decodeUnknownEffect(position)(payload.p).pipe(Effect.mapError(invalidCursor))
        }
      }))
  )
}

/** Splits `limit + 1` fetched rows into the page and the position of the next page, if any. */
export const pageOf = <A, P>(
  rows: ReadonlyArray<A>,
  limit: number,
  positionOf: (last: A) => P
): { readonly items: ReadonlyArray<A>; readonly next: P | undefined } => {
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  return { items, next: rows.length > limit && last !== undefined ? positionOf(last) : undefined }
}

/**
 * Keyset paging over rows already ordered newest first by (time, id): the rows strictly after `after`,
 * `limit + 1` of them so `pageOf` can tell whether another page exists.
 */
export const rowsAfter = <A>(
  rows: ReadonlyArray<A>,
  after: TimeIdPosition | undefined,
  limit: number,
  keyOf: (row: A) => { readonly at: Date; readonly id: string }
): ReadonlyArray<A> => {
  const start = after === undefined ? rows : rows.filter((row) => {
    const { at, id } = keyOf(row)
    const iso = at.toISOString()
    return iso < after.at || (iso === after.at && id < after.id)
  })
  return start.slice(0, limit + 1)
}

/** The cursor for the page after `last` in a (time, id) ordered list. */
export const timeIdPosition = (at: Date, id: string): TimeIdPosition => ({ at: at.toISOString(), id })

/** One newest-first (createdAt, id) page: decodes the cursor, fetches `limit + 1` rows after it, encodes the next. */
export const timeIdPage = Effect.fnUntraced(function*<Row extends { readonly createdAt: Date; readonly id: string }>(
  cursors: Cursors["Service"],
  binding: CursorBinding,
  page: { readonly limit?: number; readonly cursor?: string },
  fetch: (window: {
    readonly limit: number
    readonly after?: { readonly at: Date; readonly key: string }
  }) => Effect.Effect<ReadonlyArray<Row>>
) {
  const after = yield* cursors.decode(binding, page.cursor, TimeIdPosition)
  const limit = page.limit ?? DEFAULT_PAGE_SIZE
  const rows = yield* fetch(
    after === undefined ? { limit: limit + 1 } : { limit: limit + 1, after: { at: new Date(after.at), key: after.id } }
  )
  const { items, next } = pageOf(rows, limit, (row) => timeIdPosition(row.createdAt, row.id))
  return { items, cursor: next === undefined ? null : cursors.encode(binding, next) }
})
