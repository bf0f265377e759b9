/**
 * Signs a fresh user in over real HTTP: login start → the code from the dev outbox → login complete. The first
 * sign-in of an address creates the user and its `Personal` workspace.
 */
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { ok } from "./envelope.ts"
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

const dataOf = (json: unknown): Record<string, any> => (json as { data: Record<string, any> }).data

/**
 * Signs `email` (default: a fresh address) in on the server at `baseUrl`. Pass `completeOn` to finish the
 * sign-in on another server (another replica on the same database).
 */
export const signIn = (baseUrl: string, options: { readonly email?: string; readonly completeOn?: string } = {}) =>
  Effect.gen(function*() {
    const email = options.email ?? freshEmail()
    const start = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
    yield* expectStatus("login start", start)
    const challengeId: string = dataOf(start.json).challengeId
    const outbox = yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`)
    yield* expectStatus("dev outbox", outbox)
    const message = (dataOf(outbox.json).messages as ReadonlyArray<{ data: { code?: string; challengeId?: string } }>)
      .find((m) => m.data.challengeId === challengeId)
    if (message?.data.code === undefined) {
      return yield* Effect.die(new Error(`no login code for ${challengeId} in the outbox: ${outbox.text}`))
    }
    const complete = yield* call(options.completeOn ?? baseUrl, "POST", "/v1/auth/login/complete", {
      body: { challengeId, code: message.data.code }
    })
    yield* expectStatus("login complete", complete)
    const result = dataOf(complete.json)
    const signedIn: SignedIn = { token: result.token, user: result.user }
    return signedIn
  })

/** Signs a fresh `<prefix>-…` address in and reads its `Personal` workspace, the first of its workspaces. */
export const signInWithPersonal = (baseUrl: string, prefix = "user") =>
  Effect.gen(function*() {
    const email = freshEmail(prefix)
    const session = yield* signIn(baseUrl, { email })
    const list = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }))
    return { ...session, email, personal: list.organizations[0] }
  })

/** A new project with a random name in the workspace `orgRef`, created over HTTP by `token`: its id. */
export const createProject = (baseUrl: string, token: string, orgRef: string) =>
  Effect.map(
    call(baseUrl, "POST", `/v1/organizations/${orgRef}/projects`, {
      token,
      body: { name: `P ${randomUUID().slice(0, 8)}` }
    }),
    (res) => ok(res).project.id as string
  )
