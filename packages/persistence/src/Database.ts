/**
 * The database layers: `PgClient` (and `SqlClient`) over a real PostgreSQL server, or over an embedded PGlite served on
 * loopback by pglite-socket, with snake_case columns mapped to camelCase once, here.
 */
import { PgClient } from "@effect/sql-pg"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { Config, Duration, Effect, Layer, Option, Redacted, String as Str } from "effect"
import { SqlClient } from "effect/sql"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/** What every database layer provides. */
export type Database = PgClient.PgClient | SqlClient.SqlClient

/** The data directory PGlite keeps in memory only: nothing survives the scope. */
const IN_MEMORY_DATA_DIR = "memory://"

const EMBEDDED_HOST = "127.0.0.1"

/** How long closing the embedded database waits for its loopback connections to end. */
const SOCKET_STOP_GRACE = Duration.seconds(2)

/**
 * A name transform that computes each name once: the set of column and field names is fixed by the schema, and
 * handing back the same string every time keeps building rows on V8's fast property paths.
 */
const memoized = (transform: (name: string) => string): (name: string) => string => {
  const names = new Map<string, string>()
  return (name) => {
    let transformed = names.get(name)
    if (transformed === undefined) {
      transformed = transform(name)
      names.set(name, transformed)
    }
    return transformed
  }
}

/**
 * Column names stay snake_case in SQL and become camelCase in rows; JSON values (event data, stored headers) are
 * left exactly as written.
 */
const naming = {
  transformResultNames: memoized(Str.snakeToCamel),
  transformQueryNames: memoized(Str.camelToSnake),
  transformJson: false
} as const

/**
 * How long the database may take before a request gives up on it (issue 10): a connection must be open within
 * 3 s, and the server cancels a statement after 2 s (`statement_timeout`, sent at connect; migrations lift it for
 * their transaction). It is the only bound on a slow read: statements are pipelined on shared (multiplexed)
 * connections, which cannot be cancelled from the client, so the request deadline answers 503 but leaves the
 * statement running and the three queued behind it waiting; every read answers in well under 50 ms at ten million
 * rows (`bench/scale`, issue 19), so 2 s is a broken plan or a stalled database, never a slow page. A database that
 * stops answering altogether is bounded by the request deadline in the server. A session left idle inside a
 * transaction (a client that vanished mid-transaction) is ended after 30 s.
 */
export const DATABASE_TIMEOUTS = {
  connectMs: 3_000,
  statementMs: 2_000,
  idleInTransactionMs: 30_000
} as const

/**
 * A pooled client on a real PostgreSQL server (`postgres://user@host:port/db`). `statementMs` is for administration
 * (a test harness creating and dropping databases, which may take longer than any request should): 0 is no limit.
 */
export const layerPostgres = (
  url: Redacted.Redacted | string,
  statementMs: number = DATABASE_TIMEOUTS.statementMs
): Layer.Layer<Database, SqlError> =>
  PgClient.layer({
    url: Redacted.isRedacted(url) ? url : Redacted.make(url),
    multiplex: true,
    // A shared connection runs its statements one after another, and each autocommit write waits for its own WAL
    // flush: at the default 32 the writes of ten concurrent sign-ins queued on one session. Four per connection
    // spreads them over several sessions (whose commits then flush together) and still pipelines reads.
    multiplexConcurrency: 4,
    connectTimeout: Duration.millis(DATABASE_TIMEOUTS.connectMs),
    // Probes a peer that went silent, so a dead connection is noticed and replaced.
    keepAlive: Duration.seconds(10),
    startupParameters: {
      statement_timeout: String(statementMs),
      idle_in_transaction_session_timeout: String(DATABASE_TIMEOUTS.idleInTransactionMs)
    },
    ...naming
  })

const embeddedStartFailed = (cause: unknown) =>
  new SqlError({ reason: new ConnectionError({ cause, message: "Could not start the embedded PGlite database" }) })

/** Where an embedded database keeps its files, and optionally a `dumpDataDir` tarball to start from. */
export interface EmbeddedOptions {
  readonly dataDir: string
  /** Skips initdb (about a second): tests boot every fresh database from one cached snapshot. */
  readonly loadDataDir?: Blob
}

/**
 * A freshly initialised data directory that a new `DATA_DIR` is copied from, kept beside the installed packages
 * (`node_modules/.cache/control-plane`, so a fresh install makes a fresh one) and named for the PGlite build that
 * made it. initdb is most of a first start; a plain directory copy costs a small part of it.
 */
