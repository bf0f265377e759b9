/**
 * The benchmark's yardstick: a minimal `node:http` + `pg` server for the two benchmarked routes, doing per request
 * the same database work as the real server on the same database and schema, with nothing else (no framework, no
 * schemas, no middleware). `bench/run.ts` starts it as a child process; it is not part of the product.
 *
 * - `GET /v1/organizations/{ref}`: parses the `sps_ses_<id>.<secret>` bearer token, reads the session by id together
 *   with the workspace and the caller's role bindings on it and on its account root (the one statement of
 *   `SessionsRepo.findWithWorkspace`), compares sha256(secret) with `secret_hash` (not revoked, not expired), checks
 *   `organization.read`, and answers the `{ data: { organization }, meta }` envelope with `x-request-id`.
 * - `POST /v1/auth/login/start`: the statements the real server sends, in its order (user by email, the auth
 *   rate-limit charge, in a transaction only when two buckets are charged, the challenge together with its security
 *   event, the outbox row; the texts of `signInStatements.ts`); no mail is sent.
 * - `GET /health`: `select 1`, so the runner can wait for readiness the same way for both servers.
 *
 * Environment (the real server's names): `PORT`, `HOST` (default 127.0.0.1), and `DATABASE_URL` (a pool of pg's
 * default size, 10) or else `DATA_DIR`: that PGlite data directory opened in this process and served over an
 * in-process `PGLiteSocketServer` with `maxConnections: 1` to a pool of exactly one connection, as the real server's
 * embedded mode does. SIGTERM/SIGINT close everything and exit 0.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import pg from "pg"
// Import-free modules: the statement text the real server sends, none of its code.
import {
  challengeWithEventSql,
  chargeBucketSql,
  insertMailSql,
  userByEmailSql
} from "../packages/persistence/src/signInStatements.ts"
import { sessionOnWorkspaceSql } from "../packages/persistence/src/workspaces/resolution.ts"

const HOST = process.env["HOST"] ?? "127.0.0.1"
const PORT = Number(process.env["PORT"] ?? "8090")
const DATABASE_URL = process.env["DATABASE_URL"] ?? ""
const DATA_DIR = process.env["DATA_DIR"] ?? ""

// ---------------------------------------------------------------------------------------------------------------
// Statements: the text the real server sends (see the repositories named beside each), as named prepared statements
// because the real server's client prepares every statement too. The workspace read is `sessionOnWorkspaceSql` itself.

/** `OrganizationsRepo.findBySlug` (the auth limit's workspace bucket); the others are imported above. */
const ORG_BY_SLUG = "select * from organizations where slug = $1"

// ---------------------------------------------------------------------------------------------------------------
// Ids: prefixed ULIDs and UUIDv7, from a pool of random bytes (as a hand-written server would).

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
let entropy = randomBytes(4096)
let entropyAt = 0
const randomByte = (): number => {
  if (entropyAt === entropy.length) {
    entropy = randomBytes(4096)
    entropyAt = 0
  }
  return entropy[entropyAt++] ?? 0
}

const ulid = (now: number): string => {
  let time = ""
  for (let i = 0, ms = now; i < 10; i++, ms = Math.floor(ms / 32)) time = CROCKFORD.charAt(ms % 32) + time
  let random = ""
  for (let i = 0; i < 16; i++) random += CROCKFORD.charAt(randomByte() & 31)
  return time + random
}

const uuidv7 = (now: number): string => {
  const bytes = Buffer.alloc(16)
  bytes.writeUIntBE(now, 0, 6)
  for (let i = 6; i < 16; i++) bytes[i] = randomByte()
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x70
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80
  const hex = bytes.toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

// ---------------------------------------------------------------------------------------------------------------
// Wire helpers.

const send = (res: ServerResponse, status: number, requestId: string, body: unknown): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "x-request-id": requestId
  })
  res.end(text)
}

const ok = (res: ServerResponse, requestId: string, data: unknown): void =>
  send(res, 200, requestId, { data, meta: { requestId, cursor: null } })

const fail = (
  res: ServerResponse,
  status: number,
  requestId: string,
  code: string,
  message: string,
  details: Record<string, unknown> = {}
): void => send(res, status, requestId, { error: { code, message, details, requestId } })

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

