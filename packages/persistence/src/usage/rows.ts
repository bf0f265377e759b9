/** The stored shapes of the usage area (records and their hourly and daily rollups) and its requests. */
import { EnvironmentId, OrgId, ProjectId } from "@cp/domain/ids"
import { BucketType, Rollup, UsageRecord } from "@cp/domain/metering"
import { Schema } from "effect"
import { storedFields } from "../stored.ts"

/** A row of `usage_records`: the API's usage record; `(orgId, idempotencyKey)` is unique for ever. */
export const UsageRecordRow = Schema.Struct(storedFields(UsageRecord.fields))
export type UsageRecordRow = typeof UsageRecordRow.Type

/** A row of `usage_rollups`: one bucket of one (workspace, project, environment, metric). */
export const RollupRow = Schema.Struct(storedFields(Rollup.fields))
export type RollupRow = typeof RollupRow.Type

/** Records to store in one statement, with the time their rollups are touched. */
export const UsageIngest = Schema.Struct({ records: Schema.Array(UsageRecordRow), at: Schema.Date })
export type UsageIngest = typeof UsageIngest.Type

/** Stored records of the workspace holding any of these idempotency keys. */
export const UsageKeys = Schema.Struct({ orgId: OrgId, keys: Schema.Array(Schema.String) })
export type UsageKeys = typeof UsageKeys.Type

/**
 * The quantity of a scope's records of one metric recorded in [start, end) (both on hour boundaries): the workspace
 * (no project), a project (every environment of it) or one environment.
 */
export const UsageInWindow = Schema.Struct({
  orgId: OrgId,
  metric: Schema.String,
  start: Schema.Date,
  end: Schema.Date,
  projectId: Schema.NullOr(ProjectId),
  environmentId: Schema.NullOr(EnvironmentId)
})
export type UsageInWindow = typeof UsageInWindow.Type

/**
 * The rollups of one metric and bucket type with `bucketStart` in [start, end), narrowed to a project (and an
 * environment) when given; ordered by bucketStart, then project and environment (nulls first).
 */
export const RollupQuery = Schema.Struct({ ...UsageInWindow.fields, bucketType: BucketType })
export type RollupQuery = typeof RollupQuery.Type
