/**
 * Usage ingestion and summaries (metering-billing.md §1–2). Single and batch ingest take one path: every record is
 * checked (fields, the 35-day / 5-minute window, its project and environment), keys repeated earlier in the batch or
 * already stored are duplicates, and the rest are stored in one statement that also queues their per-hour sums for the
 * roll-up fiber (`rollup.ts`), in one transaction with the violations they cause when a quota applies. A key lost to
 * a concurrent replica is a duplicate too. Summaries read the rollups, at most one roll-up pass behind.
 */
import {
  type Actor,
  type BatchItemError,
  type BatchItemResult,
  type BucketType,
  Conflict,
  MAX_RECORD_AGE_MS,
  MAX_RECORD_LEAD_MS,
  type OrgId,
  type ResolvedWorkspace,
  UsageInput,
  type UsageRecord,
  type UsageSummary,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import { EnvironmentsRepo, ProjectsRepo, Transactor, type UsageRecordRow, UsageRepo } from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { issueFields } from "../platform/apiMiddleware.ts"
import { eventActorOf } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { QuotasService } from "../quotas/service.ts"

const HOUR_MS = 60 * 60 * 1000
const DAY_MS = 24 * HOUR_MS
/** Summary windows: the defaults per bucket type, and the widest allowed. */
const DEFAULT_WINDOW_MS: Record<BucketType, number> = { day: 30 * DAY_MS, hour: 48 * HOUR_MS }
const MAX_WINDOW_MS = 400 * DAY_MS

type Fields = Record<string, ReadonlyArray<string>>

/** What became of one record of an ingest. */
type Outcome =
  | { readonly _tag: "stored"; readonly row: UsageRecordRow }
  | { readonly _tag: "invalid"; readonly fields: Fields }
  | { readonly _tag: "duplicate"; readonly usageRecordId: UsageRecord["id"] | undefined }

const decodeInput = Schema.decodeUnknownEffect(UsageInput)

export class UsageService extends Context.Service<UsageService, {
  readonly record: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    input: UsageInput
  ) => Effect.Effect<{ readonly usageRecord: UsageRecord }, Conflict | ValidationFailed>
  readonly batch: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    records: ReadonlyArray<unknown>
  ) => Effect.Effect<{ readonly results: ReadonlyArray<BatchItemResult> }>
  readonly summary: (
    workspace: ResolvedWorkspace,
    query: {
      readonly metric: string
      readonly projectId?: UsageRecord["projectId"] & string
      readonly environmentId?: UsageRecord["environmentId"] & string
      readonly bucketType?: BucketType
      readonly startTime?: Date
      readonly endTime?: Date
    }
  ) => Effect.Effect<UsageSummary, ValidationFailed>
}>()("@cp/server/UsageService") {
  static readonly layer = Layer.effect(
    UsageService,
    Effect.gen(function*() {
      const usage = yield* UsageRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const quotas = yield* QuotasService
      const tx = yield* Transactor

      /** The field failures of a decoded record that need the clock or the database; empty when it is fine. */
      const checkRecord = Effect.fnUntraced(function*(
        orgId: OrgId,
        input: UsageInput,
        now: Date,
        known: Map<string, boolean>
      ) {
        const fields: Record<string, Array<string>> = {}
        if (input.recordedAt !== undefined) {
          const at = input.recordedAt.getTime()
          if (at < now.getTime() - MAX_RECORD_AGE_MS) fields["recordedAt"] = ["must be at most 35 days in the past"]
          else if (at > now.getTime() + MAX_RECORD_LEAD_MS) {
            fields["recordedAt"] = ["must be at most 5 minutes in the future"]
          }
        }
        if (input.environmentId !== undefined && input.projectId === undefined) {
          fields["environmentId"] = ["requires projectId"]
        } else if (input.projectId !== undefined) {
          const projectId = input.projectId
          const projectKnown = known.get(projectId) ??
            Option.isSome(yield* projects.findById({ orgId, projectId }))
          known.set(projectId, projectKnown)
          if (!projectKnown) fields["projectId"] = ["names no project in this workspace"]
          else if (input.environmentId !== undefined) {
            const environmentId = input.environmentId
            const cacheKey = `${projectId}/${environmentId}`
            const environmentKnown = known.get(cacheKey) ??
              Option.isSome(yield* environments.findById({ orgId, projectId, environmentId }))
            known.set(cacheKey, environmentKnown)
            if (!environmentKnown) fields["environmentId"] = ["names no environment of this project"]
          }
        }
        return fields
      })

      /** The one ingest path: an outcome per input, in order (`Left` is a record that failed its schema). */
      const ingest = Effect.fnUntraced(function*(
        actor: Actor,
        orgId: OrgId,
        inputs: ReadonlyArray<{ readonly input: UsageInput } | { readonly fields: Fields }>
      ) {
        const now = yield* currentDate
        const known = new Map<string, boolean>()
        const outcomes: Array<Outcome | undefined> = []
        const firstOfKey = new Map<string, number>()
        const candidates: Array<{ readonly index: number; readonly row: UsageRecordRow }> = []
        for (const [index, item] of inputs.entries()) {
          if ("fields" in item) {
            outcomes.push({ _tag: "invalid", fields: item.fields })
            continue
          }
          const { input } = item
          const fields = yield* checkRecord(orgId, input, now, known)
          if (Object.keys(fields).length > 0) {
            outcomes.push({ _tag: "invalid", fields })
            continue
          }
          if (firstOfKey.has(input.idempotencyKey)) {
            outcomes.push(undefined) // resolved below: a duplicate of the earlier record
            continue
          }
          firstOfKey.set(input.idempotencyKey, index)
          outcomes.push(undefined)
          candidates.push({
            index,
            row: {
              id: mint.usageRecord(now.getTime()),
              orgId,
              projectId: input.projectId ?? null,
              environmentId: input.environmentId ?? null,
              resourceId: input.resourceId ?? null,
              metric: input.metric,
              quantity: input.quantity ?? 1,
              idempotencyKey: input.idempotencyKey,
              recordedAt: input.recordedAt ?? now,
              metadata: input.metadata ?? null,
              createdAt: now
            }
          })
        }
        const applicable = yield* quotas.quotasFor(orgId, candidates.map((c) => c.row.metric))
        // Key order is lock order: two batches sharing keys in any order wait for each other, never deadlock.
        const ordered = candidates.map((c) => c.row).sort((x, y) =>
          x.idempotencyKey < y.idempotencyKey ? -1 : x.idempotencyKey > y.idempotencyKey ? 1 : 0
        )
        const store = usage.ingest({ records: ordered, at: now })
        // A single record without a quota to evaluate is one small statement: no transaction (its round trips) needed.
        // A batch's statement is large: a transaction reserves a session for it alone, so concurrent batches run side
        // by side instead of queueing on a shared (multiplexed) session behind each other and every other statement.
        const stored = applicable.length === 0 && ordered.length <= 1
          ? yield* store
          : yield* tx.withTransaction(Effect.gen(function*() {
            // Ingests of one workspace and quota'd metric run one at a time, so each one's usage read (after its
            // statement, on a fresh snapshot) includes every ingest before it and a limit crossed by two concurrent
            // batches is seen by the second. Metric order is lock order.
            for (const metric of [...new Set(applicable.map((quota) => quota.metric))].sort()) {
              yield* tx.lock(`usage:${orgId}:${metric}`)
            }
            const rows = yield* store
            yield* quotas.afterIngest(eventActorOf(actor), orgId, rows, applicable)
            return rows
          }))
        const storedIds = new Set(stored.map((row) => row.id))
        const keyHolders = new Map<string, UsageRecord["id"]>()
        for (const row of stored) keyHolders.set(row.idempotencyKey, row.id)
        const lost = candidates.filter((c) => !storedIds.has(c.row.id)).map((c) => c.row.idempotencyKey)
        if (lost.length > 0) {
          for (const row of yield* usage.findByKeys({ orgId, keys: lost })) keyHolders.set(row.idempotencyKey, row.id)
        }
        for (const { index, row } of candidates) {
          outcomes[index] = storedIds.has(row.id)
            ? { _tag: "stored", row }
            : { _tag: "duplicate", usageRecordId: keyHolders.get(row.idempotencyKey) }
        }
        return inputs.map((item, index): Outcome =>
          outcomes[index] ?? {
            _tag: "duplicate",
            usageRecordId: "input" in item ? keyHolders.get(item.input.idempotencyKey) : undefined
          }
        )
      })

      const duplicateMessage = "idempotencyKey was already used in this workspace"

      return UsageService.of({
        record: Effect.fn("Usage.record")(function*(actor, workspace, input) {
          const [outcome] = yield* ingest(actor, workspace.organization.id, [{ input }])
          if (outcome === undefined || outcome._tag === "duplicate") {
            return yield* wireError(
              Conflict,
              duplicateMessage,
              outcome?._tag === "duplicate" && outcome.usageRecordId !== undefined
                ? { field: "idempotencyKey", usageRecordId: outcome.usageRecordId }
                : { field: "idempotencyKey" }
            )
          }
          if (outcome._tag === "invalid") return yield* validationFailed(outcome.fields)
          return { usageRecord: outcome.row }
        }),

        batch: Effect.fn("Usage.batch")(function*(actor, workspace, records) {
          const inputs: Array<{ readonly input: UsageInput } | { readonly fields: Fields }> = []
          for (const record of records) {
            inputs.push(
              yield* decodeInput(record, { errors: "all" }).pipe(
                Effect.map((input) => ({ input })),
                Effect.catch((error) => Effect.succeed({ fields: issueFields(error.issue) }))
              )
            )
          }
          const outcomes = yield* ingest(actor, workspace.organization.id, inputs)
          const results = outcomes.map((outcome): BatchItemResult => {
            switch (outcome._tag) {
              case "stored":
                return { ok: true, usageRecord: outcome.row }
              case "invalid":
                return {
                  ok: false,
                  error: { kind: "validation_failed", message: "Record validation failed", fields: outcome.fields }
                }
              case "duplicate": {
                const error: BatchItemError = outcome.usageRecordId === undefined
                  ? { kind: "duplicate", message: duplicateMessage }
                  : { kind: "duplicate", message: duplicateMessage, usageRecordId: outcome.usageRecordId }
                return { ok: false, error }
              }
            }
          })
          return { results }
        }),

        summary: Effect.fn("Usage.summary")(function*(workspace, query) {
          const now = yield* currentDate
          const bucketType = query.bucketType ?? "day"
          const bucketMs = bucketType === "hour" ? HOUR_MS : DAY_MS
          // By default the window ends with the current bucket, so it is included.
          const end = query.endTime ?? new Date((Math.floor(now.getTime() / bucketMs) + 1) * bucketMs)
          const start = query.startTime ?? new Date(end.getTime() - DEFAULT_WINDOW_MS[bucketType])
          if (end.getTime() <= start.getTime()) {
            return yield* validationFailed({ endTime: ["must be after startTime"] })
          }
          if (end.getTime() - start.getTime() > MAX_WINDOW_MS) {
            return yield* validationFailed({ endTime: ["must be at most 400 days after startTime"] })
          }
          const rollups = yield* usage.rollups({
            orgId: workspace.organization.id,
            metric: query.metric,
            bucketType,
            start,
            end,
            projectId: query.projectId ?? null,
            environmentId: query.environmentId ?? null
          })
          return {
            metric: query.metric,
            totalQuantity: rollups.reduce((sum, row) => sum + row.quantity, 0),
            totalRecords: rollups.reduce((sum, row) => sum + row.recordCount, 0),
            rollups
          }
        })
      })
    })
  )
}
