/**
 * Everything cpctl prints: one table renderer for every command, the decoded value as JSON under
 * `--json`, and the one-line error format. Under `--json` a command prints the resource it shows or changed,
 * or the array of a list — never an envelope; everything that is not the result (the next page's command, "No
 * projects.") goes to stderr.
 */
import { Console, Effect } from "effect"
import { Flag, GlobalFlag } from "effect/cli"

/** `--json`, accepted anywhere on the command line: print the decoded result as JSON for scripts. */
export const JsonOutput = GlobalFlag.Setting("json")({
  flag: Flag.Boolean("json").pipe(
    Flag.withDescription("Print the result as JSON instead of a table"),
    Flag.withDefault(false)
  )
})

/** What a table cell may hold; `null` shows as `-`, dates as ISO 8601. */
export type Cell = string | number | boolean | Date | null

/** A table's columns in display order: header → how to read the cell from a row. */
export type Columns<Row> = Readonly<Record<string, (row: Row) => Cell>>

const showCell = (cell: Cell): string => cell === null ? "-" : cell instanceof Date ? cell.toISOString() : String(cell)

/** Renders rows as left-aligned columns under upper-case headers, two spaces apart. */
export const renderTable = <Row>(columns: Columns<Row>, rows: ReadonlyArray<Row>): string => {
  const readers = Object.values(columns)
  const lines = [
    Object.keys(columns).map((header) => header.toUpperCase()),
    ...rows.map((row) => readers.map((read) => showCell(read(row))))
  ]
  const widths = readers.map((_, column) => Math.max(...lines.map((line) => line[column]?.length ?? 0)))
  return lines
    .map((line) => line.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd())
    .join("\n")
}

/** The decoded value as pretty JSON (dates as ISO 8601). */
export const renderJson = (value: unknown): string => JSON.stringify(value, null, 2)

/** Prints a command's result on stdout: its JSON under `--json`, otherwise the human view of it. */
export const printResult = <A>(value: A, humanView: (value: A) => string) =>
  JsonOutput.use((json) => Console.log(json ? renderJson(value) : humanView(value)))

/** The one line a failure prints on stderr. */
export const errorLine = (code: string, message: string): string => `error ${code}: ${message}`

/** A value as a shell word: bare when safe, else single-quoted. */
export const shellWord = (value: string): string =>
  /^[A-Za-z0-9_.:@/,=+-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`

/** How a list is printed: its columns, what an empty list says, and the command that prints the next page. */
export interface ListView<Row> {
  readonly columns: Columns<Row>
  /** The line printed (on stderr) when there are no rows, e.g. "No projects." */
  readonly empty: string
  /** The command line (without `--cursor`) that continues the list, as shell words. */
  readonly command: ReadonlyArray<string>
}

/**
 * Prints a list: the array under `--json`, else the table (or the `empty` line on stderr); then, when there is a
 * next page, `More: <command> --cursor <cursor>` on stderr.
 */
export const printList = <Row>(rows: ReadonlyArray<Row>, next: string | null, view: ListView<Row>) =>
  Effect.gen(function*() {
    const json = yield* JsonOutput
    if (json) yield* Console.log(renderJson(rows))
    else if (rows.length === 0) yield* Console.error(view.empty)
    else yield* Console.log(renderTable(view.columns, rows))
    if (next !== null) yield* Console.error(`More: ${[...view.command, "--cursor", next].map(shellWord).join(" ")}`)
  })
