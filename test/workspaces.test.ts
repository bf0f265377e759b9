/**
 * Workspaces end to end over real HTTP (spec: Workspaces endpoints, Workspace (organization); contract §4 Routing
 * order, Slugs, Lists): create with slug derivation and account selection, list, get by any reference, child
 * workspaces, effective access. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 *
 * Sharing a workspace needs invitations, which do not exist yet, so the cases that need a second member write the
 * role binding straight into the database (the same rows an accepted invitation would write).
 */
import { permissions } from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const serverWithDatabase = (backend: Exclude<Backend, "memory">) => testServerOver(databaseLayer(backend))

const backends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const unique = () => randomUUID().replaceAll("-", "").slice(0, 10)

/** The spec's Workspace fields, each well formed. */
const assertOrganizationShape = (org: any) => {
  assert.deepStrictEqual(
    Object.keys(org).sort(),
    ["accountId", "createdAt", "id", "isAccountRoot", "kind", "name", "slug", "workspaceRef"]
  )
  assert.match(org.id, new RegExp(`^org_${ULID}$`))
  assert.match(org.workspaceRef, new RegExp(`^ws_${ULID}$`))
  assert.match(org.accountId, new RegExp(`^ws_${ULID}$`))
  assert.match(org.slug, /^[a-z0-9][a-z0-9-]{0,62}$/)
  assert.match(org.createdAt, ISO_MS)
  assert.strictEqual(org.isAccountRoot, org.accountId === org.workspaceRef)
}

