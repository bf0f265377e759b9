/**
 * Signs a fresh user in over real HTTP: login start → the code from the dev outbox → login complete. The first
 * sign-in of an address creates the user and its `Personal` workspace.
 */
import { CreatedApiKey, LoginChallenge, LoginResult, Organization, OutboxMessage, Project, User } from "@cp/domain"
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { dataOf, ok } from "./envelope.ts"
import { call } from "./server.ts"

export interface SignedIn {
  /** The bearer session token (`sps_ses_<id>.<secret>`). */
  readonly token: string
  readonly user: { readonly id: string; readonly email: string; readonly displayName: string | null }
}

/** A fresh address nobody has used yet; its local part (`<prefix>-<hex>`) becomes the `Personal` slug. */
export const freshEmail = (prefix = "user"): string =>
  `${prefix}-${randomUUID().replaceAll("-", "").slice(0, 16)}@example.test`

const expectStatus = (step: string, res: { readonly status: number; readonly text: string }, status = 200) =>
  res.status === status
    ? Effect.void
    : Effect.die(new Error(`${step}: expected ${status}, got ${res.status}: ${res.text}`))

/**
 * Signs `email` (default: a fresh address) in on the server at `baseUrl`. Pass `completeOn` to finish the
 * sign-in on another server (another replica on the same database).
 */
export const signIn = (baseUrl: string, options: { readonly email?: string; readonly completeOn?: string } = {}) =>
  Effect.gen(function*() {
    const email = options.email ?? freshEmail()
    const start = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
    yield* expectStatus("login start", start)
    const { challengeId } = dataOf(start, LoginChallenge)
    const outbox = yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`)
    yield* expectStatus("dev outbox", outbox)
    const code = dataOf(outbox, { messages: Schema.Array(OutboxMessage) }).messages
      .find((m) => m.data["challengeId"] === challengeId)?.data["code"]
    if (typeof code !== "string") {
      return yield* Effect.die(new Error(`no login code for ${challengeId} in the outbox: ${outbox.text}`))
    }
    const complete = yield* call(options.completeOn ?? baseUrl, "POST", "/v1/auth/login/complete", {
      body: { challengeId, code }
    })
    yield* expectStatus("login complete", complete)
    const { token, user } = dataOf(complete, LoginResult)
    const signedIn: SignedIn = { token, user }
    return signedIn
  })

/** Signs a fresh `<prefix>-…` address in and reads its `Personal` workspace, the first of its workspaces. */
export const signInWithPersonal = (baseUrl: string, prefix = "user") =>
  Effect.gen(function*() {
    const email = freshEmail(prefix)
    const session = yield* signIn(baseUrl, { email })
    const list = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }), {
      organizations: Schema.Array(Organization)
    })
    const personal = list.organizations[0]
    if (personal === undefined) return yield* Effect.die(new Error("a new user has no Personal workspace"))
    return { ...session, email, personal }
  })

/** A new project with a random name in the workspace `orgRef`, created over HTTP by `token`: its id. */
export const createProject = (baseUrl: string, token: string, orgRef: string) =>
  Effect.map(
    call(baseUrl, "POST", `/v1/organizations/${orgRef}/projects`, {
      token,
      body: { name: `P ${randomUUID().slice(0, 8)}` }
    }),
    (res) => ok(res, { project: Project }).project.id
  )

/** Sets the signed-in user's display name over HTTP: the updated user. */
export const setDisplayName = (baseUrl: string, token: string, displayName: string) =>
  Effect.map(
    call(baseUrl, "PATCH", "/v1/auth/profile", { token, body: { displayName } }),
    (res) => ok(res, { user: User }).user
  )

/** A new workspace-wide API key labelled `label` in `orgRef`, created over HTTP by `token` (its service principal). */
export const createApiKey = (baseUrl: string, token: string, orgRef: string, label: string, role = "viewer") =>
  Effect.map(
    call(baseUrl, "POST", `/v1/organizations/${orgRef}/api-keys`, { token, body: { label, role } }),
    (res) => ok(res, { apiKey: CreatedApiKey }).apiKey
  )
