/**
 * The Node HTTP server the app is served on, with the limits Node enforces before a request reaches the router: a
 * request's headers must arrive within 10 s and the whole request within 30 s, and the answers Node gives itself
 * (400 for a malformed request, 408 when a limit is hit, 431 for oversized headers) carry the error envelope. And a
 * deadline for the answer: a request still unanswered after 8 s (a database that stopped answering holds every
 * statement) gets 503 `service_unavailable` with `Retry-After`, and its work is interrupted.
 */
import { createServer, type Server, type ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { customMethodUrl } from "./customMethods.ts"
import { newId } from "./ids.ts"

export interface NodeServerLimits {
  /** Milliseconds for a request's headers to arrive (Node's `headersTimeout`). */
  readonly headersTimeoutMs: number
  /** Milliseconds for the whole request, body included (Node's `requestTimeout`). */
  readonly requestTimeoutMs: number
  /** How often Node checks both limits (`connectionsCheckingInterval`): a late request may live this much longer. */
  readonly checkIntervalMs: number
  /** Milliseconds for the answer to start once the request arrived, before it is answered 503 (the contract: 10 s). */
  readonly deadlineMs: number
}

/** Seconds a client should wait before retrying a 503 `service_unavailable`. */
export const RETRY_AFTER_SECONDS = 5

export const DEFAULT_NODE_LIMITS: NodeServerLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
  deadlineMs: 8_000
}

/** `rawErrorResponse`'s code for a request that was not answered within the deadline. */
const DEADLINE_PASSED = "DEADLINE_PASSED"

const REASONS: Readonly<Record<number, string>> = {
  400: "Bad Request",
  408: "Request Timeout",
  413: "Content Too Large",
  431: "Request Header Fields Too Large",
  503: "Service Unavailable"
}

/** The status and envelope Node's parser errors get; the rest of the codes are malformed requests (400). */
const answerFor = (
  code: string | undefined
): { readonly status: number; readonly code: string; readonly message: string } => {
  switch (code) {
    case DEADLINE_PASSED:
      return { status: 503, code: "service_unavailable", message: "The service did not answer in time; retry later" }
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, code: "bad_request", message: "Request headers are too large" }
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return { status: 413, code: "payload_too_large", message: "Request chunk extensions are too large" }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, code: "bad_request", message: "The request was not received in time" }
    default:
      return { status: 400, code: "bad_request", message: "Malformed HTTP request" }
  }
}

/** A complete HTTP/1.1 answer with the error envelope, written straight to the socket (there is no response object). */
export const rawErrorResponse = (errorCode: string | undefined): string => {
  const answer = answerFor(errorCode)
  const requestId = newId("req_", Date.now())
  const retry = answer.status === 503
  const details = retry ? { retryAfterSeconds: RETRY_AFTER_SECONDS } : {}
  const body = JSON.stringify({
    error: { code: answer.code, message: answer.message, details, requestId }
  })
  return [
    `HTTP/1.1 ${answer.status} ${REASONS[answer.status] ?? "Bad Request"}`,
    "content-type: application/json",
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${requestId}`,
    ...(retry ? [`retry-after: ${RETRY_AFTER_SECONDS}`] : []),
    "connection: close",
    "",
    body
  ].join("\r\n")
}

/** A Node HTTP server with the limits above (or others, for tests) and enveloped parser errors. */
export const makeNodeServer = (limits: NodeServerLimits = DEFAULT_NODE_LIMITS): Server => {
  const server = createServer({
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs
  })
  // The response in progress on each connection, so a late parser error never corrupts an answer already started.
  const responding = new WeakMap<Duplex, ServerResponse>()
  server.prependListener("request", (request, response) => {
    // `LOCK`/`UNLOCK` where the API serves them: the POST route of that verb (see customMethods.ts).
    const customUrl = request.method === undefined || request.url === undefined
      ? undefined
      : customMethodUrl(request.method, request.url)
    if (customUrl !== undefined) {
      request.method = "POST"
      request.url = customUrl
    }
    const socket = request.socket
    responding.set(socket, response)
    // Past the deadline the answer goes straight onto the connection, which then closes: the router sees its client
    // leave and interrupts the work (without waiting for it, as a client that went away), so the answer is not
    // held back by finalizers that wait on the same stalled database. One timer per request.
    // A body still streaming into a handler that reads it (an object upload of up to 64 MiB) is progress, not a
    // stall: the deadline then counts from the body's end (Node's `requestTimeout` still bounds the whole request).
    const expire = () => {
      if (response.headersSent || !socket.writable) return
      if (request.readableDidRead && !request.complete) {
        request.once("end", () => {
          deadline = setTimeout(expire, limits.deadlineMs)
        })
        return
      }
      socket.end(rawErrorResponse(DEADLINE_PASSED))
    }
    let deadline = setTimeout(expire, limits.deadlineMs)
    response.once("close", () => {
      clearTimeout(deadline)
      if (responding.get(socket) === response) responding.delete(socket)
    })
  })
  // Node's own answer, with the envelope: written only when nothing of a response went out yet (as Node does), then
  // the connection is closed. A client that reset the connection gets no answer.
  server.on("clientError", (error: Error & { readonly code?: string }, socket: Duplex) => {
    if (error.code !== "ECONNRESET" && socket.writable && responding.get(socket)?.headersSent !== true) {
      socket.end(rawErrorResponse(error.code))
    } else {
      socket.destroy()
    }
  })
  return server
}
