/**
 * Every "exactly one wins" rule under real concurrency (issue 10): derived slugs (workspaces, teams, environments) get
 * distinct `-N` suffixes and never a 500; of one explicit slug exactly one create wins; concurrent first sign-ins whose
 * emails share a local part all succeed, and a challenge opens exactly one session; two owners removing each other
 * leave exactly one; one `Idempotency-Key` sent in parallel runs once and replays that answer. PostgreSQL (when
 * `DATABASE_URL` is set) runs the requests truly in parallel; PGlite runs them interleaved on its one connection. The
 * stale-authority case needs a second connection to hold the workspace lock: PostgreSQL only.
 */
import { AcceptedInvitation, Environment, Invitation, InvitationDelivery, Organization, Team } from "@cp/domain"
import { assert, layer } from "@effect/vitest"
import { Effect, Fiber, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok, type Res } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, freshEmail, signIn, signInWithPersonal } from "./support/session.ts"

const PARALLEL = 20

const organizationOf = (res: Res) => ok(res, { organization: Organization }).organization
const organizationsOf = (res: Res) => ok(res, { organizations: Schema.Array(Organization) }).organizations

/** `base`, `base-2`, … `base-<n>`. */
const family = (base: string, n: number) => Array.from({ length: n }, (_, i) => (i === 0 ? base : `${base}-${i + 1}`))

/** `n` copies of `request`, all sent at once. */
const inParallel = <A, E, R>(n: number, request: (i: number) => Effect.Effect<A, E, R>) =>
  Effect.all(Array.from({ length: n }, (_, i) => request(i)), { concurrency: "unbounded" })

/** A fresh user who joined `orgId` as `role` through an invitation. */
const join = (baseUrl: string, ownerToken: string, orgId: string, role: string) =>
  Effect.gen(function*() {
    const email = freshEmail(role)
    const user = yield* signIn(baseUrl, { email })
    const created = ok(
      yield* call(baseUrl, "POST", `/v1/organizations/${orgId}/invitations`, {
        token: ownerToken,
        body: { email, role }
      }),
      { invitation: Invitation, delivery: InvitationDelivery }
    )
    const accepted = ok(
      yield* call(baseUrl, "POST", `/v1/organizations/${orgId}/invitations/accept`, {
        token: user.token,
        body: { token: created.delivery.token }
      }),
      AcceptedInvitation
    )
    return { ...user, memberId: accepted.membership.id }
  })

/** The user ids holding the owner role on the workspace, read with `token`. */
const ownersOf = (baseUrl: string, token: string, orgId: string) =>
  Effect.map(
    call(baseUrl, "GET", `/v1/organizations/${orgId}/members?limit=100`, { token }),
    (res) =>
      ok(res, {
        members: Schema.Array(
          Schema.Struct({ subjectId: Schema.String, roles: Schema.Array(Schema.Struct({ role: Schema.String })) })
        )
      })
        .members.filter((member) => member.roles.some((role) => role.role === "owner"))
        .map((member) => member.subjectId)
  )

