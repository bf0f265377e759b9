/**
 * Usage metering (spec: Metering resource rows; "Usage metering" endpoints; metering-billing.md §1–2): usage records
 * ingested one at a time or in batches of up to 1000, and hourly and daily rollups read through the summary.
 */
import { Schema, SchemaGetter } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Conflict } from "./errors.ts"
import { EnvironmentId, OrgId, ProjectId, RollupId, UsageRecordId } from "./ids.ts"
import { describedText, doc } from "./reference.ts"
import { requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { JsonValue, Text } from "./text.ts"
import { Envelope, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** The largest quantity a record carries: 2^53 − 1, the largest integer JSON numbers hold exactly. */
export const MAX_QUANTITY = Number.MAX_SAFE_INTEGER
/** Records per batch. */
export const MAX_BATCH_RECORDS = 1000
/** Metadata bounds (Stripe's): keys, key length, value length. */
export const MAX_METADATA_KEYS = 50
export const MAX_METADATA_KEY_LENGTH = 40
export const MAX_METADATA_VALUE_LENGTH = 500
/** How far from now a `recordedAt` may lie (Stripe meter events): 35 days back, 5 minutes ahead. */
export const MAX_RECORD_AGE_MS = 35 * 24 * 60 * 60 * 1000
export const MAX_RECORD_LEAD_MS = 5 * 60 * 1000

/** 1–64 chars of `a-z 0-9 _ . : -`, starting with a letter. */
export const Metric = describedText("A metric name, e.g. `api.requests`").check(
  Schema.isPattern(/^[a-z][a-z0-9_.:-]{0,63}$/, {
    message: "must be 1 to 64 of a-z, 0-9, '_', '.', ':' or '-', starting with a letter"
  })
)

/** 1–255 chars of `A-Z a-z 0-9 - _ . :`, unique per workspace for ever. */
export const IdempotencyKey = Text.check(
  Schema.isPattern(/^[A-Za-z0-9_.:-]{1,255}$/, {
    message: "must be 1 to 255 letters, digits, '-', '_', '.' or ':'"
  })
)

/** An integer from 0 to 2^53 − 1 (a decimal, a negative or 2^53 is refused). */
export const Quantity = Schema.Number.check(
  Schema.isInt({ message: "must be an integer" }),
  Schema.isBetween({ minimum: 0, maximum: MAX_QUANTITY }, { message: `must be between 0 and ${MAX_QUANTITY}` })
)

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

/** An ISO 8601 time with a zone (milliseconds as sent); `Date` in code. Anything else is 422 on the field. */
export const IsoTime = describedText("An ISO 8601 time with a zone, e.g. 2026-01-31T12:00:00.000Z").check(
  Schema.makeFilter<string>((text) =>
    (ISO_TIME.test(text) && !Number.isNaN(Date.parse(text))) ||
    "must be an ISO 8601 time such as 2026-01-31T12:00:00.000Z"
  )
).pipe(
  Schema.decodeTo(Schema.Date, {
    decode: SchemaGetter.transform((text: string) => new Date(text)),
    encode: SchemaGetter.transform((date: Date) => date.toISOString())
  })
)

/** Up to 50 keys of 1–40 chars, each value a string of at most 500 chars. */
export const UsageMetadata = Schema.Record(Text, Text).check(
  Schema.makeFilter<Readonly<Record<string, string>>>((metadata) => {
    const keys = Object.keys(metadata)
    if (keys.length > MAX_METADATA_KEYS) return `must have at most ${MAX_METADATA_KEYS} keys`
    const longKey = keys.find((key) => key.length < 1 || key.length > MAX_METADATA_KEY_LENGTH)
    if (longKey !== undefined) return `keys must be 1 to ${MAX_METADATA_KEY_LENGTH} characters`
    const longValue = keys.find((key) => (metadata[key] ?? "").length > MAX_METADATA_VALUE_LENGTH)
    if (longValue !== undefined) {
      return `value of '${longValue}' must be at most ${MAX_METADATA_VALUE_LENGTH} characters`
    }
    return true
  })
)

export const ResourceId = describedText("The resource a usage record is about").check(Schema.isBetweenLength(1, 255))

/** One usage record as a request sends it (single ingest, or one element of a batch). */
export const UsageInput = Schema.Struct({
  metric: Metric,
  idempotencyKey: IdempotencyKey,
  quantity: Schema.optionalKey(Quantity),
  recordedAt: Schema.optionalKey(IsoTime),
  projectId: Schema.optionalKey(ProjectId),
  environmentId: Schema.optionalKey(EnvironmentId),
  resourceId: Schema.optionalKey(ResourceId),
  metadata: Schema.optionalKey(Schema.NullOr(UsageMetadata))
})
export type UsageInput = typeof UsageInput.Type

export const UsageRecord = Schema.Struct({
  id: UsageRecordId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  resourceId: Schema.NullOr(Schema.String),
  metric: Schema.String,
  quantity: Schema.Number,
  idempotencyKey: Schema.String,
  recordedAt: Timestamp,
  metadata: Schema.NullOr(Schema.Record(Schema.String, Schema.String)),
  createdAt: Timestamp
})
export type UsageRecord = typeof UsageRecord.Type

/**
 * A batch: 1–1000 records. Each element is validated on its own (a bad one is that item's `validation_failed`, not
 * the batch's 422), so the schema here only bounds the array and the JSON in it.
 */
export const UsageBatchInput = Schema.Struct({
  records: Schema.Array(JsonValue).check(
    Schema.isBetweenLength(1, MAX_BATCH_RECORDS, { message: `must hold 1 to ${MAX_BATCH_RECORDS} records` })
  )
})

export const BatchErrorKind = Schema.Literals(["duplicate", "validation_failed", "not_found"])
export type BatchErrorKind = typeof BatchErrorKind.Type

export const BatchItemError = Schema.Struct({
  kind: BatchErrorKind,
  message: Schema.String,
  fields: Schema.optionalKey(Schema.Record(Schema.String, Schema.Array(Schema.String))),
  /** For `duplicate`: the record that holds the key (earlier in the batch, or stored before). */
  usageRecordId: Schema.optionalKey(UsageRecordId)
})
export type BatchItemError = typeof BatchItemError.Type

export const BatchItemResult = Schema.Union([
  Schema.Struct({ ok: Schema.Literal(true), usageRecord: UsageRecord }),
  Schema.Struct({ ok: Schema.Literal(false), error: BatchItemError })
])
export type BatchItemResult = typeof BatchItemResult.Type

export const BucketType = Schema.Literals(["hour", "day"]).annotate({ description: "Rollup bucket: `hour` or `day`" })
export type BucketType = typeof BucketType.Type

export const Rollup = Schema.Struct({
  id: RollupId,
  orgId: OrgId,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId),
  metric: Schema.String,
  bucketType: BucketType,
  bucketStart: Timestamp,
  quantity: Schema.Number,
  recordCount: Schema.Number,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Rollup = typeof Rollup.Type

/** Summary query: `metric` required; window defaults in the service (30 days of days, 48 hours of hours). */
export const SummaryQuery = {
  metric: Metric,
  projectId: Schema.optionalKey(ProjectId),
  environmentId: Schema.optionalKey(EnvironmentId),
  bucketType: Schema.optionalKey(BucketType),
  startTime: Schema.optionalKey(IsoTime),
  endTime: Schema.optionalKey(IsoTime)
}

export const UsageSummary = Schema.Struct({
  metric: Schema.String,
  totalQuantity: Schema.Number,
  totalRecords: Schema.Number,
  rollups: Schema.Array(Rollup)
})
export type UsageSummary = typeof UsageSummary.Type

const orgParams = { orgId: OrgRef }

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.post("record", "/v1/organizations/:orgId/usage", {
      params: orgParams,
      payload: UsageInput,
      success: Envelope({ usageRecord: UsageRecord }),
      error: Conflict
    }).annotateMerge(
      doc(
        "Record a usage event",
        "Stores one usage record; its `idempotencyKey` is unique per workspace (409 with " +
          "`details.usageRecordId` on a repeat). Rollups are updated in the same statement."
      )
    ).annotateMerge(requires.permission("organization.metering.write")),
    HttpApiEndpoint.post("batch", "/v1/organizations/:orgId/usage/batch", {
      params: orgParams,
      payload: UsageBatchInput,
      success: Envelope({ results: Schema.Array(BatchItemResult) })
    }).annotateMerge(
      doc(
        "Record up to 1000 usage events",
        "Each record is validated and stored on its own; the answer has one result per record, " +
          "in order (`stored`, `duplicate` or `validation_failed`)."
      )
    ).annotateMerge(requires.permission("organization.metering.write")),
    HttpApiEndpoint.get("summary", "/v1/organizations/:orgId/usage/summary", {
      params: orgParams,
      query: SummaryQuery,
      success: Envelope(UsageSummary.fields)
    }).annotateMerge(
      doc(
        "Summarize usage",
        "Hourly or daily totals per metric from the rollups, filtered by metric, project and " +
          "environment."
      )
    ).annotateMerge(requires.permission("organization.metering.read"))
  )
  .middleware(WorkspaceAuthorization)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(OpenApi.annotations({ title: "Usage", description: "Usage records, rollups and summaries" }))
{}
