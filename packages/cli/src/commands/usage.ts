/**
 * Usage commands, in the workspace of `-w` (or the default): `usage record <metric> --key <k> [--quantity n]
 * [--project p] [--environment e] [--resource r] [--recorded-at t] [--meta k=v …]`, `usage batch` (NDJSON records
 * on stdin, one JSON object a line, sent in batches of 1000; a line that is not JSON is a usage error before anything
 * is sent) and `usage summary <metric> [--bucket hour|day] [--start t] [--end t] [--project p] [--environment e]`.
 */
import { type BatchItemResult, IdempotencyKey, Metric, type Rollup, type UsageRecord } from "@cp/domain"
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { usageError } from "../errors.ts"
import { readStdin } from "../input.ts"
import { belowWorkspaceFlags, optionalKey, scopeOf, workspaceFlag } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

const recordColumns: Columns<UsageRecord> = {
  id: (record) => record.id,
  metric: (record) => record.metric,
  quantity: (record) => record.quantity,
  key: (record) => record.idempotencyKey,
  project: (record) => record.projectId,
  environment: (record) => record.environmentId,
  recorded: (record) => record.recordedAt
}

const rollupColumns: Columns<Rollup> = {
  bucket: (rollup) => rollup.bucketStart,
  project: (rollup) => rollup.projectId,
  environment: (rollup) => rollup.environmentId,
  quantity: (rollup) => rollup.quantity,
  records: (rollup) => rollup.recordCount
}

const metricArgument = Argument.String("metric").pipe(Argument.withSchema(Metric), Argument.withDescription("Metric"))
const scopeFlags = belowWorkspaceFlags(
  "Project (prj_… or slug) the usage belongs to",
  "Environment (env_… or slug) of --project"
)

/** The scope flags as the ids a usage body or query carries. */
const scopeIds = Effect.fnUntraced(function*(flags: Parameters<typeof scopeOf>[0]) {
  const scope = yield* scopeOf(flags)
  return {
    ...(scope.kind === "organization" ? {} : { projectId: scope.projectId }),
    ...(scope.kind === "environment" ? { environmentId: scope.environmentId } : {})
  }
})

const record = Command.make(
  "record",
  {
    workspace: workspaceFlag,
    metric: metricArgument,
    key: Flag.String("key").pipe(Flag.withSchema(IdempotencyKey), Flag.withDescription("Idempotency key (unique)")),
    quantity: Flag.Int("quantity").pipe(Flag.withDescription("Quantity (default 1)"), Flag.optional),
    resource: Flag.String("resource").pipe(Flag.withDescription("Resource id"), Flag.optional),
    recordedAt: Flag.Date("recorded-at").pipe(Flag.withDescription("ISO time (default now)"), Flag.optional),
    meta: Flag.KeyValuePair("meta").pipe(Flag.withDescription("Metadata key=value (repeatable)"), Flag.optional),
    ...scopeFlags
  },
  Effect.fn("cpctl.usage.record")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { usageRecord } = yield* api.usage.record({
      params: { orgId: flags.workspace },
      payload: {
        metric: flags.metric,
        idempotencyKey: flags.key,
        ...optionalKey("quantity", flags.quantity),
        ...optionalKey("resourceId", flags.resource),
        ...optionalKey("recordedAt", flags.recordedAt),
        ...optionalKey("metadata", flags.meta),
        ...(yield* scopeIds(flags))
      }
    })
    yield* printResult(usageRecord, (row) => renderTable(recordColumns, [row]))
  })
).pipe(Command.withDescription("Record one usage event"), withClient)

const BATCH_SIZE = 1000

const resultColumns: Columns<{ readonly line: number; readonly result: BatchItemResult }> = {
  line: ({ line }) => line,
  ok: ({ result }) => result.ok,
  id: ({ result }) => result.ok ? result.usageRecord.id : result.error.usageRecordId ?? null,
  error: ({ result }) => result.ok ? null : result.error.kind,
  detail: ({ result }) => result.ok ? null : JSON.stringify(result.error.fields ?? result.error.message)
}

const batch = Command.make(
  "batch",
  { workspace: workspaceFlag },
  Effect.fn("cpctl.usage.batch")(function*({ workspace }) {
    const { api } = yield* ControlPlaneClient
    const lines = (yield* readStdin).split(/\r?\n/).map((line, index) => ({ line: index + 1, text: line.trim() }))
      .filter(({ text }) => text !== "")
    const records: Array<{ readonly line: number; readonly value: unknown }> = []
    for (const { line, text } of lines) {
      const value = yield* Effect.try({
        try: (): unknown => JSON.parse(text),
        catch: () => usageError(`line ${line} of stdin is not JSON`)
      })
      records.push({ line, value })
    }
    if (records.length === 0) return yield* usageError("no records on stdin: one JSON object a line")
    const results: Array<{ readonly line: number; readonly result: BatchItemResult }> = []
    for (let start = 0; start < records.length; start += BATCH_SIZE) {
      const chunk = records.slice(start, start + BATCH_SIZE)
      const answer = yield* api.usage.batch({
        params: { orgId: workspace },
        // The server validates each record on its own; the batch only needs JSON values.
        payload: { records: chunk.map(({ value }) => JSON.parse(JSON.stringify(value))) }
      })
      answer.results.forEach((result, index) => results.push({ line: chunk[index]?.line ?? 0, result }))
    }
    yield* printResult(
      results.map(({ line, result }) => ({ line, ...result })),
      () => {
        const stored = results.filter(({ result }) => result.ok).length
        return `${renderTable(resultColumns, results)}\n${stored} of ${results.length} stored`
      }
    )
  })
).pipe(Command.withDescription("Record usage from NDJSON on stdin (one record a line)"), withClient)

const summary = Command.make(
  "summary",
  {
    workspace: workspaceFlag,
    metric: metricArgument,
    bucket: Flag.Literals("bucket", ["hour", "day"]).pipe(
      Flag.withDescription("hour or day (default day)"),
      Flag.optional
    ),
    start: Flag.Date("start").pipe(Flag.withDescription("Start time, inclusive (ISO)"), Flag.optional),
    end: Flag.Date("end").pipe(Flag.withDescription("End time, exclusive (ISO)"), Flag.optional),
    ...scopeFlags
  },
  Effect.fn("cpctl.usage.summary")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const result = yield* api.usage.summary({
      params: { orgId: flags.workspace },
      query: {
        metric: flags.metric,
        ...optionalKey("bucketType", flags.bucket),
        ...optionalKey("startTime", flags.start),
        ...optionalKey("endTime", flags.end),
        ...(yield* scopeIds(flags))
      }
    })
    yield* printResult(
      result,
      (value) =>
        `${renderTable(rollupColumns, value.rollups)}\ntotal ${value.totalQuantity} from ${value.totalRecords} records`
    )
  })
).pipe(Command.withDescription("Usage of a metric by hour or day"), withClient)

/** `cpctl usage`. */
export const usage = Command.make("usage").pipe(
  Command.withDescription("Record and read usage"),
  Command.withSubcommands([record, batch, summary])
)
