/**
 * Replicas as separate OS processes on one PostgreSQL database (contract §1 "Several replicas"): nothing but the
 * database is shared, so a logout on one stops the token on the others at once, rate limits count across them, and a
 * replica killed with SIGKILL in the middle of writes leaves no partial aggregate: every workspace has its owner,
 * and every `Idempotency-Key` either replays the answer of a committed request or runs afresh. Runs only when
 * `DATABASE_URL` names a server.
 */
import { Organization, Session, User } from "@cp/domain"
import { Database } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { failed, ok, type Res, wire } from "./support/envelope.ts"
import { startReplicaProcesses, startServerProcess } from "./support/processes.ts"
import { scratchDatabaseUrl } from "./support/scratch.ts"
import { call } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const DATABASE_URL = process.env["DATABASE_URL"]

const sessionUserOf = (res: Res) => ok(res, { session: Session, user: User }).user

describe.skipIf(DATABASE_URL === undefined || DATABASE_URL === "")("replica processes", () => {
  it.live(
    "a session started on one process works on all; logout on one stops the token on every other",
    () =>
      Effect.gen(function*() {
        const [a, b, c] = yield* startReplicaProcesses(yield* scratchDatabaseUrl("cp_procs"), 3)
        if (a === undefined || b === undefined || c === undefined) return assert.fail("three replicas")
        // Started on A, completed on B: the challenge is shared too.
        const { token, user } = yield* signIn(a.baseUrl, { completeOn: b.baseUrl })
        for (const replica of [a, b, c]) {
          assert.strictEqual(
            sessionUserOf(yield* call(replica.baseUrl, "GET", "/v1/auth/session", { token })).id,
            user.id
          )
        }
        assert.deepStrictEqual(ok(yield* call(c.baseUrl, "POST", "/v1/auth/logout", { token })), { success: true })
        for (const replica of [a, b, c]) {
          failed(yield* call(replica.baseUrl, "GET", "/v1/auth/session", { token }), 401, "unauthenticated")
        }
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "rate limits count across processes: 10 login starts spread over three, the 11th is 429 on any",
    () =>
      Effect.gen(function*() {
        const replicas = yield* startReplicaProcesses(yield* scratchDatabaseUrl("cp_procs"), 3)
        const email = freshEmail("limited")
        for (let i = 0; i < 10; i++) {
          const replica = replicas[i % replicas.length]
          ok(yield* call(replica?.baseUrl ?? "", "POST", "/v1/auth/login/start", { body: { email } }))
        }
        for (const replica of replicas) {
          const res = yield* call(replica.baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
          const error = failed(res, 429, "rate_limited")
          assert.strictEqual(error.details["scope"], "identity")
          assert.isAbove(wire(Schema.Number, error.details["retryAfterSeconds"]), 0)
        }
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "SIGKILL during writes, then a restart: no partial workspace, and every key replays or runs afresh",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("cp_crash")
        const first = yield* startServerProcess({ DATABASE_URL: url })
        const { token, user } = yield* signIn(first.baseUrl)
        const total = 60
        const requests = Array.from({ length: total }, (_, i) => ({
          name: `Crash ${i}`,
          key: `crash-${i}-${randomUUID()}`
        }))
        const send = (baseUrl: string, request: (typeof requests)[number]) =>
          call(baseUrl, "POST", "/v1/organizations", {
            token,
            body: { name: request.name },
            headers: { "idempotency-key": request.key }
          })
        // Answers that arrived before the kill, by key; the rest of the requests die with the process.
        const answered = new Map<string, Res>()
        const writes = Effect.forEach(
          requests,
          (request) =>
            send(first.baseUrl, request).pipe(
              Effect.tap((res) => Effect.sync(() => answered.set(request.key, res))),
              // Refused or cut off by the kill.
              Effect.catchCause(() => Effect.void)
            ),
          { concurrency: 20, discard: true }
        )
        const killAfterSome = Effect.gen(function*() {
          while (answered.size < 10) yield* Effect.sleep("5 millis")
          yield* Effect.promise(() => first.kill("SIGKILL"))
        })
        yield* Effect.all([writes, killAfterSome], {
          concurrency: "unbounded",
          discard: true
        })
        assert.isBelow(answered.size, total, "the kill came before every write was answered")

        const second = yield* startServerProcess({ DATABASE_URL: url })
        const sql = Context.get(yield* Layer.build(Database.layerPostgres(url)), SqlClient.SqlClient)

        // Every workspace is whole: its owner's membership and owner binding committed with it.
        const partial = yield* sql<{ id: string }>`
        select o.id from organizations o
        where not exists (
          select 1 from members m where m.org_id = o.id and m.subject_type = 'user' and m.status = 'active')
        or not exists (
          select 1 from role_bindings b where b.org_id = o.id and b.role = 'owner')`
        assert.deepStrictEqual(partial, [])

        // A claim whose request died uncommitted is released once stale; time passes here by aging the claims.
        yield* sql`update idempotency_keys set created_at = created_at - interval '1 hour' where state = 'in_flight'`
        for (const request of requests) {
          const retried = yield* send(second.baseUrl, request)
          const before = answered.get(request.key)
          if (before !== undefined && before.status === 200) {
            // Answered before the kill: the same answer, replayed.
            assert.strictEqual(retried.text, before.text)
            assert.strictEqual(retried.headers.get("idempotent-replayed"), "true")
          } else {
            // Committed then killed before answering: replayed; never committed: runs now. Either way one workspace.
            ok(retried)
          }
        }
        const names = yield* sql<{ name: string; n: number }>`
        select o.name, count(*)::int as n from organizations o
        join role_bindings b on b.org_id = o.id and b.role = 'owner' and b.subject_id = ${user.id}
        where o.name like 'Crash %' group by o.name`
        assert.lengthOf(names, total)
        assert.isTrue(names.every((row) => row.n === 1), JSON.stringify(names.filter((row) => row.n !== 1)))
        const listed = ok(yield* call(second.baseUrl, "GET", "/v1/organizations?limit=100", { token }), {
          organizations: Schema.Array(Organization)
        }).organizations
        assert.lengthOf(listed.filter((org) => org.name.startsWith("Crash ")), total)
      }).pipe(Effect.scoped, Effect.orDie),
    180_000
  )
})
