/**
 * The plaintext scan shared by the custody suites (secrets, agent provider keys): every log line of this worker (Effect
 * loggers and raw stdout/stderr writes), and every text-like column of every table of the database.
 */
import { assert } from "@effect/vitest"
import { Cause, Effect, Logger } from "effect"
import { SqlClient } from "effect/sql"

/** Everything logged in this worker since the module loaded. */
export const captured: Array<string> = []

/** The logger that records every Effect log line into `captured`; raw writes are recorded as the module loads. */
export const CaptureLogs = Logger.layer([
  Logger.make(({ cause, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    captured.push(
      [...parts.map((part) => typeof part === "string" ? part : JSON.stringify(part)), Cause.pretty(cause)].join(" ")
    )
  })
])
for (const stream of [process.stdout, process.stderr]) {
  const write = stream.write.bind(stream) as (...args: Array<unknown>) => boolean
  stream.write = ((chunk: unknown, ...rest: Array<unknown>) => {
    captured.push(typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8"))
    return write(chunk, ...rest)
  }) as typeof stream.write
}

/**
 * Fails unless no text, JSON, byte or array column of any table holds one of `needles`; `mustScan` names a column
 * (`table.column`) the scan has to include, so the scan is known to reach the custody table.
 */
export const assertNotInDatabase = (needles: ReadonlyArray<string>, mustScan: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = yield* sql<{ tableName: string; columnName: string }>`
      select table_name, column_name from information_schema.columns
      where table_schema = current_schema()
        and data_type in ('text', 'character varying', 'character', 'jsonb', 'json', 'bytea', 'ARRAY')`.pipe(
      Effect.orDie
    )
    assert.isAbove(columns.length, 20)
    assert.isTrue(columns.some((c) => `${c.tableName}.${c.columnName}` === mustScan), `${mustScan} is scanned`)
    for (const { columnName, tableName } of columns) {
      for (const needle of needles) {
        const hits = yield* sql<{ n: number }>`
          select count(*)::int as n from ${sql(tableName)} where ${sql(columnName)}::text like ${`%${needle}%`}`
          .pipe(Effect.orDie)
        assert.strictEqual(hits[0]!.n, 0, `${tableName}.${columnName} holds a needle`)
      }
    }
  })
