/**
 * The delivery engine (webhooks.md §3): a sender that makes one signed HTTPS request the way the spec says (no
 * redirects, 10 s from connect to last byte, private destinations refused after DNS resolution, CAs of
 * `NODE_EXTRA_CA_CERTS` trusted), and a worker that claims due attempts (`for update skip locked`), tries them with
 * bounded concurrency and records each round's outcomes with their lifecycle events in one transaction (row locks in
 * one global order; a failed write is retried, never the request): retry on the schedule, terminal failure after five
 * tries, auto-disable after five terminal failures in a row, 410 disables at once.
 */
import type { DeliveryStatus, FailureReason } from "@cp/domain"
import {
  DELIVERIES_CHANNEL,
  type DeliveryRow,
  type EndpointRow,
  Transactor,
  WebhookDeliveriesRepo,
  WebhookEndpointsRepo
} from "@cp/persistence"
import { NodeHttpClient } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Latch, Layer, Option, Queue, Random, Schedule, Stream } from "effect"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { randomUUID } from "node:crypto"
import { lookup as dnsLookup, type LookupAddress } from "node:dns"
import { readFileSync } from "node:fs"
import { createSecureContext, rootCertificates } from "node:tls"
import { AppConfig } from "../platform/config.ts"
import { EventLog, type NewEvent, systemActor } from "../platform/events.ts"
import { ServerKeys } from "../platform/keys.ts"
import { open } from "../platform/secretBox.ts"
import { currentDate } from "../platform/serviceKit.ts"
import { withJobSpan } from "../platform/tracing.ts"
import {
  AUTO_DISABLE_THRESHOLD,
  CLAIM_SECONDS,
  DELIVERY_TIMEOUT_MS,
  isPrivateAddress as isPrivate,
  MAX_ATTEMPTS,
  RESPONSE_KEEP_LIMIT,
  RESPONSE_READ_LIMIT,
  retryDelayMs,
  signatureHeader,
  USER_AGENT
} from "./rules.ts"

/** One request to send: where, the exact body, and the headers besides the fixed ones. */
export interface OutboundRequest {
  readonly url: string
  readonly body: string
  readonly headers: Readonly<Record<string, string>>
}

/** What came of one request: an answer (any status) or a failure before one. */
export type SendResult =
  | { readonly _tag: "Answered"; readonly status: number; readonly body: string }
  | {
    readonly _tag: "Failed"
    readonly reason: "timeout" | "tls_error" | "connection_error" | "destination_not_allowed"
  }

const DESTINATION_NOT_ALLOWED = "EWEBHOOKDESTINATION"

const TLS_CODES = /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/

/** The codes of an error and every `cause` below it. */
const codesOf = (error: unknown): ReadonlyArray<string> => {
  const codes: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    if ("code" in current && typeof current.code === "string") codes.push(current.code)
    current = "cause" in current ? current.cause : undefined
  }
  return codes
}

/** webhooks.md §3 Outcome: the `failureReason` of a request that got no answer. */
export const failureOf = (error: unknown): Extract<SendResult, { _tag: "Failed" }>["reason"] => {
  const codes = codesOf(error)
  if (codes.includes(DESTINATION_NOT_ALLOWED)) return "destination_not_allowed"
  if (codes.some((code) => code.includes("TIMEOUT") || code === "ETIMEDOUT")) return "timeout"
  if (codes.some((code) => TLS_CODES.test(code))) return "tls_error"
  return "connection_error"
}

