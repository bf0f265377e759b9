/**
 * The API reference's own words: the introduction every reader of `/docs` and `/openapi.json` starts from, the
 * `doc(summary, description)` annotation each endpoint carries, and the finishing touches the schemas alone cannot
 * say (each parameter's description beside it, `limit` as an integer, the `Idempotency-Key` header on writes).
 */
import { Schema } from "effect"
import { OpenApi } from "effect/http-api"
import { isText } from "./text.ts"

/** An endpoint's summary (one line, imperative) and optional description, for the reference and the CLI help. */
export const doc = (summary: string, description?: string) =>
  OpenApi.annotations(description === undefined ? { summary } : { summary, description })

/**
 * `Text` with a description the reference shows. The description sits before the check: a check that JSON Schema
 * cannot express (as `Text`'s is) drops the annotations attached to it.
 */
export const describedText = (description: string) => Schema.String.annotate({ description }).check(isText)

/** The page size every list accepts: 1 to 100, 50 when absent. */
export const PAGE_LIMIT = { minimum: 1, maximum: 100, default: 50 } as const

/** Methods whose requests honour `Idempotency-Key` (the server's edge applies it to exactly these). */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** The characters and length an `Idempotency-Key` may have. */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9\-_.:]{1,255}$/

export const introduction = `
A multi-tenant control plane served as JSON over HTTP: identity and sessions, workspaces, API keys, members and
invitations, teams and role-based access, projects and environments, configuration, secrets and an audit log.

## Authentication

Every route except sign-in, \`/health\` and the development outbox takes \`Authorization: Bearer <token>\`. The token
is either a **session token** (\`sps_ses_…\`, returned once by \`POST /v1/auth/login/complete\`, valid 30 days) or an
**API key** (\`sk_…\`, returned once by \`POST /v1/organizations/{orgId}/api-keys\`, pinned to its workspace and
optionally to one project). Profile and session routes accept session tokens only (403 for an API key).

To try a request on this page, paste a token into the **Bearer Token** field of the authentication panel. In
development mode, sign in with \`POST /v1/auth/login/start\`, read the code from \`GET /v1/dev/outbox?to=<email>\`
and finish with \`POST /v1/auth/login/complete\`; the answer's \`data.token\` is the token.

## The envelope

Bodies are JSON (\`Content-Type: application/json\`); timestamps are ISO 8601 UTC with milliseconds. Every success
answers \`{ "data": { … }, "meta": { "requestId": "req_…", "cursor": null } }\`. Every response also carries the
\`X-Request-Id\` header with the same id: quote it when reporting a problem, it ties the request to the server's
logs and traces.

## Errors

Every non-2xx answer is \`{ "error": { "code", "message", "details", "requestId" } }\`. \`code\` is stable and meant
for programs, \`message\` is for people and may change, \`details\` depends on the code (possibly \`{}\`).

| Code | Status | Meaning | Retry |
|---|---|---|---|
| \`bad_request\` | 400 | malformed request (for example, JSON that does not parse) | no |
| \`unauthenticated\` | 401 | missing, invalid, expired or revoked credential | no |
| \`forbidden\` | 403 | the caller lacks the permission (or an API key on a session-only route) | no |
| \`not_found\` | 404 | the resource or route is missing, or the workspace reference does not resolve | no |
| \`unsupported\` | 405, 415 | method not allowed (the \`Allow\` header lists the right ones) or body not JSON | no |
| \`conflict\` | 409 | duplicate slug, concurrent change, an \`Idempotency-Key\` still in progress | re-read first |
| \`precondition_failed\` | 412 | a precondition is unmet (plan limit, expired or used login code) | re-read first |
| \`payload_too_large\` | 413 | the body is larger than the server accepts | no |
| \`validation_failed\` | 422 | \`details.fields\` maps each failing field to its messages | no |
| \`rate_limited\` | 429 | a bucket is empty: \`details.retryAfterSeconds\`, \`Retry-After\` header | after the wait |
| \`internal_error\` | 500 | unexpected failure, logged with the request id | with backoff |
| \`provider_unavailable\` | 502 | an upstream provider did not answer | with backoff |
| \`service_unavailable\` | 503 | the service or its database is unavailable | with backoff |

An unknown code is not retryable; fall back on the HTTP status.

## Pagination

Lists take \`limit\` (an integer, ${PAGE_LIMIT.minimum} to ${PAGE_LIMIT.maximum}, default ${PAGE_LIMIT.default}) and
\`cursor\`. The next page's cursor is in \`meta.cursor\`; \`null\` means the end (never judge the end by a short page).
Send the same filters with every page of one walk. Cursors are opaque: do not parse, build or keep them.

## Idempotency

\`POST\`, \`PUT\`, \`PATCH\` and \`DELETE\` accept an \`Idempotency-Key\` header (1 to 255 letters, digits,
\`-\`, \`_\`, \`.\`, \`:\`). The first answer below 500 (except 429) is kept for 24 hours per caller, method,
path and key; a retry with the same body gets that answer again with \`Idempotent-Replayed: true\`, a retry with
another body gets 422 \`validation_failed\`, and a retry while the first is still running gets 409 \`conflict\`.

## Rate limits

Sign-in is limited to 10 requests per identity and 60 per workspace per minute, the audit log to 120 per identity
and 600 per workspace per minute. Past a limit the answer is 429 \`rate_limited\` with \`Retry-After\` in seconds.

## Workspaces: references and the alias

\`{orgId}\` in a path accepts three spellings of one workspace: its id \`org_…\`, its public id \`ws_…\`, or its slug.
A reference the caller cannot see answers 404. \`/v1/workspaces/…\` is an alias of \`/v1/organizations/…\`; answers
on the alias carry \`workspaceId\` next to every \`orgId\`.
`.trim()

