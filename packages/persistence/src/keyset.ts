/**
 * Keyset pagination and slug-family lookups shared by the repositories: the request fields, the SQL fragments and
 * their memory twins, so both backends order, cut and match rows the same way.
 */
import { Effect, Order, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { Row } from "effect/sql/SqlConnection"

/** A keyset position in a newest-first list: the last row's time and its tie-breaking key. */
export const PagePosition = Schema.Struct({ at: Schema.Date, key: Schema.String })
export type PagePosition = typeof PagePosition.Type

/**
 * The fields of a page request, to spread into a repository's request schema beside what scopes the list: at most
 * `limit` rows strictly after `after` (exclusive), newest first. Ask for one more than the page size to learn whether
 * another page follows.
 */
export const pageFields = {
  limit: Schema.Int,
  after: Schema.optional(PagePosition)
}

/** One page of a newest-first list: rows strictly after `after`, at most `limit` of them. */
export type PageWindow = Schema.Struct.Type<typeof pageFields>

/** `order by created_at, <key>`: oldest first, the key (an id) breaking ties byte-wise, like the "C" collation. */
export const oldestFirst: Order.Order<PagePosition> = Order.Struct({ at: Order.Date, key: Order.String })

/** `order by created_at desc, <key> desc`. */
export const newestFirst: Order.Order<PagePosition> = Order.flip(oldestFirst)

/** The keyset position of a row keyed by its `id`. */
export const idPosition = (row: { readonly createdAt: Date; readonly id: string }): PagePosition => ({
  at: row.createdAt,
  key: row.id
})

/** `order by created_at, id`: creation order, for rows keyed by their `id`. */
export const createdOldestFirst: Order.Order<{ readonly createdAt: Date; readonly id: string }> = Order.mapInput(
  oldestFirst,
  idPosition
)

/** `order by created_at desc, id desc`: lists, newest first. */
export const createdNewestFirst = Order.flip(createdOldestFirst)

/**
 * A keyset page over rows held in full (the memory twin of a keyset query, also what pages a list read whole):
 * newest first, the rows strictly after `window.after`, at most `limit`.
 */
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

/**
 * The SQL condition of a keyset page, `(<at>, <key>) < (after)`, as a list to spread into `sql.and`; the columns
 * default to `created_at` and `id` (qualify them for a join).
 */
const keyAfter = (
  sql: SqlClient.SqlClient,
  after: PagePosition | undefined,
  columns: { readonly at?: string; readonly key?: string } = {}
): Array<Statement.Fragment> =>
  after === undefined
    ? []
    : [sql`(${sql(columns.at ?? "created_at")}, ${sql(columns.key ?? "id")}) < (${after.at}, ${after.key})`]

/**
 * A keyset page query: `<from> where <conditions> and (<at>, <key>) < after order by <at> desc, <key> desc limit n`,
 * ordered and cut on the same columns (`created_at` and `id` by default; qualify them for a join).
 */
export const keysetQuery = (
  sql: SqlClient.SqlClient,
  from: Statement.Fragment,
  conditions: ReadonlyArray<Statement.Fragment>,
  window: PageWindow,
  columns: { readonly at?: string; readonly key?: string } = {}
): Statement.Statement<Row> =>
  sql`${from} where ${sql.and([...conditions, ...keyAfter(sql, window.after, columns)])}
    order by ${sql(columns.at ?? "created_at")} desc, ${sql(columns.key ?? "id")} desc
    limit ${window.limit}`

/** `base` itself or `base-<digits>`: the slugs that decide the next free suffix. */
export const isSlugOfFamily = (base: string) => (slug: string): boolean =>
  slug === base || (slug.startsWith(`${base}-`) && /^[0-9]+$/.test(slug.slice(base.length + 1)))

/**
 * The SQL twin of `isSlugOfFamily`. Slugs are byte-ordered, so every `base-…` lies in [`base-`, `base.`): an index
 * range even in a generic plan.
 */
const slugOfFamily = (sql: SqlClient.SqlClient, base: string): Statement.Fragment =>
  sql`(slug = ${base} or (slug > ${`${base}-`} and slug < ${`${base}.`} and substr(slug, ${
    base.length + 2
  }) ~ '^[0-9]+$'))`

/** `select slug from <table> where <scope> and <slug of the family>`: the taken slugs of a family in one scope. */
export const slugFamilyQuery = (
  sql: SqlClient.SqlClient,
  table: string,
  scope: ReadonlyArray<Statement.Fragment>,
  base: string
): Statement.Statement<Row> => sql`select slug from ${sql(table)} where ${sql.and([...scope, slugOfFamily(sql, base)])}`

/** The row of a `select slug …` query. */
export const SlugRow = Schema.Struct({ slug: Schema.String })

/** The slugs of `select slug …` rows, as `slugsStartingWith` answers them. */
export const slugsOf = <E, R>(
  rows: Effect.Effect<ReadonlyArray<typeof SlugRow.Type>, E, R>
): Effect.Effect<ReadonlyArray<string>, E, R> => Effect.map(rows, (found) => found.map((row) => row.slug))