/** Every address a host name resolves to (an IP literal resolves to itself). */
export const resolveAll = (host: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.callback<ReadonlyArray<string>>((resume) => {
    dnsLookup(host.replace(/^\[|\]$/g, ""), { all: true }, (error, addresses: ReadonlyArray<LookupAddress>) => {
      resume(Effect.succeed(error ? [] : addresses.map((entry) => entry.address)))
    })
  })

/** Decides whether a destination may be called; the service asks at create/update, the sender again per request. */
export class DestinationGuard extends Context.Service<DestinationGuard, {
  /** Whether every address `url`'s host resolves to may be called (false when it resolves to nothing). */
  readonly allows: (url: string) => Effect.Effect<boolean>
}>()("@cp/server/webhooks/DestinationGuard") {
  static readonly layer = Layer.effect(
    DestinationGuard,
    Effect.map(AppConfig, ({ webhookAllowPrivateNetworks }) =>
      DestinationGuard.of({
        allows: (url) =>
          webhookAllowPrivateNetworks
            ? Effect.succeed(true)
            : Effect.map(
              resolveAll(new URL(url).hostname),
              (addresses) => addresses.length > 0 && !addresses.some(isPrivate)
            )
      }))
  )
}

/** The undici `lookup` that refuses private addresses as the connection resolves its host (no DNS rebinding gap). */
const guardedLookup = (
  hostname: string,
  options: object,
  callback: (error: NodeJS.ErrnoException | null, address: string | Array<LookupAddress>, family?: number) => void
) =>
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: Array<LookupAddress>) => {
    if (error) return callback(error, [])
    const refused = addresses.find((entry) => isPrivate(entry.address))
    if (refused !== undefined) {
      return callback(
        Object.assign(new Error(`${hostname} resolves to ${refused.address}`), {
          code: DESTINATION_NOT_ALLOWED
        }),
        []
      )
    }
    if ("all" in options && options.all === true) return callback(null, addresses)
    const first = addresses[0]
    return first === undefined
      ? callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), [])
      : callback(null, first.address, first.family)
  })

/**
 * The start of a response's body, at most `RESPONSE_READ_LIMIT` bytes read. A body that declares its length within the
 * limit (the usual short answer; the client reads no more than the declared length) is read in one piece, which costs
 * far less than a stream; any other is streamed, and no more than the limit is kept of it.
 */
export const responseText = (response: HttpClientResponse.HttpClientResponse) => {
  const declared = response.headers["content-length"]
  if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) <= RESPONSE_READ_LIMIT) return response.text
  return Effect.map(
    response.stream.pipe(
      Stream.takeUntil(() => false),
      Stream.runFold(() => ({ text: "", bytes: 0 }), (acc, chunk: Uint8Array) =>
        acc.bytes >= RESPONSE_READ_LIMIT
          ? acc
          : { text: acc.text + Buffer.from(chunk).toString("utf8"), bytes: acc.bytes + chunk.length })
    ),
    (body) => body.text
  )
}

/** Sends one webhook request; never fails: every problem is a `SendResult`. */
export class WebhookSender extends Context.Service<WebhookSender, {
  readonly send: (request: OutboundRequest) => Effect.Effect<SendResult>
}>()("@cp/server/webhooks/WebhookSender") {
  /** Over undici: the system CAs plus `NODE_EXTRA_CA_CERTS`, the private-address guard unless allowed, no redirects. */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const config = yield* AppConfig
    const guard = yield* DestinationGuard
    const extraCa = Option.match(config.webhookExtraCaCerts, {
      onNone: () => [],
      onSome: (path) => [readFileSync(path, "utf8")]
    })
    const client = NodeHttpClient.layerUndiciOptions({
      connect: {
        // One secure context for every connection (building one from ~150 CAs per TLS handshake is costly).
        secureContext: createSecureContext({ ca: [...rootCertificates, ...extraCa] }),
        timeout: DELIVERY_TIMEOUT_MS,
        ...(config.webhookAllowPrivateNetworks ? {} : { lookup: guardedLookup })
      },
      headersTimeout: DELIVERY_TIMEOUT_MS,
      bodyTimeout: DELIVERY_TIMEOUT_MS
    })
    return Layer.effect(
      WebhookSender,
      Effect.map(HttpClient.HttpClient, (http) =>
        WebhookSender.of({
          send: (request) =>
            Effect.gen(function*() {
              if (!(yield* guard.allows(request.url))) {
                return { _tag: "Failed", reason: "destination_not_allowed" } as const
              }
              const response = yield* http.execute(
                HttpClientRequest.post(request.url).pipe(
                  HttpClientRequest.setHeaders({ ...request.headers, "user-agent": USER_AGENT }),
                  HttpClientRequest.bodyText(request.body, "application/json")
                )
              )
              const body = yield* responseText(response)
              return {
                _tag: "Answered",
                status: response.status,
                body: body.slice(0, RESPONSE_KEEP_LIMIT)
              } as const
            }).pipe(
              Effect.scoped,
              Effect.timeoutOrElse({
                duration: Duration.millis(DELIVERY_TIMEOUT_MS),
                orElse: () => Effect.succeed({ _tag: "Failed", reason: "timeout" } as const)
              }),
              Effect.catchCause((cause) =>
                Effect.succeed({ _tag: "Failed", reason: failureOf(Cause.squash(cause)) } as const)
              )
            )
        }))
    ).pipe(Layer.provide(client))
  }))
}