const templateDir = (): string => {
  const pglite = fileURLToPath(import.meta.resolve("@electric-sql/pglite"))
  const { mtimeMs, size } = statSync(pglite)
  const build = createHash("sha256").update(`${pglite}:${mtimeMs}:${size}`).digest("hex").slice(0, 16)
  const modules = pglite.slice(0, pglite.lastIndexOf("node_modules") + "node_modules".length)
  return join(modules, ".cache", "control-plane", `pglite-datadir-${build}`)
}

const isFreshDataDir = (dataDir: string): boolean =>
  dataDir !== IN_MEMORY_DATA_DIR && !existsSync(join(dataDir, "PG_VERSION"))

/**
 * Fills a fresh data directory from the template, making the template first when there is none (initdb in a
 * private directory, closed cleanly, then renamed into place: a concurrent start never sees half of one).
 */
const fromTemplate = (dataDir: string) =>
  Effect.tryPromise({
    try: async () => {
      const template = templateDir()
      if (!existsSync(join(template, "PG_VERSION"))) {
        const partial = `${template}.${process.pid}.partial`
        rmSync(partial, { recursive: true, force: true })
        mkdirSync(dirname(partial), { recursive: true })
        await (await PGlite.create({ dataDir: partial })).close()
        try {
          renameSync(partial, template)
        } catch {
          rmSync(partial, { recursive: true, force: true }) // another start made it first
        }
      }
      cpSync(template, dataDir, { recursive: true })
    },
    catch: embeddedStartFailed
  })

/** Starts PGlite and its loopback socket server for the current scope and returns the port it listens on. */
const serveEmbedded = Effect.fnUntraced(function*(options: EmbeddedOptions) {
  if (options.loadDataDir === undefined && isFreshDataDir(options.dataDir)) yield* fromTemplate(options.dataDir)
  const db = yield* Effect.acquireRelease(
    Effect.tryPromise({ try: () => PGlite.create(options), catch: embeddedStartFailed }),
    (db) => Effect.promise(() => db.close())
  )
  // PGlite has a single backend session: one socket, shared by every query, so a pool of exactly one connection.
  const server = new PGLiteSocketServer({ db, host: EMBEDDED_HOST, port: 0, maxConnections: 1 })
  yield* Effect.acquireRelease(
    Effect.tryPromise({ try: () => server.start(), catch: embeddedStartFailed }),
    // `stop` waits for every connection to end, and one opened by a start-up that a SIGTERM interrupted may never
    // end: the database is closed after a short wait regardless, so shutdown completes at any moment of a boot.
    () => Effect.asVoid(Effect.timeoutOption(Effect.promise(() => server.stop()), SOCKET_STOP_GRACE))
  )
  // Port 0 lets the OS choose a free port; the server reports it as "host:port" once listening.
  const port = Number(server.getServerConn().slice(EMBEDDED_HOST.length + 1))
  return Number.isInteger(port) && port > 0
    ? port
    : yield* Effect.fail(embeddedStartFailed(new Error(`unexpected listen address ${server.getServerConn()}`)))
})

/**
 * An embedded PGlite under `dataDir` (or `memory://`), closed with the scope; data in a directory survives a
 * restart. One backend session: transactions are serialized, and nothing may wait for a second connection while
 * holding the first. A fresh boot costs one to a few seconds (initdb), much less from `loadDataDir`.
 */
export const layerEmbedded = (options: EmbeddedOptions): Layer.Layer<Database, SqlError> =>
  PgClient.layerFrom(Effect.gen(function*() {
    const port = yield* serveEmbedded(options)
    return yield* PgClient.make({
      host: EMBEDDED_HOST,
      port,
      username: "postgres",
      database: "postgres",
      maxConnections: 1,
      minConnections: 1,
      multiplex: true,
      ...naming
    })
  }))

/** A throwaway embedded database for tests, optionally started from a `dumpDataDir` snapshot. */
export const layerEmbeddedInMemory = (
  options: Omit<EmbeddedOptions, "dataDir"> = {}
): Layer.Layer<Database, SqlError> => layerEmbedded({ ...options, dataDir: IN_MEMORY_DATA_DIR })

/**
 * PostgreSQL at `DATABASE_URL` when it is set and non-empty (production, CI); otherwise the embedded database under
 * `DATA_DIR` (default `./.data`), so a developer needs no server.
 */
export const layerFromEnv: Layer.Layer<Database, SqlError | Config.ConfigError> = Layer.unwrap(
  Effect.gen(function*() {
    const url = yield* Config.option(Config.Redacted("DATABASE_URL"))
    if (Option.isSome(url)) return layerPostgres(url.value)
    const dataDir = yield* Config.String("DATA_DIR").pipe(Config.withDefault("./.data"))
    return layerEmbedded({ dataDir })
  })
)
