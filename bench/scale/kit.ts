/**
 * What every area module of `bench/scale` shares: the scale knobs, the context a loader gets, the route a timer
 * measures, and the SQL helpers that make set-based loads fast (ids, skewed picks, indexes dropped during a load).
 */
import type pg from "pg"

/** A positive integer from the environment, or `fallback`. */
export const scaleOf = (name: string, fallback: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number, got ${raw}`)
  return value
}

/** The large tenant the routes are timed in, and the bench user who owns it. */
export interface Tenant {
  /** The workspace's `org_…` id (created through the API, so its owner, bindings and events are the real ones). */
  readonly orgId: string
  /** The bench user's `usr_…` id: owner of the tenant, and the user who belongs to many workspaces. */
  readonly userId: string
}

/** What a loader gets: a connection to the scratch database and the tenant. */
export interface LoadContext {
  readonly db: pg.Client
  readonly tenant: Tenant
  /** Logs one progress line (to stderr, with the elapsed time). */
  readonly progress: (message: string) => void
}

/** One timed read: a label for the table and the path (with query) to GET. */
export interface Route {
  readonly area: string
  readonly label: string
  readonly path: string
  /**
   * Walk this many pages first (following `meta.cursor`) and time the page reached, so a deep page is measured
   * against the first; the route must return a cursor that far.
   */
  readonly depth?: number
  /**
   * The statement the route runs for this page, when the area can write it out: the bench also times it alone in the
   * database (`explain analyze`, execution time), apart from the HTTP stack and the machine's load.
   */
  readonly sql?: string
}

/**
 * One area of the generator. `load` fills its tables in the tenant and the small tenants (set-based SQL);
 * `routes` names the list and filter reads to time, given what `load` returned.
 */
export interface Area<A = unknown> {
  readonly name: string
  readonly load: (context: LoadContext) => Promise<A>
  readonly routes: (tenant: Tenant, loaded: A) => ReadonlyArray<Route>
}

/** An area typed by its loader's result, erased for the registry. */
export const area = <A>(definition: Area<A>): Area => definition as unknown as Area

/**
 * SQL for a deterministic id: `prefix` and 26 ULID-alphabet characters derived from `seed` (an SQL text expression),
 * so the rows decode as the branded ids they stand for.
 */
export const idSql = (prefix: string, seed: string): string => `'${prefix}' || upper(substr(md5(${seed}), 1, 26))`

/** SQL for a lowercase UUID derived from `seed` (an SQL text expression). */
export const uuidSql = (seed: string): string => `md5(${seed})::uuid`

/**
 * SQL for a skewed pick in `0 .. n-1`: `floor(n * random()^power)`, so low indexes are hot (power 1 is uniform;
 * power 3 puts about a fifth of the picks in the first 1 %).
 */
export const skewSql = (n: number, power: number): string =>
  `least(${n - 1}, floor(${n} * power(random(), ${power})))::int`

/**
 * Runs `load` with the secondary indexes of `tables` dropped and rebuilds them afterwards (constraints' indexes stay),
 * and foreign-key triggers off for the session: a bulk load into a scratch database, then one sort per index.
 */
export const bulkLoad = async <A>(
  db: pg.Client,
  tables: ReadonlyArray<string>,
  load: () => Promise<A>
): Promise<A> => {
  const { rows } = await db.query<{ name: string; definition: string }>(
    `select i.indexname as name, i.indexdef as definition from pg_indexes i
     where i.schemaname = 'public' and i.tablename = any($1)
       and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`,
    [tables]
  )
  for (const { name } of rows) await db.query(`drop index ${name}`)
  await db.query("set session_replication_role = replica")
  try {
    return await load()
  } finally {
    await db.query("set session_replication_role = default")
    for (const { definition } of rows) await db.query(definition)
    for (const table of tables) await db.query(`analyze ${table}`)
  }
}

/** Inserts `total` rows with `statement(from, to)` in chunks of `chunk` (1-based, inclusive), logging progress. */
export const inChunks = async (
  context: LoadContext,
  what: string,
  total: number,
  chunk: number,
  statement: (from: number, to: number) => string
): Promise<void> => {
  for (let from = 1; from <= total; from += chunk) {
    const to = Math.min(total, from + chunk - 1)
    await context.db.query(statement(from, to))
    if (total > chunk) context.progress(`${what}: ${to.toLocaleString("en")} / ${total.toLocaleString("en")}`)
  }
}

/**
 * The statement of a first page of a keyset list (the shape `keysetQuery` writes): `from` filtered by `where`, newest
 * first on `at` and `key`, one row more than the default page of 50.
 */
export const firstPageSql = (from: string, where: string, at = "created_at", key = "id"): string =>
  `${from} where ${where} order by ${at} desc, ${key} desc limit 51`

/** `withSubjectProfile`'s joins over `table` aliased `s`, as the member and team-member lists read them. */
export const withProfileSql = (table: string): string =>
  `select s.*, u.email as email, coalesce(u.display_name, p.display_name) as display_name from ${table} s
   left join users u on s.subject_type = 'user' and u.id = s.subject_id
   left join service_principals p on s.subject_type = 'service_principal' and p.id = s.subject_id`