/** The fields of an attempt's outcome, before it is written. */
interface Outcome {
  readonly status: DeliveryStatus
  readonly attemptNumber: number
  readonly httpStatusCode: number | null
  readonly failureReason: FailureReason | null
  readonly nextRetryAt: Date | null
  readonly completedAt: Date | null
  readonly responseBody: string | null
}

/** Requests in flight per process at most (webhooks.md §3 Worker): `WORKER_LANES` loops of `WORKER_BATCH` each. */
export const WORKER_CONCURRENCY = 32
/**
 * Rounds run side by side, so one round's slowest request and its transaction never hold up all the others (a lane
 * claims its next batch while the others still send).
 */
export const WORKER_LANES = 2
/** Rows one round claims and tries at once. */
export const WORKER_BATCH = WORKER_CONCURRENCY / WORKER_LANES
/** A round whose outcomes could not be written retries the write after 20 ms, doubling, 10 times (20 s in all). */
export const WRITE_RETRY_BASE = Duration.millis(20)
export const WRITE_RETRIES = 10
/** How often a worker looks for due rows when nothing wakes it (PGlite and memory have no LISTEN). */
export const POLL_INTERVAL = Duration.seconds(1)
/** On PostgreSQL a notification wakes the worker; this poll only catches retries coming due. */
export const LISTEN_POLL_INTERVAL = Duration.seconds(5)