// The generated document, as far as the finishing touches read and write it.
type Json = { [key: string]: unknown }
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null
const objectAt = (value: Json, key: string): Json => {
  const found = value[key]
  return isObject(found) ? found : {}
}

const idempotencyKeyParameter = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description: "Makes a retry safe: the first answer is replayed for 24 hours (see Idempotency in the introduction).",
  schema: { type: "string", pattern: IDEMPOTENCY_KEY_PATTERN.source, maxLength: 255 }
}

const limitSchema = { type: "integer", ...PAGE_LIMIT }

const finishParameter = (parameter: unknown): unknown => {
  if (!isObject(parameter)) return parameter
  const schema = objectAt(parameter, "schema")
  const isLimit = parameter["in"] === "query" && parameter["name"] === "limit"
  const description = typeof schema["description"] === "string"
    ? schema["description"]
    : isLimit
    ? `Page size, ${PAGE_LIMIT.minimum} to ${PAGE_LIMIT.maximum} (default ${PAGE_LIMIT.default}).`
    : undefined
  const { description: _, ...rest } = schema
  return {
    ...parameter,
    ...(description === undefined ? {} : { description }),
    schema: isLimit ? limitSchema : rest
  }
}

const finishOperation = (method: string, operation: unknown): unknown => {
  if (!isObject(operation)) return operation
  const parameters = Array.isArray(operation["parameters"]) ? operation["parameters"].map(finishParameter) : []
  return {
    ...operation,
    parameters: IDEMPOTENT_METHODS.has(method.toUpperCase()) ? [...parameters, idempotencyKeyParameter] : parameters
  }
}

/**
 * The finishing touches on the generated document: every parameter's description beside it (where the reference
 * shows it), `limit` as the integer it is, and `Idempotency-Key` on every write.
 */
export const finishReference = (spec: Json): Json => {
  const paths = objectAt(spec, "paths")
  return {
    ...spec,
    paths: Object.fromEntries(
      Object.entries(paths).map(([path, item]) => [
        path,
        isObject(item)
          ? Object.fromEntries(Object.entries(item).map(([method, op]) => [method, finishOperation(method, op)]))
          : item
      ])
    )
  }
}
