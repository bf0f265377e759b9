/**
 * Provider webhook ingress (Authentication §8; integrations-agents.md §3): `x-hub-signature-256` is verified over
 * the raw bytes before anything is parsed (fails closed: no secret, no signature or a wrong one is 401 and stores
 * nothing); a verified delivery is stored first (raw bytes and headers, deduplicated by `x-scmhost-delivery`), the
 * answer goes out at once, and normalization runs in the background: `scm.*` events, one per linked project, on
 * each project's workspace log, or a connection status change for `installation` events. Replay re-runs the same
 * normalization from the stored row.
 */
import {
  type InboundDelivery,
  type InboundDeliveryId,
  IntegrationConnection,
  type IntegrationConnectionId,
  NotFound,
  SCMHOST,
  Unauthenticated,
  wireError
} from "@cp/domain"
import {
  type ConnectionRow,
  EnvironmentsRepo,
  InboundDeliveriesRepo,
  type InboundDeliveryRow,
  IntegrationConnectionsRepo,
  RepoLinksRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option, Redacted, Schema, Scope } from "effect"
import { createHmac } from "node:crypto"
import { AppConfig } from "../platform/config.ts"
import { safeEqual } from "../platform/crypto.ts"
import { apiJson, EventLog, systemActor } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { environmentFor, installationIdOf, installationTransition, scmFactsOf } from "./rules.ts"
import { toConnection, toDelivery, toRepoLink } from "./service.ts"

const Payload = Schema.fromJsonString(Schema.Record(Schema.String, Schema.Unknown))

/** The headers kept with a delivery: what the provider sent about it, never a credential. */
const KEPT_HEADERS = ["content-type", "user-agent", "x-scmhost-event", "x-scmhost-delivery", "x-hub-signature-256"]