for (const backend of backends) {
  layer(serverWithDatabase(backend), { excludeTestServices: true })(`workspaces [${backend}]`, (it) => {
    const create = (baseUrl: string, token: string, body: unknown) =>
      call(baseUrl, "POST", "/v1/organizations", { token, body })

    /** A fresh user and its `Personal` workspace. */
    const newUser = (baseUrl: string, prefix = "user") =>
      Effect.gen(function*() {
        const email = freshEmail(prefix)
        const session = yield* signIn(baseUrl, { email })
        const list = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token }))
        assert.lengthOf(list.organizations, 1)
        return { ...session, email, personal: list.organizations[0] }
      })

    /** What an accepted invitation would write: a membership and one workspace-scoped role binding. */
    const grant = (orgId: string, userId: string, role: string) => seedMember(orgId, userId, role)

    it.effect("the first sign-in creates a Personal account root", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl, "first")
        assertOrganizationShape(user.personal)
        assert.strictEqual(user.personal.name, "Personal")
        assert.strictEqual(user.personal.slug, user.email.slice(0, user.email.indexOf("@")))
        assert.strictEqual(user.personal.kind, "account")
        assert.isTrue(user.personal.isAccountRoot)
        assert.strictEqual(user.personal.accountId, user.personal.workspaceRef)
        const profile = ok(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: user.token }))
        assert.strictEqual(profile.user.lastOrgSlug, user.personal.slug)
      }))

    it.effect("create: the creator is owner and the workspace lands under the caller's account", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const res = yield* create(baseUrl, user.token, { name: `  Acme Rockets ${unique()}  ` })
        const data = ok(res)
        assert.deepStrictEqual(Object.keys(data).sort(), ["membership", "organization"])
        const org = data.organization
        assertOrganizationShape(org)
        assert.match(org.name, /^Acme Rockets \w+$/, "the name is trimmed")
        assert.strictEqual(org.slug, org.name.toLowerCase().replaceAll(" ", "-"))
        assert.isFalse(org.isAccountRoot)
        assert.notStrictEqual(org.kind, "account")
        assert.strictEqual(org.accountId, user.personal.workspaceRef)
        assert.deepStrictEqual(Object.keys(data.membership).sort(), ["joinedAt", "role"])
        assert.strictEqual(data.membership.role, "owner")
        assert.match(data.membership.joinedAt, ISO_MS)
        // The typed client decodes the same answer.
        const client = yield* clientFor(baseUrl, user.token)
        const listed = yield* client.workspaces.list({ query: {} })
        assert.deepStrictEqual(listed.data.organizations.map((o) => o.id), [org.id, user.personal.id])
        assert.strictEqual(listed.cursor, null)
      }))

    it.effect("a derived slug that is taken gets -2, -3", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const u = unique()
        const slugs: Array<string> = []
        for (const name of [`Acme ${u}`, `acme ${u}`, `ACME — ${u}!`]) {
          slugs.push(ok(yield* create(baseUrl, user.token, { name })).organization.slug)
        }
        assert.deepStrictEqual(slugs, [`acme-${u}`, `acme-${u}-2`, `acme-${u}-3`])
        // Another user deriving the same slug continues the sequence: slugs are global.
        const other = yield* newUser(baseUrl)
        assert.strictEqual(
          ok(yield* create(baseUrl, other.token, { name: `Acme ${u}` })).organization.slug,
          `acme-${u}-4`
        )
      }))

    it.effect("slug derivation: accents, symbols only, long names", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const u = unique()
        assert.strictEqual(
          ok(yield* create(baseUrl, user.token, { name: `Été Café ${u}` })).organization.slug,
          `ete-cafe-${u}`
        )
        assert.match(ok(yield* create(baseUrl, user.token, { name: "!!!" })).organization.slug, /^workspace(-\d+)?$/)
        const long = `${u}${"x".repeat(110)}`
        const first = ok(yield* create(baseUrl, user.token, { name: long })).organization.slug
        const second = ok(yield* create(baseUrl, user.token, { name: long })).organization.slug
        assert.isAtMost(first.length, 63)
        assert.strictEqual(second, `${first}-2`)
        assert.isAtMost(second.length, 63)
      }))

    it.effect("an explicit slug that is taken is 409 conflict and creates nothing", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const slug = `taken-${unique()}`
        assert.strictEqual(ok(yield* create(baseUrl, user.token, { name: "One", slug })).organization.slug, slug)
        failed(yield* create(baseUrl, user.token, { name: "Two", slug }), 409, "conflict")
        // Taken by another user's workspace, or by a Personal slug: still a conflict (slugs are global).
        const other = yield* newUser(baseUrl)
        failed(yield* create(baseUrl, other.token, { name: "Three", slug }), 409, "conflict")
        failed(yield* create(baseUrl, other.token, { name: "Four", slug: user.personal.slug }), 409, "conflict")
        const list = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
        assert.deepStrictEqual(list.organizations.map((o: any) => o.name), ["One", "Personal"])
      }))

    it.effect("invalid slug, blank or missing name: 422 with details.fields", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const both = failed(
          yield* create(baseUrl, user.token, { name: "   ", slug: "Bad Slug" }),
          422,
          "validation_failed"
        )
        assert.deepStrictEqual(Object.keys(both.details.fields).sort(), ["name", "slug"])
        assert.isAbove(both.details.fields.name.length, 0)
        assert.isString(both.details.fields.slug[0])
        const missing = failed(yield* create(baseUrl, user.token, {}), 422, "validation_failed")
        assert.property(missing.details.fields, "name")
        for (const slug of ["", "-lead", "UPPER", "under_score", "a".repeat(64), 42]) {
          const error = failed(yield* create(baseUrl, user.token, { name: "Valid", slug }), 422, "validation_failed")
          assert.deepStrictEqual(Object.keys(error.details.fields), ["slug"], JSON.stringify(slug))
        }
        failed(yield* create(baseUrl, user.token, { name: "n".repeat(129) }), 422, "validation_failed")
        // The edges of the valid range are accepted.
        const edge = `${unique()}${"a".repeat(53)}`
        assert.strictEqual(ok(yield* create(baseUrl, user.token, { name: "Edge", slug: edge })).organization.slug, edge)
        const list = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
        assert.lengthOf(list.organizations, 2, "no failed create left a workspace behind")
      }))

    it.effect("list: only the caller's workspaces, newest first", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const alice = yield* newUser(baseUrl, "alice")
        const bob = yield* newUser(baseUrl, "bob")
        const a1 = ok(yield* create(baseUrl, alice.token, { name: "Alice One" })).organization
        const a2 = ok(yield* create(baseUrl, alice.token, { name: "Alice Two" })).organization
        const b1 = ok(yield* create(baseUrl, bob.token, { name: "Bob One" })).organization
        const aliceList = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: alice.token }))
        assert.deepStrictEqual(aliceList.organizations.map((o: any) => o.id), [a2.id, a1.id, alice.personal.id])
        assert.deepStrictEqual(aliceList.organizations[0], a2, "list entries equal the create answer")
        const bobList = ok(yield* call(baseUrl, "GET", "/v1/organizations", { token: bob.token }))
        assert.deepStrictEqual(bobList.organizations.map((o: any) => o.id), [b1.id, bob.personal.id])
        const page = (yield* call(baseUrl, "GET", "/v1/organizations", { token: bob.token })).json as any
        assert.isNull(page.meta.cursor)
      }))

    it.effect("get by org_ id, ws_ id and slug answers the same body", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const org = ok(yield* create(baseUrl, user.token, { name: `Refs ${unique()}` })).organization
        const bodies: Array<unknown> = []
        for (const ref of [org.id, org.workspaceRef, org.slug]) {
          bodies.push(ok(yield* call(baseUrl, "GET", `/v1/organizations/${ref}`, { token: user.token })))
        }
        assert.deepStrictEqual(bodies, [{ organization: org }, { organization: org }, { organization: org }])
        const client = yield* clientFor(baseUrl, user.token)
        const viaClient = yield* client.workspaces.get({ params: { orgId: org.slug } })
        assert.strictEqual(viaClient.organization.id, org.id)
      }))

    it.effect("another user's workspace is 404 by every reference and on every route (never 403)", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const stranger = yield* newUser(baseUrl)
        const child = ok(yield* create(baseUrl, owner.token, { name: `Hidden ${unique()}` })).organization
        for (const org of [owner.personal, child]) {
          for (const ref of [org.id, org.workspaceRef, org.slug]) {
            for (const suffix of ["", "/workspaces", "/effective-access"]) {
              const res = yield* call(baseUrl, "GET", `/v1/organizations/${ref}${suffix}`, { token: stranger.token })
              failed(res, 404, "not_found")
            }
          }
        }
      }))

    it.effect("malformed and unknown workspace references are 404", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const refs = [
          "org_123",
          "ws_nope",
          newId("org_", Date.now()),
          newId("ws_", Date.now()),
          "UPPER-CASE",
          "no-such-slug-anywhere",
          "%20",
          "org_%00",
          "%ZZ",
          "%E2%82"
        ]
        for (const ref of refs) {
          failed(yield* call(baseUrl, "GET", `/v1/organizations/${ref}`, { token: user.token }), 404, "not_found")
          failed(
            yield* call(baseUrl, "GET", `/v1/organizations/${ref}/workspaces`, { token: user.token }),
            404,
            "not_found"
          )
        }
      }))

    it.effect("child workspaces of an account root", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const c1 = ok(yield* create(baseUrl, user.token, { name: "Child One" })).organization
        const c2 = ok(yield* create(baseUrl, user.token, { name: "Child Two" })).organization
        const children = ok(
          yield* call(baseUrl, "GET", `/v1/organizations/${user.personal.slug}/workspaces`, {
            token: user.token
          })
        )
        assert.deepStrictEqual(children.workspaces, [
          { orgId: c2.id, workspaceRef: c2.workspaceRef, name: "Child Two" },
          { orgId: c1.id, workspaceRef: c1.workspaceRef, name: "Child One" }
        ])
        const page = yield* call(baseUrl, "GET", `/v1/organizations/${user.personal.id}/workspaces`, {
          token: user.token
        })
        assert.isNull((page.json as any).meta.cursor)
        // A child workspace has no children of its own.
        const none = ok(
          yield* call(baseUrl, "GET", `/v1/organizations/${c1.workspaceRef}/workspaces`, {
            token: user.token
          })
        )
        assert.deepStrictEqual(none.workspaces, [])
      }))

    it.effect("effective access for self: every permission, the owner allowed directly", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const child = ok(yield* create(baseUrl, user.token, { name: "Access" })).organization
        for (
          const path of [
            `/v1/organizations/${user.personal.id}/effective-access`,
            `/v1/organizations/${child.slug}/effective-access`,
            `/v1/organizations/${child.workspaceRef}/effective-access?subjectId=${user.user.id}`
          ]
        ) {
          const { permissions: decisions } = ok(yield* call(baseUrl, "GET", path, { token: user.token }))
          assert.deepStrictEqual(decisions.map((d: any) => d.action).sort(), [...permissions].sort(), path)
          for (const decision of decisions) {
            assert.isTrue(decision.allow, decision.action)
            assert.strictEqual(decision.via.kind, "direct", decision.action)
            assert.strictEqual(decision.via.role, "owner")
          }
        }
      }))

    it.effect("effective access for another subject: 403 without organization.member.list, 404 for an unknown one", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const owner = yield* newUser(baseUrl)
        const billing = yield* newUser(baseUrl)
        const child = ok(yield* create(baseUrl, owner.token, { name: "Cascade" })).organization
        yield* grant(owner.personal.id, billing.user.id, "billing_admin")
        const access = (token: string, ref: string, subjectId?: string) =>
          call(
            baseUrl,
            "GET",
            `/v1/organizations/${ref}/effective-access${subjectId ? `?subjectId=${subjectId}` : ""}`,
            {
              token
            }
          )
        const byAction = (data: any) => new Map<string, any>(data.permissions.map((d: any) => [d.action, d]))

        // The billing admin sees the workspace and its own access, but may not inspect anyone else's.
        ok(yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}`, { token: billing.token }))
        const own = byAction(ok(yield* access(billing.token, owner.personal.id)))
        assert.isTrue(own.get("billing.manage").allow)
        assert.deepStrictEqual(own.get("organization.read").via, {
          kind: "direct",
          role: "billing_admin",
          scopeKind: "organization",
          scopeRef: null
        })
        assert.isFalse(own.get("organization.member.list").allow)
        assert.isNull(own.get("organization.member.list").via)
        failed(yield* access(billing.token, owner.personal.id, owner.user.id), 403, "forbidden")
        failed(
          yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}/workspaces`, { token: billing.token }),
          403,
          "forbidden"
        )
        // A role on the account root reaches its child workspaces as account_cascade.
        const cascaded = byAction(ok(yield* access(billing.token, child.id)))
        assert.strictEqual(cascaded.get("billing.read").via.kind, "account_cascade")
        assert.isFalse(cascaded.get("audit.read").allow)

        // The owner may inspect the billing admin, and gets 404 for subjects that are not there.
        const inspected = byAction(ok(yield* access(owner.token, owner.personal.id, billing.user.id)))
        assert.isTrue(inspected.get("organization.read").allow)
        assert.isFalse(inspected.get("audit.read").allow)
        const stranger = yield* newUser(baseUrl)
        for (const subject of [stranger.user.id, newId("usr_", Date.now()), "nobody", "sp_unknown"]) {
          failed(yield* access(owner.token, owner.personal.id, subject), 404, "not_found")
        }
      }))

    it.effect("account selection: the earliest owned account root; a shared one is never a candidate", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const sql = yield* SqlClient.SqlClient
        const alice = yield* newUser(baseUrl, "alice")

        // Carol is admin (not owner) on Alice's older root, and owns two roots: her Personal and an older one.
        const carol = yield* newUser(baseUrl, "carol")
        yield* grant(alice.personal.id, carol.user.id, "admin")
        const longAgo = new Date("2020-01-01T00:00:00.000Z")
        const oldRoot = { id: newId("org_", longAgo.getTime()), publicId: newId("ws_", longAgo.getTime()) }
        yield* sql`insert into organizations ${
          sql.insert({
            ...oldRoot,
            name: "Old account",
            slug: `old-${unique()}`,
            kind: "account",
            accountId: oldRoot.publicId,
            isAccountRoot: true,
            createdAt: longAgo,
            updatedAt: longAgo
          })
        }`.pipe(Effect.orDie)
        yield* grant(oldRoot.id, carol.user.id, "owner")
        const placed = ok(yield* create(baseUrl, carol.token, { name: "Placed" })).organization
        assert.strictEqual(placed.accountId, oldRoot.publicId)
        assert.isFalse(placed.isAccountRoot)

        // Dave is admin on Alice's root and owns no root at all: a fresh account is started for him.
        const dave = yield* newUser(baseUrl, "dave")
        yield* grant(alice.personal.id, dave.user.id, "admin")
        yield* sql`delete from role_bindings where subject_id = ${dave.user.id} and role = 'owner'`.pipe(Effect.orDie)
        const fresh = ok(yield* create(baseUrl, dave.token, { name: "Fresh" })).organization
        assert.notStrictEqual(fresh.accountId, alice.personal.workspaceRef)
        assert.notStrictEqual(fresh.accountId, dave.personal.workspaceRef)
        assert.strictEqual(fresh.accountId, fresh.workspaceRef)
        assert.isTrue(fresh.isAccountRoot)
        assert.strictEqual(fresh.kind, "account")
        // And his next workspace lands under that new account.
        const next = ok(yield* create(baseUrl, dave.token, { name: "Next" })).organization
        assert.strictEqual(next.accountId, fresh.workspaceRef)
      }))

    it.effect("routing order: the credential is checked before the workspace", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const missing = newId("org_", Date.now())
        for (const token of [undefined, "not-a-token", "sps_ses_01J00000000000000000000000.bogus"]) {
          const opts = token === undefined ? {} : { token }
          for (
            const path of [
              `/v1/organizations/${missing}`,
              `/v1/organizations/${missing}/effective-access`,
              `/v1/organizations/${user.personal.id}`,
              "/v1/organizations"
            ]
          ) {
            failed(yield* call(baseUrl, "GET", path, opts), 401, "unauthenticated")
          }
          failed(
            yield* call(baseUrl, "POST", "/v1/organizations", { ...opts, body: { name: "x" } }),
            401,
            "unauthenticated"
          )
        }
        // A real session id with a forged secret, and a logged-out session, are 401 even on the user's own workspace.
        const forged = `${user.token.slice(0, -1)}${user.token.endsWith("0") ? "1" : "0"}`
        failed(
          yield* call(baseUrl, "GET", `/v1/organizations/${user.personal.id}`, { token: forged }),
          401,
          "unauthenticated"
        )
        const leaving = yield* newUser(baseUrl)
        ok(yield* call(baseUrl, "POST", "/v1/auth/logout", { token: leaving.token }))
        for (const ref of [leaving.personal.id, missing]) {
          failed(
            yield* call(baseUrl, "GET", `/v1/organizations/${ref}`, { token: leaving.token }),
            401,
            "unauthenticated"
          )
        }
        const other = yield* newUser(baseUrl)
        // Authenticated: the workspace comes next (404), before the route's permission (403).
        failed(
          yield* call(baseUrl, "GET", `/v1/organizations/${other.personal.id}/workspaces`, {
            token: user.token
          }),
          404,
          "not_found"
        )
      }))
  })
}