// ---------------------------------------------------------------------------------------------------------------
// The rules the real server applies on these routes.

const BEARER = /^Bearer\s+(\S+)\s*$/i
const SESSION_TOKEN = /^sps_(ses_[0-9A-HJKMNP-TV-Z]{26})\.([0-9a-f]{64})$/
const WORKSPACE_PATH = /^\/v1\/organizations\/([^/?]+)$/
const EMAIL = /^\s*[^\s@]+@[^\s@]+\.[^\s@]+\s*$/

/** The roles that hold `organization.read` (packages/domain/src/access.ts); project roles never do. */
const ORG_READ_ROLES: ReadonlySet<string> = new Set(["owner", "admin", "builder", "viewer", "billing_admin"])

const CHALLENGE_TTL_MS = 10 * 60 * 1000
const AUTH_WINDOW_SECONDS = 60
const AUTH_IDENTITY_LIMIT = 10
const AUTH_ORG_LIMIT = 60

const sha256Hex = (value: string): string => createHash("sha256").update(value).digest("hex")

const safeEqual = (a: string, b: string): boolean => {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}

const maskEmail = (email: string): string => {
  const at = email.lastIndexOf("@")
  return `${email.slice(0, at).charAt(0)}***${email.slice(at)}`
}

const randomDigits = (length: number): string => {
  let digits = ""
  for (let i = 0; i < length; i++) digits += randomInt(0, 10).toString()
  return digits
}

interface Binding {
  readonly orgId: string
  readonly role: string
  readonly scopeKind: string
}

/** The workspace object of `sessionOnWorkspaceSql` (JSON: camelCase keys, timestamps as epoch milliseconds). */
interface Workspace {
  readonly organization: {
    readonly id: string
    readonly publicId: string
    readonly name: string
    readonly slug: string
    readonly kind: string
    readonly accountId: string
    readonly isAccountRoot: boolean
    readonly createdAt: number
  }
  readonly bindings: ReadonlyArray<Binding>
}

// ---------------------------------------------------------------------------------------------------------------
// The database.

interface Database {
  readonly pool: pg.Pool
  readonly close: () => Promise<void>
}

const openDatabase = async (): Promise<Database> => {
  if (DATABASE_URL !== "") {
    const pool = new pg.Pool({ connectionString: DATABASE_URL })
    return { pool, close: () => pool.end() }
  }
  if (DATA_DIR === "") throw new Error("baseline: set DATABASE_URL or DATA_DIR")
  const db = await PGlite.create({ dataDir: DATA_DIR })
  const socket = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 1 })
  await socket.start()
  const port = Number(socket.getServerConn().split(":").at(-1))
  const pool = new pg.Pool({ host: "127.0.0.1", port, user: "postgres", database: "postgres", max: 1, min: 1 })
  return {
    pool,
    close: async () => {
      await pool.end()
      await socket.stop()
      await db.close()
    }
  }
}

const { pool, close } = await openDatabase()

/** The HMAC key for login codes: the one the real server keeps in the database in development, so codes match. */
const signingKey = await pool
  .query<{ value: string }>("select value from server_secrets where name = 'token_signing_key'")
  .then((result) => Buffer.from(result.rows[0]?.value ?? randomBytes(32).toString("base64"), "utf8"))

// ---------------------------------------------------------------------------------------------------------------
// Routes.