/** `sha256=<hex>` of the raw body under `secret`, compared in constant time. */
export const signatureMatches = (secret: string, body: Uint8Array, header: string | undefined): boolean => {
  if (header === undefined || !header.startsWith("sha256=")) return false
  const expected = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`
  return safeEqual(expected, header.trim())
}

const unauthenticated = () =>
  wireError(Unauthenticated, "The webhook signature is missing or does not match", { reason: "bad_signature" })

export class IngressService extends Context.Service<IngressService, {
  /** Verifies, stores and hands the delivery to the background normalizer; 401 before anything is stored. */
  readonly receive: (
    headers: Readonly<Record<string, string | undefined>>,
    body: Uint8Array
  ) => Effect.Effect<{ readonly received: boolean; readonly deliveryId: InboundDeliveryId | null }, Unauthenticated>
  /** Re-runs normalization of a stored delivery of this connection. */
  readonly replay: (
    connection: ConnectionRow,
    deliveryId: InboundDeliveryId
  ) => Effect.Effect<{ readonly delivery: InboundDelivery }, NotFound>
}>()("@cp/server/integrations/IngressService") {
  static readonly layer = Layer.effect(
    IngressService,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const connections = yield* IntegrationConnectionsRepo
      const links = yield* RepoLinksRepo
      const deliveries = yield* InboundDeliveriesRepo
      const environments = yield* EnvironmentsRepo
      const events = yield* EventLog
      const tx = yield* Transactor
      const scope = yield* Scope.Scope
      const secret = Option.map(config.scmhostWebhookSecret, Redacted.value)

      const settle = (
        row: InboundDeliveryRow,
        status: InboundDeliveryRow["status"],
        failureReason: string | null,
        connectionId: IntegrationConnectionId | null
      ) =>
        Effect.flatMap(
          currentDate,
          (at) =>
            deliveries.setOutcome({ id: row.id, status, failureReason, connectionId, processedAt: at }).pipe(
              Effect.map(Option.getOrElse(() => row))
            )
        )

      /** An `installation` webhook: the bound connection's status follows the provider's. */
      const installationEvent = Effect.fnUntraced(function*(
        row: InboundDeliveryRow,
        connection: ConnectionRow,
        action: string | null
      ) {
        const status = installationTransition(action)
        if (status === undefined || connection.status === status || connection.status === "pending") {
          return yield* settle(row, "skipped", "unsupported_event", connection.id)
        }
        const at = yield* currentDate
        const next: ConnectionRow = {
          ...connection,
          status,
          updatedAt: at,
          ...(status === "revoked" ? { revokedAt: at } : {}),
          ...(status === "suspended" ? { suspendedAt: at } : {}),
          ...(status === "active" ? { suspendedAt: null } : {})
        }
        return yield* tx.withTransaction(Effect.gen(function*() {
          const stored = yield* connections.update(next).pipe(
            Effect.catchTag("UniqueViolation", Effect.die),
            Effect.map(Option.getOrElse(() => next))
          )
          yield* events.record({
            orgId: stored.orgId,
            type: status === "revoked" ? "integration.revoked" : "integration.updated",
            actor: systemActor,
            subject: { kind: "integration_connection", id: stored.id, name: stored.displayName },
            data: {
              connection: apiJson(IntegrationConnection, toConnection(stored)),
              reason: `installation.${action}`
            },
            description: `Integration ${stored.provider} connection ${stored.displayName} ${status} by the provider`
          })
          return yield* settle(row, "emitted", null, stored.id)
        }))
      })

      /** Normalizes one stored delivery; every outcome is recorded on the row. */
      const normalize = Effect.fnUntraced(function*(row: InboundDeliveryRow) {
        const payload = Schema.decodeUnknownOption(Payload)(Buffer.from(row.bodyBase64, "base64").toString("utf8"))
        if (Option.isNone(payload)) return yield* settle(row, "failed", "malformed_json", row.connectionId)
        const installationId = installationIdOf(payload.value)
        const connection = installationId === null
          ? Option.none()
          : yield* connections.findByInstallation({ provider: SCMHOST, installationId })
        if (Option.isNone(connection)) return yield* settle(row, "skipped", "unknown_installation", null)
        const action = typeof payload.value["action"] === "string" ? payload.value["action"] : null
        if (row.event === "installation") return yield* installationEvent(row, connection.value, action)
        if (connection.value.status !== "active") {
          return yield* settle(row, "skipped", `connection_${connection.value.status}`, connection.value.id)
        }
        const facts = scmFactsOf(row.event, payload.value)
        if ("skip" in facts) return yield* settle(row, "skipped", facts.skip, connection.value.id)
        const linked = yield* links.liveForRepo({
          connectionId: connection.value.id,
          repoExternalId: facts.repoExternalId
        })
        if (linked.length === 0) return yield* settle(row, "skipped", "no_repo_link", connection.value.id)
        yield* settle(row, "attributed", null, connection.value.id)
        return yield* tx.withTransaction(Effect.gen(function*() {
          const at = yield* currentDate
          for (const link of linked) {
            const environmentSlug = environmentFor(toRepoLink(link).branchEnvMap, facts.branch)
            // A push to a mapped branch is use of that environment: the idle sweep must not archive it, and an
            // archived one comes back.
            const environment = environmentSlug === null || facts.type !== "scm.push"
              ? Option.none()
              : yield* environments.markUsedBySlug({
                orgId: link.orgId,
                projectId: link.projectId,
                slug: environmentSlug,
                at
              })
            yield* events.record({
              orgId: link.orgId,
              projectId: link.projectId,
              environmentId: Option.match(environment, { onNone: () => null, onSome: (env) => env.id }),
              type: facts.type,
              actor: systemActor,
              subject: { kind: "repo_link", id: link.id, name: link.repoFullName },
              data: {
                repoFullName: facts.repoFullName,
                ref: facts.ref,
                sha: facts.sha,
                branch: facts.branch,
                environmentSlug,
                sender: facts.sender,
                url: facts.url,
                deliveryId: row.id,
                repoLinkId: link.id
              },
              description: `${facts.type} on ${facts.repoFullName}${facts.branch === null ? "" : ` (${facts.branch})`}`
            })
          }
          return yield* settle(row, "emitted", null, connection.value.id)
        }))
      })

      /** Normalization that never fails: a defect is recorded as `failed` with a safe reason. */
      const process = (row: InboundDeliveryRow) =>
        normalize(row).pipe(
          Effect.catchCause(() =>
            Effect.logWarning("Inbound delivery normalization failed").pipe(
              Effect.annotateLogs({ deliveryId: row.id, event: row.event }),
              Effect.andThen(settle(row, "failed", "processing_error", row.connectionId))
            )
          )
        )

      return IngressService.of({
        receive: Effect.fn("IngressService.receive")(function*(headers, body) {
          // Fail closed: without a configured secret nothing verifies.
          if (Option.isNone(secret) || !signatureMatches(secret.value, body, headers["x-hub-signature-256"])) {
            return yield* unauthenticated()
          }
          const at = yield* currentDate
          const id = mint.inboundDelivery(at.getTime())
          const deliveryKey = headers["x-scmhost-delivery"]?.slice(0, 255) || id
          const event = headers["x-scmhost-event"]?.slice(0, 64) || "unknown"
          const parsed = Schema.decodeUnknownOption(Payload)(Buffer.from(body).toString("utf8"))
          const row: InboundDeliveryRow = {
            id,
            provider: SCMHOST,
            deliveryKey,
            connectionId: null,
            installationId: Option.match(parsed, { onNone: () => null, onSome: installationIdOf }),
            event,
            action: Option.match(parsed, {
              onNone: () => null,
              onSome: (payload) => typeof payload["action"] === "string" ? payload["action"].slice(0, 64) : null
            }),
            status: "received",
            signatureOk: true,
            failureReason: null,
            headersJson: JSON.stringify(
              Object.fromEntries(
                KEPT_HEADERS.flatMap((name) => headers[name] === undefined ? [] : [[name, headers[name]]])
              )
            ),
            bodyBase64: Buffer.from(body).toString("base64"),
            receivedAt: at,
            processedAt: null
          }
          const stored = yield* deliveries.insert(row).pipe(
            Effect.as(true),
            Effect.catchTag("UniqueViolation", () => Effect.succeed(false))
          )
          if (!stored) {
            // A repeat of a delivery already stored: answered again, not processed again.
            const existing = yield* deliveries.findByKey({ provider: SCMHOST, deliveryKey })
            return { received: true, deliveryId: Option.match(existing, { onNone: () => null, onSome: (r) => r.id }) }
          }
          // The provider gets its answer now; normalization finishes in the background.
          yield* Effect.forkIn(process(row), scope)
          return { received: true, deliveryId: id }
        }),

        replay: Effect.fn("IngressService.replay")(function*(connection, deliveryId) {
          const row = yield* deliveries.findForConnection({ connectionId: connection.id, deliveryId }).pipe(
            orFail(() => wireError(NotFound, "Inbound delivery not found", { deliveryId }))
          )
          const reset = yield* settle(row, "received", null, row.connectionId)
          const done = yield* process(reset)
          return { delivery: toDelivery(done) }
        })
      })
    })
  )
}
