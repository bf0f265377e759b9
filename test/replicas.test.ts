/**
 * Several replicas on one PostgreSQL database (contract §1 "Several replicas"): two complete servers, each with its
 * own connection pool and its own in-process state, share one scratch database. Sessions, idempotency slots, rate
 * limits, signing keys and slugs must behave as one service. Runs only when `DATABASE_URL` names a server.
 */
import { Organization, Session, User } from "@cp/domain"
import { Database } from "@cp/persistence"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { failed, nextCursor, ok, type Res, wire } from "./support/envelope.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

const organizationOf = (res: Res) => ok(res, { organization: Organization }).organization
const organizationsOf = (res: Res) => ok(res, { organizations: Schema.Array(Organization) }).organizations
const sessionUserOf = (res: Res) => ok(res, { session: Session, user: User }).user

/** One scratch database on the `DATABASE_URL` server, dropped (connections and all) when the suite ends. */
class ScratchDatabase extends Context.Service<ScratchDatabase, { readonly url: string }>()("test/ScratchDatabase") {}

const scratchDatabase = Layer.effect(ScratchDatabase, Effect.map(scratchDatabaseUrl("cp_replicas"), (url) => ({ url })))

/** A whole server on its own pool over `url`; nothing of it is shared with the other replica. */
const serverOver = (url: string) => testServerOver(Database.layerPostgres(url))

class ReplicaA extends Context.Service<ReplicaA, { readonly baseUrl: string }>()("test/ReplicaA") {}
class ReplicaB extends Context.Service<ReplicaB, { readonly baseUrl: string }>()("test/ReplicaB") {}