export class WebhookWorker extends Context.Service<WebhookWorker, {
  /** Claims one batch of due attempts and tries them all; how many it tried. */
  readonly runOnce: Effect.Effect<number>
  /** Tries one attempt this caller has already claimed with `token` (the test route). */
  readonly attempt: (row: DeliveryRow, token: string) => Effect.Effect<Option.Option<DeliveryRow>>
}>()("@cp/server/webhooks/WebhookWorker") {
  static readonly layer = Layer.effect(
    WebhookWorker,
    Effect.gen(function*() {
      const deliveries = yield* WebhookDeliveriesRepo
      const endpoints = yield* WebhookEndpointsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const sender = yield* WebhookSender
      const { kek } = yield* ServerKeys

      /** The lifecycle event of an attempt or endpoint (never fanned out). */
      const lifecycleEvent = (
        type: "webhook.delivery_succeeded" | "webhook.delivery_failed" | "webhook.disabled",
        row: DeliveryRow,
        outcome: Outcome,
        endpoint: EndpointRow
      ): NewEvent => ({
        orgId: row.orgId,
        type,
        actor: systemActor,
        subject: { kind: "webhook_endpoint", id: endpoint.id, name: endpoint.name },
        projectId: endpoint.projectId,
        data: {
          delivery_attempt_id: row.id,
          endpoint_id: row.endpointId,
          subscription_id: row.subscriptionId,
          source_event_id: row.eventId,
          source_event_type: row.eventType,
          http_status_code: outcome.httpStatusCode,
          failure_reason: outcome.failureReason,
          attempt_number: outcome.attemptNumber
        },
        description: type === "webhook.disabled"
          ? `Webhook endpoint ${endpoint.url} disabled`
          : `Webhook delivery ${row.id} ${type === "webhook.delivery_succeeded" ? "succeeded" : "failed"}`
      })
      const lifecycle = (...args: Parameters<typeof lifecycleEvent>) => events.record(lifecycleEvent(...args))

      /** Opened secrets by their sealed form (a sealed secret never changes; a rotation seals a new one). */
      const opened = new Map<string, string | undefined>()
      const openSealed = (sealed: string) => {
        if (!opened.has(sealed)) {
          if (opened.size >= 1024) opened.clear()
          opened.set(sealed, open(kek, sealed))
        }
        return opened.get(sealed)
      }

      /** The signed headers, with the previous secret's signature while its grace window lasts. */
      const headersFor = (endpoint: EndpointRow, row: DeliveryRow, now: Date): Record<string, string> => {
        const timestamp = Math.floor(now.getTime() / 1000)
        const headers: Record<string, string> = {
          "x-webhook-id": row.id,
          "x-webhook-signature": signatureHeader(openSealed(endpoint.sealedSecret) ?? "", timestamp, row.body)
        }
        if (
          endpoint.previousSealedSecret !== null && endpoint.previousSecretExpiresAt !== null &&
          endpoint.previousSecretExpiresAt > now
        ) {
          const previous = openSealed(endpoint.previousSealedSecret)
          if (previous !== undefined) {
            headers["x-webhook-signature-previous"] = signatureHeader(previous, timestamp, row.body)
          }
        }
        return headers
      }

      /** The outcome of a try that did not succeed: another try on the schedule, or terminal. */
      const failure = Effect.fnUntraced(function*(
        tryNumber: number,
        reason: FailureReason,
        httpStatusCode: number | null,
        responseBody: string | null,
        terminalNow: boolean
      ) {
        const now = yield* currentDate
        const delay = terminalNow || tryNumber >= MAX_ATTEMPTS ? undefined : retryDelayMs(tryNumber, yield* Random.next)
        const outcome: Outcome = {
          status: delay === undefined ? "failed" : "retrying",
          attemptNumber: tryNumber,
          httpStatusCode,
          failureReason: reason,
          nextRetryAt: delay === undefined ? null : new Date(now.getTime() + delay),
          completedAt: delay === undefined ? now : null,
          responseBody
        }
        return outcome
      })

      const disable = (endpoint: EndpointRow, reason: string, at: Date) =>
        endpoints.update({ ...endpoint, status: "disabled", disabledReason: reason, disabledAt: at, updatedAt: at })

      /** What the outcomes of one transaction have left: endpoint streaks, and endpoints disabled. */
      interface Batch {
        readonly streaks: Map<string, number>
        readonly disabled: Set<string>
      }
      const newBatch = (): Batch => ({ streaks: new Map(), disabled: new Set() })

      /** A try that was made (or skipped): what to write for it. */
      interface Tried {
        readonly row: DeliveryRow
        readonly token: string
        readonly endpoint: EndpointRow
        readonly outcome: Outcome
        readonly gone: boolean
      }

      /** Whether an outcome moves its endpoint's streak: terminal, and not skipped for a disabled endpoint. */
      const movesStreak = ({ outcome }: Tried) =>
        outcome.status !== "retrying" && outcome.failureReason !== "endpoint_disabled"

      /**
       * The streak and auto-disable of one written terminal outcome; run inside the round's transaction, endpoint by
       * endpoint in id order. A success on an endpoint without a streak writes no endpoint row (the hot path). `batch`
       * carries what the round's earlier outcomes left.
       */
      const writeStreak = ({ endpoint, gone, outcome, row }: Tried, batch: Batch) =>
        Effect.gen(function*() {
          const at = yield* currentDate
          const success = outcome.status === "success"
          if (success && (batch.streaks.get(endpoint.id) ?? endpoint.consecutiveFailures) === 0) return
          const streak = yield* endpoints.recordStreak({ endpointId: endpoint.id, success, at })
          if (Option.isNone(streak)) return
          batch.streaks.set(endpoint.id, streak.value.consecutiveFailures)
          if (streak.value.status !== "active") return
          // Exactly at the threshold: outcomes written side by side never disable (and announce) it twice.
          const reason = gone
            ? "gone"
            : !success && streak.value.consecutiveFailures === AUTO_DISABLE_THRESHOLD
            ? "repeated_delivery_failures"
            : undefined
          if (reason !== undefined && !batch.disabled.has(endpoint.id)) {
            batch.disabled.add(endpoint.id)
            yield* disable(streak.value, reason, at)
            yield* lifecycle("webhook.disabled", row, outcome, streak.value)
          }
        })

      /**
       * A round's outcomes in one transaction, its row locks taken in one global order so concurrent rounds (lanes,
       * processes) never wait on each other in a cycle: first every endpoint of the round, in id order, held against
       * deletion (`for key share`, which the outbox's inserts and the other rounds' streak updates pass); then the
       * attempts (rows this round alone has claimed) and their events, pipelined; then the streaks, endpoint by
       * endpoint in id order.
       */
      const writeRound = (tried: ReadonlyArray<Tried>) =>
        Effect.gen(function*() {
          yield* endpoints.holdInOrder([...new Set(tried.map((one) => one.endpoint.id))])
          const at = yield* currentDate
          const rows = yield* deliveries.completeMany(
            tried.map(({ outcome, row, token }) => ({ id: row.id, token, at, ...outcome }))
          )
          const byId = new Map(rows.map((row) => [row.id, row]))
          const written = tried.filter((one) => byId.has(one.row.id))
          // Terminal outcomes are announced on the log, in one write.
          yield* events.recordMany(written.flatMap((one) =>
            one.outcome.status === "retrying" ? [] : [
              lifecycleEvent(
                one.outcome.status === "success" ? "webhook.delivery_succeeded" : "webhook.delivery_failed",
                one.row,
                one.outcome,
                one.endpoint
              )
            ]
          ))
          const batch = newBatch()
          const streaks = written.filter(movesStreak)
            .map((one, order) => ({ one, order }))
            .sort((a, b) =>
              a.one.endpoint.id < b.one.endpoint.id ? -1 : a.one.endpoint.id > b.one.endpoint.id ? 1 : a.order - b.order
            )
          for (const { one } of streaks) yield* writeStreak(one, batch)
          return tried.map((one) => Option.fromUndefinedOr(byId.get(one.row.id)))
        })

      /**
       * Records a round whose requests were made. A failed write (a lost connection, a serialization failure) is
       * retried promptly, never the requests: once a receiver has answered, its answer is what must be kept. Only when
       * every retry failed are the rows left to their claims' expiry (and tried again: at least once).
       */
      const recordRound = (tried: ReadonlyArray<Tried>) =>
        tx.withTransaction(writeRound(tried)).pipe(
          Effect.sandbox,
          Effect.retry({ schedule: Schedule.exponential(WRITE_RETRY_BASE), times: WRITE_RETRIES }),
          Effect.catch((cause) =>
            Effect.logError("webhook outcomes not recorded; their claims expire and they are tried again", cause).pipe(
              Effect.as(tried.map(() => Option.none<DeliveryRow>()))
            )
          )
        )

      /** Makes one try of a claimed row to its endpoint (none when the endpoint is disabled): its outcome. */
      const tryOnce = (row: DeliveryRow, token: string, endpoint: EndpointRow): Effect.Effect<Tried> =>
        Effect.gen(function*() {
          const tryNumber = row.status === "retrying" ? row.attemptNumber + 1 : row.attemptNumber
          const tried = (outcome: Outcome, gone = false): Tried => ({ row, token, endpoint, outcome, gone })
          if (endpoint.status === "disabled") {
            return tried(yield* failure(tryNumber, "endpoint_disabled", null, null, true))
          }
          const now = yield* currentDate
          const result = yield* sender.send({
            url: endpoint.url,
            body: row.body,
            headers: headersFor(endpoint, row, now)
          })
          if (result._tag === "Failed") return tried(yield* failure(tryNumber, result.reason, null, null, false))
          const { body, status } = result
          if (status >= 200 && status < 300) {
            return tried({
              status: "success",
              attemptNumber: tryNumber,
              httpStatusCode: status,
              failureReason: null,
              nextRetryAt: null,
              completedAt: yield* currentDate,
              responseBody: body
            })
          }
          const gone = status === 410
          const reason: FailureReason = status >= 300 && status < 400 ? "redirect" : `http_${status}`
          return tried(yield* failure(tryNumber, reason, status, body, gone), gone)
        }).pipe(withJobSpan("webhook.deliver", row.traceContext))

      /** The endpoints of a batch, each read once; a deleted one (its attempts went with it) is absent. */
      const endpointsOf = (rows: ReadonlyArray<DeliveryRow>) =>
        Effect.map(
          Effect.forEach(
            [...new Map(rows.map((row) => [row.endpointId, row])).values()],
            (row) => endpoints.find({ orgId: row.orgId, endpointId: row.endpointId }),
            { concurrency: "unbounded" }
          ),
          (found) =>
            new Map(found.flatMap((endpoint) => Option.isSome(endpoint) ? [[endpoint.value.id, endpoint.value]] : []))
        )

      const attempt = (row: DeliveryRow, token: string): Effect.Effect<Option.Option<DeliveryRow>> =>
        Effect.gen(function*() {
          const endpoint = (yield* endpointsOf([row])).get(row.endpointId)
          if (endpoint === undefined) return Option.none<DeliveryRow>()
          const [written] = yield* recordRound([yield* tryOnce(row, token, endpoint)])
          return written ?? Option.none<DeliveryRow>()
        })

      /** One round: claim, try every row (bounded concurrency), then write all outcomes in one transaction. */
      const runOnce = Effect.gen(function*() {
        const now = yield* currentDate
        const token = randomUUID()
        const claimed = yield* deliveries.claim({
          now,
          until: new Date(now.getTime() + CLAIM_SECONDS * 1000),
          token,
          limit: WORKER_BATCH
        })
        if (claimed.length === 0) return 0
        const byId = yield* endpointsOf(claimed)
        const tried = yield* Effect.forEach(
          claimed.flatMap((row) => {
            const endpoint = byId.get(row.endpointId)
            return endpoint === undefined ? [] : [tryOnce(row, token, endpoint)]
          }),
          (effect) => effect,
          { concurrency: WORKER_BATCH }
        )
        yield* recordRound(tried)
        return claimed.length
      })

      return WebhookWorker.of({ runOnce, attempt })
    })
  )

  /**
   * The worker fiber of this server process: rounds while there is work, then a wait until a notification
   * (PostgreSQL) or the poll interval; stopped with the server's scope. A failed round is logged, never fatal.
   */
  static readonly background = Layer.effectDiscard(Effect.gen(function*() {
    const config = yield* AppConfig
    if (!config.webhookWorker) return
    const worker = yield* WebhookWorker
    const wake = yield* Latch.make(false)
    const listening = yield* listenForDeliveries(config.databaseUrl, wake)
    const interval = listening ? LISTEN_POLL_INTERVAL : POLL_INTERVAL
    const round = worker.runOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning("webhook delivery round failed", cause).pipe(Effect.as(0)))
    )
    const lane = Effect.gen(function*() {
      while (true) {
        // Closed before the round, so a notification that arrives while it runs still wakes the wait after it.
        yield* wake.close
        const tried = yield* round
        if (tried < WORKER_BATCH) yield* Effect.raceFirst(wake.await, Effect.sleep(interval))
      }
    })
    for (let i = 0; i < WORKER_LANES; i++) yield* Effect.forkScoped(lane)
  }))
}

/** On PostgreSQL, a fiber that opens the latch on every notification of new deliveries; false elsewhere. */
const listenForDeliveries = (databaseUrl: Option.Option<unknown>, wake: Latch.Latch) =>
  Effect.gen(function*() {
    if (Option.isNone(databaseUrl)) return false
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(pg)) return false
    const notifications = yield* pg.value.listen(DELIVERIES_CHANNEL).pipe(Effect.option)
    if (Option.isNone(notifications)) return false
    yield* Queue.take(notifications.value).pipe(
      Effect.andThen(wake.open),
      Effect.forever,
      Effect.catchCause((cause) => Effect.logWarning("webhook LISTEN stopped; polling only", cause)),
      Effect.forkScoped
    )
    return true
  })
