/**
 * Keyset pagination and slug-family lookups shared by the repositories: the SQL fragments and their memory twins,
 * so both backends order, cut and match rows the same way.
 */
import { Order } from "effect"
import type { SqlClient, Statement } from "effect/sql"

/** A keyset position in a newest-first list: the last row's time and its tie-breaking key. */
export interface PagePosition {
  readonly at: Date
  readonly key: string
}

/** One page of a newest-first list: rows strictly after `after`, at most `limit` of them. */
export interface PageWindow {
  readonly after?: PagePosition | undefined
  readonly limit: number
}

/** `order by created_at, <key>`: oldest first, the key (an id) breaking ties byte-wise, like the "C" collation. */
export const oldestFirst: Order.Order<PagePosition> = Order.Struct({ at: Order.Date, key: Order.String })

/** `order by created_at desc, <key> desc`. */
export const newestFirst: Order.Order<PagePosition> = Order.flip(oldestFirst)

/** The keyset position of a row keyed by its `id`. */
export const idPosition = (row: { readonly createdAt: Date; readonly id: string }): PagePosition => ({
  at: row.createdAt,
  key: row.id
})

/** The memory twin of a keyset page: newest first, the rows strictly after `window.after`, at most `limit`. */
export const windowOf = <A>(
  rows: ReadonlyArray<A>,
  position: (row: A) => PagePosition,
  window: PageWindow
): Array<A> => {
  const { after, limit } = window
  return rows.filter((row) => after === undefined || newestFirst(position(row), after) > 0)
    .sort((a, b) => newestFirst(position(a), position(b)))
    .slice(0, limit)
}

/** The SQL condition of a keyset page, `(created_at, <key>) < (after)`, as a list to spread into `sql.and`. */
export const keyAfter = (
  sql: SqlClient.SqlClient,
  after: PagePosition | undefined,
  column = "id"
): Array<Statement.Fragment> =>
  after === undefined ? [] : [sql`(created_at, ${sql(column)}) < (${after.at}, ${after.key})`]

/** `base` itself or `base-<digits>`: the slugs that decide the next free suffix. */
export const isSlugOfFamily = (base: string) => (slug: string): boolean =>
  slug === base || (slug.startsWith(`${base}-`) && /^[0-9]+$/.test(slug.slice(base.length + 1)))

/**
 * The SQL twin of `isSlugOfFamily`. Slugs are byte-ordered, so every `base-…` lies in [`base-`, `base.`): an index
 * range even in a generic plan.
 */
export const slugOfFamily = (sql: SqlClient.SqlClient, base: string): Statement.Fragment =>
  sql`(slug = ${base} or (slug > ${`${base}-`} and slug < ${`${base}.`} and substr(slug, ${
    base.length + 2
  }) ~ '^[0-9]+$'))`