const getOrganization = async (req: IncomingMessage, res: ServerResponse, ref: string, requestId: string) => {
  const token = BEARER.exec(req.headers.authorization ?? "")?.[1]
  const parsed = token === undefined ? null : SESSION_TOKEN.exec(token)
  const sessionId = parsed?.[1]
  const secret = parsed?.[2]
  if (sessionId === undefined || secret === undefined) {
    return fail(res, 401, requestId, "unauthenticated", "Missing, invalid, expired or revoked credential")
  }
  const secretHash = sha256Hex(secret)
  const { rows } = await pool.query<{
    userId: string
    secretHash: string
    expiresAt: Date
    revokedAt: Date | null
    workspace: Workspace | null
  }>({ name: "session_on_workspace", text: sessionOnWorkspaceSql, values: [sessionId, ref] })
  const session = rows[0]
  if (
    session === undefined || session.revokedAt !== null || session.expiresAt.getTime() <= Date.now() ||
    !safeEqual(session.secretHash, secretHash)
  ) {
    return fail(res, 401, requestId, "unauthenticated", "Missing, invalid, expired or revoked credential")
  }
  const workspace = session.workspace
  if (workspace === null) return fail(res, 404, requestId, "not_found", "Workspace not found")
  const org = workspace.organization
  // Bindings on the workspace apply directly; on its account root they cascade, except project-scoped ones.
  const grants = workspace.bindings.filter((b) => b.orgId === org.id || b.scopeKind !== "project")
  if (grants.length === 0) return fail(res, 404, requestId, "not_found", "Workspace not found")
  if (!grants.some((grant) => grant.scopeKind !== "project" && ORG_READ_ROLES.has(grant.role))) {
    return fail(res, 403, requestId, "forbidden", "Missing permission organization.read", {
      permission: "organization.read"
    })
  }
  ok(res, requestId, {
    organization: {
      id: org.id,
      name: org.name,
      slug: org.slug,
      workspaceRef: org.publicId,
      accountId: org.accountId,
      kind: org.kind,
      isAccountRoot: org.isAccountRoot,
      createdAt: new Date(org.createdAt).toISOString()
    }
  })
}

/** Runs `work` in a transaction on one pooled connection; `work` returning false rolls back. */
const inTransaction = async (work: (client: pg.PoolClient) => Promise<boolean>): Promise<boolean> => {
  const client = await pool.connect()
  try {
    await client.query("BEGIN")
    const commit = await work(client)
    await client.query(commit ? "COMMIT" : "ROLLBACK")
    return commit
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined)
    throw error
  } finally {
    client.release()
  }
}

const loginStart = async (req: IncomingMessage, res: ServerResponse, requestId: string) => {
  if (!(req.headers["content-type"] ?? "").startsWith("application/json")) {
    return fail(res, 415, requestId, "unsupported", "Request body must be application/json")
  }
  let payload: unknown
  try {
    payload = JSON.parse(await readBody(req))
  } catch {
    return fail(res, 400, requestId, "bad_request", "Request body is not valid JSON")
  }
  const rawEmail = typeof payload === "object" && payload !== null ? (payload as { email?: unknown }).email : undefined
  if (typeof rawEmail !== "string" || rawEmail.length > 254 || !EMAIL.test(rawEmail)) {
    return fail(res, 422, requestId, "validation_failed", "Validation failed", {
      fields: { email: ["must be an email address"] }
    })
  }
  const email = rawEmail.trim().toLowerCase()

  // The auth family's buckets: the email, and the workspace the existing user last used.
  const { rows: users } = await pool.query<{ id: string; lastOrgSlug: string | null }>({
    name: "user_by_email",
    text: userByEmailSql,
    values: [email]
  })
  const user = users[0]
  const buckets = [{ key: `auth:identity:${email}`, limit: AUTH_IDENTITY_LIMIT }]
  if (user?.lastOrgSlug != null) {
    const { rows } = await pool.query<{ id: string }>({
      name: "org_by_slug",
      text: ORG_BY_SLUG,
      values: [user.lastOrgSlug]
    })
    if (rows[0] !== undefined) buckets.push({ key: `auth:org:${rows[0].id}`, limit: AUTH_ORG_LIMIT })
  }
  buckets.sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
  const chargedAt = new Date()
  const openedBefore = new Date(chargedAt.getTime() - AUTH_WINDOW_SECONDS * 1000)
  let retryAfterSeconds = 0
  const charge = async (client: pg.Pool | pg.PoolClient, bucket: { key: string; limit: number }) => {
    const { rows } = await client.query<{ allowed: boolean; windowStart: Date }>({
      name: "charge_bucket",
      text: chargeBucketSql,
      values: [bucket.key, chargedAt, openedBefore, bucket.limit]
    })
    const row = rows[0]
    if (row !== undefined && !row.allowed) {
      const closes = row.windowStart.getTime() + AUTH_WINDOW_SECONDS * 1000
      retryAfterSeconds = Math.max(retryAfterSeconds, Math.ceil((closes - chargedAt.getTime()) / 1000), 1)
    }
  }
  // One bucket is one atomic statement; two are charged in a transaction that a rejection rolls back.
  const [only] = buckets
  const allowed = buckets.length === 1 && only !== undefined
    ? await charge(pool, only).then(() => retryAfterSeconds === 0)
    : await inTransaction(async (client) => {
      for (const bucket of buckets) await charge(client, bucket)
      return retryAfterSeconds === 0
    })
  if (!allowed) {
    res.setHeader("retry-after", String(retryAfterSeconds))
    return fail(res, 429, requestId, "rate_limited", "Too many requests; retry later", {
      scope: "identity",
      retryAfterSeconds
    })
  }

  const now = Date.now()
  const challengeId = `chl_${ulid(now)}`
  const code = randomDigits(6)
  const expiresAt = new Date(now + CHALLENGE_TTL_MS)
  const codeHash = createHmac("sha256", signingKey).update(`login:${challengeId}:${code}`).digest("hex")
  const at = Date.now()
  await pool.query({
    name: "insert_challenge_with_event",
    text: challengeWithEventSql,
    values: [
      challengeId,
      email,
      codeHash,
      expiresAt,
      0,
      null,
      new Date(now),
      uuidv7(at),
      user?.id ?? null,
      email,
      "login.challenge.created",
      "success",
      new Date(at),
      requestId,
      req.socket.remoteAddress ?? null,
      req.headers["user-agent"] ?? null,
      JSON.stringify({ challengeId })
    ]
  })
  const sentAt = Date.now()
  await pool.query({
    name: "insert_outbox",
    text: insertMailSql,
    values: [
      `msg_${ulid(sentAt)}`,
      email,
      "login_code",
      `Your sign-in code is ${code}`,
      `Your sign-in code is ${code}. It expires in 10 minutes. If you did not ask for it, ignore this message.`,
      JSON.stringify({ code, challengeId }),
      new Date(sentAt)
    ]
  })
  ok(res, requestId, {
    challengeId,
    expiresAt: expiresAt.toISOString(),
    delivery: { mode: "email", emailHint: maskEmail(email) }
  })
}

