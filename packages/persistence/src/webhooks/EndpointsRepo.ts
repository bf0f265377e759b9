/**
 * Webhook endpoints and their subscriptions, one aggregate: a subscription lives and dies with its endpoint. The
 * repository stores sealed secrets as it is handed them; sealing and opening are the server's.
 */
import type { WebhookEndpointId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, keysetQuery, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { compositeKey, insertUnique, primaryKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import {
  EndpointKey,
  EndpointRow,
  EndpointsPage,
  EventMatch,
  StreakChange,
  SubscriptionKey,
  SubscriptionMatch,
  SubscriptionRow,
  SubscriptionsPage
} from "./rows.ts"
import { WebhookTables } from "./WebhookTables.ts"

/** The constraint behind a second subscription of one endpoint to the same `eventType`. */
export const subscriptionDuplicateConstraint = "webhook_subscriptions_endpoint_event_type"

/** Whether a subscription pattern (`*`, `prefix.*` or exact) takes an event type. */
export const patternMatches = (pattern: string, eventType: string): boolean =>
  pattern === "*" || pattern === eventType || (pattern.endsWith(".*") && eventType.startsWith(pattern.slice(0, -1)))

export class WebhookEndpointsRepo extends Context.Service<WebhookEndpointsRepo, {
  readonly insert: (row: EndpointRow) => Effect.Effect<void, UniqueViolation>
  /** The endpoint with this id in this workspace (another workspace's is None). */
  readonly find: (key: EndpointKey) => Effect.Effect<Option.Option<EndpointRow>>
  /** A page of a workspace's endpoints (every scope when `projectId` is null, else that project's), newest first. */
  readonly list: (page: EndpointsPage) => Effect.Effect<ReadonlyArray<EndpointRow>>
  /** How many endpoints the workspace has, project endpoints included. */
  readonly count: (orgId: EndpointKey["orgId"]) => Effect.Effect<number>
  /** Writes every mutable field of the row (the server computed it inside the transaction that read it). */
  readonly update: (row: EndpointRow) => Effect.Effect<void>
  /** Removes the endpoint with its subscriptions and delivery attempts. */
  readonly remove: (key: EndpointKey) => Effect.Effect<void>
  /**
   * Inside a transaction: holds these endpoints (in id order, the one global order every worker round takes them in)
   * against deletion until it ends, while leaving them free for other rounds' streak updates (`for key share`).
   */
  readonly holdInOrder: (ids: ReadonlyArray<WebhookEndpointId>) => Effect.Effect<void>
  /** After a terminal outcome: the streak reset (success) or incremented (failure); the row as it is now. */
  readonly recordStreak: (change: StreakChange) => Effect.Effect<Option.Option<EndpointRow>>
  readonly insertSubscription: (row: SubscriptionRow) => Effect.Effect<void, UniqueViolation>
  readonly findSubscription: (key: SubscriptionKey) => Effect.Effect<Option.Option<SubscriptionRow>>
  readonly listSubscriptions: (page: SubscriptionsPage) => Effect.Effect<ReadonlyArray<SubscriptionRow>>
  readonly countSubscriptions: (endpointId: WebhookEndpointId) => Effect.Effect<number>
  readonly updateSubscription: (row: SubscriptionRow) => Effect.Effect<void>
  readonly removeSubscription: (key: SubscriptionKey) => Effect.Effect<void>
  /**
   * The enabled subscriptions whose endpoint takes an event of this workspace and project (workspace endpoints take
   * every event, project endpoints their project's) and whose pattern matches its type.
   */
  readonly matching: (event: EventMatch) => Effect.Effect<ReadonlyArray<SubscriptionMatch>>
}>()("@cp/persistence/webhooks/WebhookEndpointsRepo") {
  static readonly memory = Layer.effect(
    WebhookEndpointsRepo,
    Effect.gen(function*() {
      const { deliveries, endpoints, subscriptions } = yield* WebhookTables
      const endpointIn = ({ endpointId, orgId }: EndpointKey) =>
        Option.filter(Option.fromUndefinedOr(endpoints.get(endpointId)), (row) => row.orgId === orgId)
      const subscriptionIn = ({ orgId, subscriptionId }: SubscriptionKey) =>
        Option.filter(Option.fromUndefinedOr(subscriptions.get(subscriptionId)), (row) => row.orgId === orgId)
      return WebhookEndpointsRepo.of({
        insert: (row) => insertUnique(endpoints, row.id, row, [primaryKey("webhook_endpoints_pkey")]),
        find: (key) => Effect.sync(() => endpointIn(key)),
        list: (page) =>
          Effect.sync(() =>
            windowOf(
              [...endpoints.values()].filter((row) =>
                row.orgId === page.orgId && (page.projectId === null || row.projectId === page.projectId)
              ),
              idPosition,
              page
            )
          ),
        count: (orgId) => Effect.sync(() => [...endpoints.values()].filter((row) => row.orgId === orgId).length),
        update: (row) => Effect.asVoid(updateRow(endpoints, row.id, () => Option.some(row))),
        remove: (key) =>
          atomically((changes) => {
            if (Option.isNone(endpointIn(key))) return Effect.void
            changes.delete(endpoints, key.endpointId)
            for (const sub of subscriptions.values()) {
              if (sub.endpointId === key.endpointId) changes.delete(subscriptions, sub.id)
            }
            for (const attempt of deliveries.values()) {
              if (attempt.endpointId === key.endpointId) changes.delete(deliveries, attempt.id)
            }
            return Effect.void
          }),
        // Memory transactions run one at a time.
        holdInOrder: () => Effect.void,
        recordStreak: ({ at, endpointId, success }) =>
          updateRow(endpoints, endpointId, (row) =>
            Option.some({
              ...row,
              consecutiveFailures: success ? 0 : row.consecutiveFailures + 1,
              updatedAt: at
            })),
        insertSubscription: (row) =>
          insertUnique(subscriptions, row.id, row, [
            primaryKey("webhook_subscriptions_pkey"),
            { constraint: subscriptionDuplicateConstraint, key: (sub) => compositeKey(sub.endpointId, sub.eventType) }
          ]),
        findSubscription: (key) => Effect.sync(() => subscriptionIn(key)),
        listSubscriptions: (page) =>
          Effect.sync(() =>
            windowOf([...subscriptions.values()].filter((row) => row.endpointId === page.endpointId), idPosition, page)
          ),
        countSubscriptions: (endpointId) =>
          Effect.sync(() => [...subscriptions.values()].filter((row) => row.endpointId === endpointId).length),
        updateSubscription: (row) => Effect.asVoid(updateRow(subscriptions, row.id, () => Option.some(row))),
        removeSubscription: (key) =>
          atomically((changes) => {
            if (Option.isSome(subscriptionIn(key))) changes.delete(subscriptions, key.subscriptionId)
            return Effect.void
          }),
        matching: (event) =>
          Effect.sync(() =>
            [...subscriptions.values()]
              .filter((sub) => {
                const endpoint = endpoints.get(sub.endpointId)
                return sub.orgId === event.orgId && sub.enabled && endpoint !== undefined &&
                  (endpoint.projectId === null || endpoint.projectId === event.projectId) &&
                  patternMatches(sub.eventType, event.eventType)
              })
              .map((sub) => ({ subscriptionId: sub.id, endpointId: sub.endpointId, eventType: sub.eventType }))
          )
      })
    })
  ).pipe(Layer.provide(WebhookTables.layer))

  static readonly sql = Layer.effect(
    WebhookEndpointsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const countOf = Schema.Struct({ count: Schema.NumberFromString })
      return WebhookEndpointsRepo.of({
        insert: insertRow(sql, "webhook_endpoints", EndpointRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: EndpointKey,
            Result: EndpointRow,
            execute: ({ endpointId, orgId }) =>
              sql`select * from webhook_endpoints where id = ${endpointId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: EndpointsPage,
            Result: EndpointRow,
            execute: ({ orgId, projectId, ...window }) =>
              keysetQuery(
                sql,
                sql`select * from webhook_endpoints`,
                [sql`org_id = ${orgId}`, ...(projectId === null ? [] : [sql`project_id = ${projectId}`])],
                window
              )
          }),
          Effect.orDie
        ),
        count: (orgId) =>
          SqlSchema.findOne({
            Request: EndpointKey.fields.orgId,
            Result: countOf,
            execute: (id) => sql`select count(*)::text as count from webhook_endpoints where org_id = ${id}`
          })(orgId).pipe(Effect.map((row) => row.count), Effect.orDie),
        update: flow(
          SqlSchema.void({
            Request: EndpointRow,
            execute: (row) =>
              sql`
                update webhook_endpoints set ${sql.update(row, ["id", "orgId", "projectId", "createdAt"])}
                where id = ${row.id}`
          }),
          Effect.orDie
        ),
        remove: flow(
          SqlSchema.void({
            Request: EndpointKey,
            execute: ({ endpointId, orgId }) =>
              sql`delete from webhook_endpoints where id = ${endpointId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        holdInOrder: (ids) =>
          ids.length === 0 ? Effect.void : sql`
            select id from webhook_endpoints where id in ${sql.in([...ids].sort())} order by id for key share`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        recordStreak: flow(
          SqlSchema.findOneOption({
            Request: StreakChange,
            Result: EndpointRow,
            execute: ({ at, endpointId, success }) =>
              sql`
                update webhook_endpoints set
                  consecutive_failures = ${success ? sql`0` : sql`consecutive_failures + 1`},
                  updated_at = ${at}
                where id = ${endpointId}
                returning *`
          }),
          Effect.orDie
        ),
        insertSubscription: insertRow(sql, "webhook_subscriptions", SubscriptionRow),
        findSubscription: flow(
          SqlSchema.findOneOption({
            Request: SubscriptionKey,
            Result: SubscriptionRow,
            execute: ({ orgId, subscriptionId }) =>
              sql`select * from webhook_subscriptions where id = ${subscriptionId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        listSubscriptions: flow(
          SqlSchema.findAll({
            Request: SubscriptionsPage,
            Result: SubscriptionRow,
            execute: ({ endpointId, ...window }) =>
              keysetQuery(sql, sql`select * from webhook_subscriptions`, [sql`endpoint_id = ${endpointId}`], window)
          }),
          Effect.orDie
        ),
        countSubscriptions: (endpointId) =>
          SqlSchema.findOne({
            Request: SubscriptionsPage.fields.endpointId,
            Result: countOf,
            execute: (id) => sql`select count(*)::text as count from webhook_subscriptions where endpoint_id = ${id}`
          })(endpointId).pipe(Effect.map((row) => row.count), Effect.orDie),
        updateSubscription: flow(
          SqlSchema.void({
            Request: SubscriptionRow,
            execute: (row) =>
              sql`
                update webhook_subscriptions set enabled = ${row.enabled}, updated_at = ${row.updatedAt}
                where id = ${row.id}`
          }),
          Effect.orDie
        ),
        removeSubscription: flow(
          SqlSchema.void({
            Request: SubscriptionKey,
            execute: ({ orgId, subscriptionId }) =>
              sql`delete from webhook_subscriptions where id = ${subscriptionId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        matching: flow(
          SqlSchema.findAll({
            Request: EventMatch,
            Result: SubscriptionMatch,
            execute: ({ eventType, orgId, projectId }) =>
              sql`
                select s.id as subscription_id, s.endpoint_id, s.event_type
                from webhook_subscriptions s join webhook_endpoints e on e.id = s.endpoint_id
                where s.org_id = ${orgId} and s.enabled
                  and (e.project_id is null or e.project_id = ${projectId})
                  and (s.event_type = '*' or s.event_type = ${eventType}
                    or (s.event_type like '%.*'
                      and left(${eventType}, length(s.event_type) - 1) = left(s.event_type, length(s.event_type) - 1)))`
          }),
          Effect.orDie
        )
      })
    })
  )
}