for (const backend of sqlBackends) {
  layer(testServerOver(databaseLayer(backend)), { excludeTestServices: true })(`races [${backend}]`, (it) => {
    it.effect(`${PARALLEL} creates of one workspace name get the base slug and -2 … -${PARALLEL}`, () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { token } = yield* signIn(baseUrl)
        const name = `Same ${randomUUID().slice(0, 8)}`
        const answers = yield* inParallel(
          PARALLEL,
          () => call(baseUrl, "POST", "/v1/organizations", { token, body: { name } })
        )
        const slugs = answers.map((res) => organizationOf(res).slug)
        assert.sameMembers(slugs, family(name.toLowerCase().replace(" ", "-"), PARALLEL))
      }))

    it.effect(`${PARALLEL} creates of one team name, and of one environment name, get distinct suffixes`, () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { token, personal } = yield* signInWithPersonal(baseUrl)
        const teams = yield* inParallel(
          PARALLEL,
          () => call(baseUrl, "POST", `/v1/organizations/${personal.id}/teams`, { token, body: { name: "Platform" } })
        )
        assert.sameMembers(teams.map((res) => ok(res, { team: Team }).team.slug), family("platform", PARALLEL))

        const projectId = yield* createProject(baseUrl, token, personal.id)
        const environments = yield* inParallel(
          PARALLEL,
          () =>
            call(baseUrl, "POST", `/v1/organizations/${personal.id}/projects/${projectId}/environments`, {
              token,
              body: { name: "Preview" }
            })
        )
        assert.sameMembers(
          environments.map((res) => ok(res, { environment: Environment }).environment.slug),
          family("preview", PARALLEL)
        )
      }))

    it.effect("of creates naming one explicit slug exactly one wins; the others are 409 on `slug`", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { token, personal } = yield* signInWithPersonal(baseUrl)
        const slug = `taken-${randomUUID().slice(0, 8)}`
        const workspaces = yield* inParallel(
          10,
          (i) => call(baseUrl, "POST", "/v1/organizations", { token, body: { name: `W${i}`, slug } })
        )
        const teams = yield* inParallel(
          10,
          (i) =>
            call(baseUrl, "POST", `/v1/organizations/${personal.id}/teams`, { token, body: { name: `T${i}`, slug } })
        )
        for (const answers of [workspaces, teams]) {
          assert.lengthOf(answers.filter((res) => res.status === 200), 1, answers.map((res) => res.text).join("\n"))
          for (const res of answers.filter((res) => res.status !== 200)) {
            assert.deepStrictEqual(failed(res, 409, "conflict").details, { field: "slug" })
          }
        }
      }))

    it.effect("first sign-ins whose emails share a local part all succeed, each with its own Personal slug", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const local = `same-${randomUUID().slice(0, 8)}`
        const sessions = yield* inParallel(8, (i) => signIn(baseUrl, { email: `${local}@domain${i}.test` }))
        const slugs = yield* Effect.forEach(
          sessions,
          ({ token }) =>
            Effect.map(call(baseUrl, "GET", "/v1/organizations", { token }), (res) => organizationsOf(res)[0]?.slug)
        )
        assert.sameMembers(slugs, family(local, 8))
      }))

    it.effect("two challenges of one new email completed at once: both sign in, as one user", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const email = freshEmail("twice")
        const [first, second] = yield* inParallel(2, () => signIn(baseUrl, { email }))
        assert.strictEqual(first?.user.id, second?.user.id)
        const list = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: first?.token ?? "" }))
        assert.deepStrictEqual(list.map((org) => org.name), ["Personal"])
      }))

    it.effect("one challenge completed five times at once opens exactly one session; the rest are 412", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const email = freshEmail("once")
        const start = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
        const challengeId = ok(start, { challengeId: Schema.String }).challengeId
        const outbox = yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`)
        const code = ok(outbox, {
          messages: Schema.Array(Schema.Struct({ data: Schema.Record(Schema.String, Schema.Unknown) }))
        })
          .messages[0]?.data["code"]
        const answers = yield* inParallel(
          5,
          () => call(baseUrl, "POST", "/v1/auth/login/complete", { body: { challengeId, code } })
        )
        assert.lengthOf(answers.filter((res) => res.status === 200), 1)
        for (const res of answers.filter((res) => res.status !== 200)) {
          assert.strictEqual(failed(res, 412, "precondition_failed").details["reason"], "challenge_spent")
        }
      }))

    it.effect("two owners removing each other at once: exactly one succeeds and one owner remains", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        for (let round = 0; round < 3; round++) {
          const a = yield* signIn(baseUrl)
          const org = organizationOf(
            yield* call(baseUrl, "POST", "/v1/organizations", { token: a.token, body: { name: "Two owners" } })
          )
          const b = yield* join(baseUrl, a.token, org.id, "owner")
          const members = ok(yield* call(baseUrl, "GET", `/v1/organizations/${org.id}/members`, { token: a.token }), {
            members: Schema.Array(Schema.Struct({ id: Schema.String, subjectId: Schema.String }))
          }).members
          const memberOfA = members.find((member) => member.subjectId === a.user.id)?.id ?? ""
          const [aRemovesB, bRemovesA] = yield* Effect.all([
            call(baseUrl, "DELETE", `/v1/organizations/${org.id}/members/${b.memberId}`, { token: a.token }),
            call(baseUrl, "DELETE", `/v1/organizations/${org.id}/members/${memberOfA}`, { token: b.token })
          ], { concurrency: "unbounded" })
          const answers = [aRemovesB, bRemovesA].filter((res) => res !== undefined)
          assert.lengthOf(answers.filter((res) => res.status === 200), 1, answers.map((res) => res.text).join("\n"))
          for (const res of answers.filter((res) => res.status !== 200)) assert.include([403, 412], res.status)
          const survivor = aRemovesB?.status === 200 ? a : b
          assert.deepStrictEqual(yield* ownersOf(baseUrl, survivor.token, org.id), [survivor.user.id])
        }
      }))

    it.effect("one Idempotency-Key sent 10 times at once runs once; every answer is that one or 409", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { token } = yield* signIn(baseUrl)
        const name = `Once ${randomUUID().slice(0, 8)}`
        const request = { token, body: { name }, headers: { "idempotency-key": `race-${randomUUID()}` } }
        const answers = yield* inParallel(10, () => call(baseUrl, "POST", "/v1/organizations", request))
        const fresh = answers.filter((res) => res.status === 200 && res.headers.get("idempotent-replayed") === null)
        assert.lengthOf(fresh, 1)
        const first = fresh[0]?.text
        for (const res of answers) {
          if (res.status === 409) failed(res, 409, "conflict")
          else assert.strictEqual(res.text, first)
        }
        const again = yield* call(baseUrl, "POST", "/v1/organizations", request)
        assert.strictEqual(again.text, first)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        const list = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations?limit=100", { token }))
        assert.lengthOf(list.filter((org) => org.name === name), 1)
      }))

    if (backend === "postgres") {
      /**
       * Holds the workspace lock in a transaction of the test's own, sends `first` and waits until it queues for the
       * lock, then `second`, and releases: `first` commits before `second` takes the lock. Their answers.
       */
      const queuedBehindLock = (
        orgId: string,
        first: Effect.Effect<Res>,
        second: Effect.Effect<Res>
      ) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const waitForWaiters = (n: number) =>
            Effect.gen(function*() {
              // Activity statistics are a snapshot per transaction: cleared to see new waiters.
              yield* sql`select pg_stat_clear_snapshot()`
              const rows = yield* sql<{ n: number }>`
                select count(*)::int as n from pg_stat_activity
                where datname = current_database() and wait_event_type = 'Lock'`
              return rows[0]?.n ?? 0
            }).pipe(
              Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (count) => count >= n }),
              Effect.timeoutOrElse({
                duration: "20 seconds",
                orElse: () => Effect.die(new Error(`request ${n} never queued for the workspace lock`))
              })
            )
          const fibers = yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`select id from organizations where id = ${orgId} for no key update`
            const firstFiber = yield* Effect.forkChild(first)
            yield* waitForWaiters(1)
            const secondFiber = yield* Effect.forkChild(second)
            yield* waitForWaiters(2)
            return [firstFiber, secondFiber] as const
          }))
          return [yield* Fiber.join(fibers[0]), yield* Fiber.join(fibers[1])] as const
        }).pipe(Effect.orDie)

      /** A workspace of a fresh owner A, with B joined as `role`. */
      const ownerAnd = (role: string) =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const a = yield* signIn(baseUrl)
          const org = organizationOf(
            yield* call(baseUrl, "POST", "/v1/organizations", { token: a.token, body: { name: "Stale" } })
          )
          return { baseUrl, a, org, b: yield* join(baseUrl, a.token, org.id, role) }
        })

      it.effect("owner A removes owner B while B promotes C: B's change waits for the lock and is then 403", () =>
        Effect.gen(function*() {
          const { baseUrl, a, org, b } = yield* ownerAnd("owner")
          const c = yield* join(baseUrl, a.token, org.id, "viewer")
          const [removal, promotion] = yield* queuedBehindLock(
            org.id,
            call(baseUrl, "DELETE", `/v1/organizations/${org.id}/members/${b.memberId}`, { token: a.token }),
            call(baseUrl, "PATCH", `/v1/organizations/${org.id}/members/${c.memberId}`, {
              token: b.token,
              body: { role: "owner" }
            })
          )
          ok(removal)
          assert.strictEqual(
            failed(promotion, 403, "forbidden").details["permission"],
            "organization.member.update_role"
          )
          assert.deepStrictEqual(yield* ownersOf(baseUrl, a.token, org.id), [a.user.id])
        }))

      it.effect("an admin demoted to viewer while its API-key create and team grant wait: both 403", () =>
        Effect.gen(function*() {
          const { baseUrl, a, org, b } = yield* ownerAnd("admin")
          const team = ok(
            yield* call(baseUrl, "POST", `/v1/organizations/${org.id}/teams`, { token: a.token, body: { name: "T" } }),
            { team: Team }
          ).team
          const demote = (role: string) =>
            call(baseUrl, "PATCH", `/v1/organizations/${org.id}/members/${b.memberId}`, {
              token: a.token,
              body: { role }
            })
          const [demoted, key] = yield* queuedBehindLock(
            org.id,
            demote("viewer"),
            call(baseUrl, "POST", `/v1/organizations/${org.id}/api-keys`, {
              token: b.token,
              body: { label: "stale", role: "viewer" }
            })
          )
          ok(demoted)
          assert.strictEqual(failed(key, 403, "forbidden").details["permission"], "organization.api_key.create")

          ok(yield* demote("admin"))
          const [demotedAgain, grant] = yield* queuedBehindLock(
            org.id,
            demote("viewer"),
            call(baseUrl, "POST", `/v1/organizations/${org.id}/team-roles`, {
              token: b.token,
              body: { teamId: team.id, role: "viewer", scopeKind: "organization" }
            })
          )
          ok(demotedAgain)
          assert.strictEqual(failed(grant, 403, "forbidden").details["permission"], "team.role.grant")
        }))
    }
  })
}