const health = async (res: ServerResponse, requestId: string) => {
  try {
    await pool.query("select 1")
    ok(res, requestId, { status: "ok", database: "ok" })
  } catch {
    send(res, 503, requestId, {
      data: { status: "unavailable", database: "unreachable" },
      meta: { requestId, cursor: null }
    })
  }
}

const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
  const requestId = `req_${ulid(Date.now())}`
  const url = req.url ?? "/"
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  const workspace = WORKSPACE_PATH.exec(path)
  if (req.method === "GET" && workspace !== null) {
    return getOrganization(req, res, decodeURIComponent(workspace[1] ?? ""), requestId)
  }
  if (req.method === "POST" && path === "/v1/auth/login/start") return loginStart(req, res, requestId)
  if (req.method === "GET" && path === "/health") return health(res, requestId)
  fail(res, 404, requestId, "not_found", "No route matches this path")
}

/** Requests whose handler has not finished yet (their client may be gone): shutdown waits for them. */
let inFlight = 0
let drained: (() => void) | undefined

const server = createServer((req, res) => {
  inFlight++
  handle(req, res)
    .catch((error: unknown) => {
      console.error("baseline: unhandled failure", error)
      if (!res.headersSent) fail(res, 500, "req_unknown", "internal_error", "An unexpected error occurred")
      else res.destroy()
    })
    .finally(() => {
      inFlight--
      if (inFlight === 0) drained?.()
    })
})

server.listen(PORT, HOST, () => {
  console.log(`baseline on http://${HOST}:${PORT} (${DATABASE_URL !== "" ? "PostgreSQL" : `PGlite ${DATA_DIR}`})`)
})

let stopping = false
const stop = async () => {
  if (stopping) return
  stopping = true
  server.close()
  server.closeIdleConnections()
  if (inFlight > 0) {
    await new Promise<void>((resolve) => {
      drained = resolve
      setTimeout(resolve, 5000).unref()
    })
  }
  server.closeAllConnections()
  try {
    await close()
    process.exit(0)
  } catch (error) {
    console.error("baseline: shutdown failed", error)
    process.exit(1)
  }
}
process.on("SIGTERM", () => void stop())
process.on("SIGINT", () => void stop())
