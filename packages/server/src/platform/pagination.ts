/**
 * Cursor pagination (contract §4): opaque, HMAC-signed cursors bound to the endpoint, the workspace and
 * the filters, carrying a keyset position so a walk returns every row exactly once.
 */
import { type ValidationFailed, validationFailed } from "@cp/domain"
import type { PagePosition, PageWindow } from "@cp/persistence"
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

/** A keyset position as a cursor carries it: the last row's time (ISO) and its tie-breaking key. */
const TimeIdPosition = Schema.Struct({ at: Schema.String, id: Schema.String })
type TimeIdPosition = typeof TimeIdPosition.Type

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

/** The page a list request asks for: its size (default 50) and the cursor of the page before. */
export interface PageRequest {
  readonly limit?: number
  readonly cursor?: string
}

/**
 * One page of a newest-first keyset list, the way every list pages: decodes the request's cursor (bound to `binding`),
 * fetches `limit + 1` rows strictly after its position, and encodes the next page's cursor from the last row shown
 * (`positionOf`; `idPosition` for rows keyed by `(createdAt, id)`), or null on the last page.
 */
export const keysetPage = Effect.fnUntraced(function*<Row, E, R>(
  cursors: Cursors["Service"],
  binding: CursorBinding,
  page: PageRequest,
  fetch: (window: PageWindow) => Effect.Effect<ReadonlyArray<Row>, E, R>,
  positionOf: (row: Row) => PagePosition
) {
  const after = yield* cursors.decode(binding, page.cursor, TimeIdPosition)
  const limit = page.limit ?? DEFAULT_PAGE_SIZE
  const rows = yield* fetch({
    limit: limit + 1,
    ...(after === undefined ? {} : { after: { at: new Date(after.at), key: after.id } })
  })
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  if (rows.length <= limit || last === undefined) return { items, cursor: null }
  const next = positionOf(last)
  const position: TimeIdPosition = { at: next.at.toISOString(), id: next.key }
  return { items, cursor: cursors.encode(binding, position) }
})