const replicas = Layer.unwrap(Effect.gen(function*() {
  const { url } = yield* ScratchDatabase
  // Both start together: migrations run once, under the advisory lock, whichever comes first.
  return Layer.mergeAll(
    Layer.effect(
      ReplicaA,
      Effect.gen(function*() {
        return yield* TestServer
      })
    ).pipe(Layer.provide(serverOver(url))),
    Layer.effect(
      ReplicaB,
      Effect.gen(function*() {
        return yield* TestServer
      })
    ).pipe(Layer.provide(serverOver(url)))
  )
})).pipe(Layer.provide(scratchDatabase))

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("replicas", () => {
  layer(replicas, { excludeTestServices: true })("two replicas on one PostgreSQL database", (it) => {
    it.effect("the replicas are distinct servers", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        assert.notStrictEqual(a.baseUrl, b.baseUrl)
        ok(yield* call(a.baseUrl, "GET", "/health"))
        ok(yield* call(b.baseUrl, "GET", "/health"))
      }))

    it.effect("a session works on both; logout on B stops the token on A at once", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        // Started on A, completed on B: the challenge is shared too.
        const { token, user } = yield* signIn(a.baseUrl, { completeOn: b.baseUrl })
        assert.strictEqual(sessionUserOf(yield* call(a.baseUrl, "GET", "/v1/auth/session", { token })).id, user.id)
        assert.strictEqual(sessionUserOf(yield* call(b.baseUrl, "GET", "/v1/auth/session", { token })).id, user.id)
        assert.deepStrictEqual(ok(yield* call(b.baseUrl, "POST", "/v1/auth/logout", { token })), { success: true })
        failed(yield* call(a.baseUrl, "GET", "/v1/auth/session", { token }), 401, "unauthenticated")
        failed(yield* call(a.baseUrl, "GET", "/v1/organizations", { token }), 401, "unauthenticated")
        failed(yield* call(b.baseUrl, "GET", "/v1/auth/session", { token }), 401, "unauthenticated")
      }))

    it.effect("an Idempotency-Key request replayed on the other replica returns the stored answer", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        const { token } = yield* signIn(a.baseUrl)
        const key = `replica-${randomUUID()}`
        const request = { token, body: { name: "Replicated" }, headers: { "idempotency-key": key } }
        const first = yield* call(a.baseUrl, "POST", "/v1/organizations", request)
        ok(first)
        const again = yield* call(b.baseUrl, "POST", "/v1/organizations", request)
        assert.strictEqual(again.status, 200)
        assert.strictEqual(again.text, first.text)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        const list = organizationsOf(yield* call(b.baseUrl, "GET", "/v1/organizations", { token }))
        assert.deepStrictEqual(list.map((o) => o.name), ["Replicated", "Personal"])
      }))

    it.effect("the same Idempotency-Key sent to both replicas at once creates one workspace", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        const { token } = yield* signIn(a.baseUrl)
        const request = { token, body: { name: "Raced" }, headers: { "idempotency-key": `race-${randomUUID()}` } }
        const answers = yield* Effect.all([
          call(a.baseUrl, "POST", "/v1/organizations", request),
          call(b.baseUrl, "POST", "/v1/organizations", request),
          call(a.baseUrl, "POST", "/v1/organizations", request),
          call(b.baseUrl, "POST", "/v1/organizations", request)
        ], { concurrency: "unbounded" })
        for (const res of answers) assert.include([200, 409], res.status, res.text)
        const fresh = answers.filter((res) => res.status === 200 && res.headers.get("idempotent-replayed") === null)
        assert.lengthOf(fresh, 1)
        const list = organizationsOf(yield* call(b.baseUrl, "GET", "/v1/organizations", { token }))
        assert.deepStrictEqual(list.map((o) => o.name), ["Raced", "Personal"])
      }))

    it.effect("rate limits are shared: 10 login starts on A, the 11th on B is 429", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        const email = freshEmail("limited")
        for (let i = 0; i < 10; i++) ok(yield* call(a.baseUrl, "POST", "/v1/auth/login/start", { body: { email } }))
        const res = yield* call(b.baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
        const error = failed(res, 429, "rate_limited")
        assert.strictEqual(error.details["scope"], "identity")
        const retryAfter = wire(Schema.Number, error.details["retryAfterSeconds"])
        assert.isAbove(retryAfter, 0)
        assert.isAtMost(retryAfter, 60)
        assert.strictEqual(res.headers.get("retry-after"), String(retryAfter))
        failed(yield* call(a.baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), 429, "rate_limited")
      }))

    it.effect("cursors and workspaces made on one replica are valid on the other", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        const { token } = yield* signIn(b.baseUrl)
        const org = organizationOf(
          yield* call(a.baseUrl, "POST", "/v1/organizations", { token, body: { name: "Made on A" } })
        )
        assert.deepStrictEqual(
          organizationOf(yield* call(b.baseUrl, "GET", `/v1/organizations/${org.slug}`, { token })),
          org
        )
        const page = yield* call(a.baseUrl, "GET", "/v1/organizations?limit=1", { token })
        const cursor = encodeURIComponent(nextCursor(page))
        const rest = organizationsOf(
          yield* call(b.baseUrl, "GET", `/v1/organizations?limit=1&cursor=${cursor}`, { token })
        )
        assert.strictEqual(rest[0]?.name, "Personal")
      }))

    it.effect("concurrent creates of one derived slug across replicas get distinct suffixes", () =>
      Effect.gen(function*() {
        const a = yield* ReplicaA
        const b = yield* ReplicaB
        const { token } = yield* signIn(a.baseUrl)
        const name = `Crowded ${randomUUID().slice(0, 8)}`
        const answers = yield* Effect.all(
          Array.from(
            { length: 6 },
            (_, i) => call(i % 2 === 0 ? a.baseUrl : b.baseUrl, "POST", "/v1/organizations", { token, body: { name } })
          ),
          { concurrency: "unbounded" }
        )
        const slugs = answers.map((res) => organizationOf(res).slug).sort()
        const base = name.toLowerCase().replace(" ", "-")
        assert.sameMembers(slugs, [base, `${base}-2`, `${base}-3`, `${base}-4`, `${base}-5`, `${base}-6`])
      }))
  })
})
