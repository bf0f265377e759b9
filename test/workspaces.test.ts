/**
 * Workspaces end to end over real HTTP (spec: Workspaces endpoints, Workspace (organization); contract §4 Routing
 * order, Slugs, Lists): create with slug derivation and account selection, list, get by any reference, child
 * workspaces, effective access. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 *
 * Sharing a workspace needs invitations, which do not exist yet, so the cases that need a second member write the
 * role binding straight into the database (the same rows an accepted invitation would write).
 */
import { ChildWorkspace, Membership, Organization, permissions, User } from "@cp/domain"
import { newId } from "@cp/server/platform/ids"
import { assert, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { decisionByAction, decisionsOf } from "./support/access.ts"
import { failed, invalidFields, ISO_MS, metaOf, ok, type Res, ULID } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const serverWithDatabase = (backend: Exclude<Backend, "memory">) => testServerOver(databaseLayer(backend))

const unique = () => randomUUID().replaceAll("-", "").slice(0, 10)

/** The spec's Workspace fields, each well formed. */
const assertOrganizationShape = (org: typeof Organization.Encoded) => {
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

const organizationOf = (res: Res) => ok(res, { organization: Organization }).organization
const organizationsOf = (res: Res) => ok(res, { organizations: Schema.Array(Organization) }).organizations

for (const backend of sqlBackends) {
  layer(serverWithDatabase(backend), { excludeTestServices: true })(`workspaces [${backend}]`, (it) => {
    const create = (baseUrl: string, token: string, body: unknown) =>
      call(baseUrl, "POST", "/v1/organizations", { token, body })

    /** A fresh user and its `Personal` workspace. */
    const newUser = (baseUrl: string, prefix = "user") =>
      Effect.gen(function*() {
        const email = freshEmail(prefix)
        const session = yield* signIn(baseUrl, { email })
        const organizations = organizationsOf(
          yield* call(baseUrl, "GET", "/v1/organizations", { token: session.token })
        )
        assert.lengthOf(organizations, 1)
        const [personal] = organizations
        if (personal === undefined) return assert.fail("no Personal workspace")
        return { ...session, email, personal }
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
        const profile = ok(yield* call(baseUrl, "GET", "/v1/auth/profile", { token: user.token }), { user: User })
        assert.strictEqual(profile.user.lastOrgSlug, user.personal.slug)
      }))

    it.effect("create: the creator is owner and the workspace lands under the caller's account", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const res = yield* create(baseUrl, user.token, { name: `  Acme Rockets ${unique()}  ` })
        const data = ok(res, { organization: Organization, membership: Membership })
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
          slugs.push(organizationOf(yield* create(baseUrl, user.token, { name })).slug)
        }
        assert.deepStrictEqual(slugs, [`acme-${u}`, `acme-${u}-2`, `acme-${u}-3`])
        // Another user deriving the same slug continues the sequence: slugs are global.
        const other = yield* newUser(baseUrl)
        assert.strictEqual(
          organizationOf(yield* create(baseUrl, other.token, { name: `Acme ${u}` })).slug,
          `acme-${u}-4`
        )
      }))

    it.effect("slug derivation: accents, symbols only, long names", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const u = unique()
        assert.strictEqual(
          organizationOf(yield* create(baseUrl, user.token, { name: `Été Café ${u}` })).slug,
          `ete-cafe-${u}`
        )
        assert.match(organizationOf(yield* create(baseUrl, user.token, { name: "!!!" })).slug, /^workspace(-\d+)?$/)
        const long = `${u}${"x".repeat(110)}`
        const first = organizationOf(yield* create(baseUrl, user.token, { name: long })).slug
        const second = organizationOf(yield* create(baseUrl, user.token, { name: long })).slug
        assert.isAtMost(first.length, 63)
        assert.strictEqual(second, `${first}-2`)
        assert.isAtMost(second.length, 63)
      }))

    it.effect("an explicit slug that is taken is 409 conflict and creates nothing", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const slug = `taken-${unique()}`
        assert.strictEqual(organizationOf(yield* create(baseUrl, user.token, { name: "One", slug })).slug, slug)
        failed(yield* create(baseUrl, user.token, { name: "Two", slug }), 409, "conflict")
        // Taken by another user's workspace, or by a Personal slug: still a conflict (slugs are global).
        const other = yield* newUser(baseUrl)
        failed(yield* create(baseUrl, other.token, { name: "Three", slug }), 409, "conflict")
        failed(yield* create(baseUrl, other.token, { name: "Four", slug: user.personal.slug }), 409, "conflict")
        const list = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
        assert.deepStrictEqual(list.map((o) => o.name), ["One", "Personal"])
      }))

    it.effect("invalid slug, blank or missing name: 422 with details.fields", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const both = invalidFields(yield* create(baseUrl, user.token, { name: "   ", slug: "Bad Slug" }))
        assert.deepStrictEqual(Object.keys(both).sort(), ["name", "slug"])
        assert.isAbove(both["name"]?.length ?? 0, 0)
        assert.isString(both["slug"]?.[0])
        const missing = invalidFields(yield* create(baseUrl, user.token, {}))
        assert.property(missing, "name")
        for (const slug of ["", "-lead", "UPPER", "under_score", "a".repeat(64), 42]) {
          const error = invalidFields(yield* create(baseUrl, user.token, { name: "Valid", slug }))
          assert.deepStrictEqual(Object.keys(error), ["slug"], JSON.stringify(slug))
        }
        failed(yield* create(baseUrl, user.token, { name: "n".repeat(129) }), 422, "validation_failed")
        // The edges of the valid range are accepted.
        const edge = `${unique()}${"a".repeat(53)}`
        assert.strictEqual(organizationOf(yield* create(baseUrl, user.token, { name: "Edge", slug: edge })).slug, edge)
        const list = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: user.token }))
        assert.lengthOf(list, 2, "no failed create left a workspace behind")
      }))

    it.effect("list: only the caller's workspaces, newest first", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const alice = yield* newUser(baseUrl, "alice")
        const bob = yield* newUser(baseUrl, "bob")
        const a1 = organizationOf(yield* create(baseUrl, alice.token, { name: "Alice One" }))
        const a2 = organizationOf(yield* create(baseUrl, alice.token, { name: "Alice Two" }))
        const b1 = organizationOf(yield* create(baseUrl, bob.token, { name: "Bob One" }))
        const aliceList = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: alice.token }))
        assert.deepStrictEqual(aliceList.map((o) => o.id), [a2.id, a1.id, alice.personal.id])
        assert.deepStrictEqual(aliceList[0], a2, "list entries equal the create answer")
        const bobList = organizationsOf(yield* call(baseUrl, "GET", "/v1/organizations", { token: bob.token }))
        assert.deepStrictEqual(bobList.map((o) => o.id), [b1.id, bob.personal.id])
        const page = yield* call(baseUrl, "GET", "/v1/organizations", { token: bob.token })
        assert.isNull(metaOf(page).cursor)
      }))

    it.effect("get by org_ id, ws_ id and slug answers the same body", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const org = organizationOf(yield* create(baseUrl, user.token, { name: `Refs ${unique()}` }))
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
        const child = organizationOf(yield* create(baseUrl, owner.token, { name: `Hidden ${unique()}` }))
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
        const c1 = organizationOf(yield* create(baseUrl, user.token, { name: "Child One" }))
        const c2 = organizationOf(yield* create(baseUrl, user.token, { name: "Child Two" }))
        const children = ok(
          yield* call(baseUrl, "GET", `/v1/organizations/${user.personal.slug}/workspaces`, {
            token: user.token
          }),
          { workspaces: Schema.Array(ChildWorkspace) }
        )
        assert.deepStrictEqual(children.workspaces, [
          { orgId: c2.id, workspaceRef: c2.workspaceRef, name: "Child Two" },
          { orgId: c1.id, workspaceRef: c1.workspaceRef, name: "Child One" }
        ])
        const page = yield* call(baseUrl, "GET", `/v1/organizations/${user.personal.id}/workspaces`, {
          token: user.token
        })
        assert.isNull(metaOf(page).cursor)
        // A child workspace has no children of its own.
        const none = ok(
          yield* call(baseUrl, "GET", `/v1/organizations/${c1.workspaceRef}/workspaces`, {
            token: user.token
          }),
          { workspaces: Schema.Array(ChildWorkspace) }
        )
        assert.deepStrictEqual(none.workspaces, [])
      }))

    it.effect("effective access for self: every permission, the owner allowed directly", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const child = organizationOf(yield* create(baseUrl, user.token, { name: "Access" }))
        for (
          const path of [
            `/v1/organizations/${user.personal.id}/effective-access`,
            `/v1/organizations/${child.slug}/effective-access`,
            `/v1/organizations/${child.workspaceRef}/effective-access?subjectId=${user.user.id}`
          ]
        ) {
          const decisions = decisionsOf(yield* call(baseUrl, "GET", path, { token: user.token }))
          assert.deepStrictEqual(decisions.map((d) => d.action).sort(), [...permissions].sort(), path)
          for (const decision of decisions) {
            assert.isTrue(decision.allow, decision.action)
            assert.strictEqual(decision.via?.kind, "direct", decision.action)
            assert.strictEqual(decision.via?.role, "owner")
          }
        }
      }))

    const access = (token: string, ref: string, subjectId?: string) =>
      Effect.flatMap(TestServer, ({ baseUrl }) =>
        call(
          baseUrl,
          "GET",
          `/v1/organizations/${ref}/effective-access${subjectId ? `?subjectId=${subjectId}` : ""}`,
          { token }
        ))

    /** An owner with a child workspace, and a billing admin of the owner's account root. */
    const withBillingAdmin = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const owner = yield* newUser(baseUrl)
      const billing = yield* newUser(baseUrl)
      const child = organizationOf(yield* create(baseUrl, owner.token, { name: "Cascade" }))
      yield* grant(owner.personal.id, billing.user.id, "billing_admin")
      return { baseUrl, owner, billing, child }
    })

    it.effect("a billing admin sees the workspace and its own access, each allowed action via its direct role", () =>
      Effect.gen(function*() {
        const { baseUrl, owner, billing } = yield* withBillingAdmin
        ok(yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}`, { token: billing.token }))
        const own = decisionByAction(yield* access(billing.token, owner.personal.id))
        assert.isTrue(own("billing.manage").allow)
        assert.deepStrictEqual(own("organization.read").via, {
          kind: "direct",
          role: "billing_admin",
          scopeKind: "organization",
          scopeRef: null
        })
        assert.isFalse(own("organization.member.list").allow)
        assert.isNull(own("organization.member.list").via)
      }))

    it.effect("without organization.member.list, another subject's access and the child list are 403", () =>
      Effect.gen(function*() {
        const { baseUrl, owner, billing } = yield* withBillingAdmin
        failed(yield* access(billing.token, owner.personal.id, owner.user.id), 403, "forbidden")
        failed(
          yield* call(baseUrl, "GET", `/v1/organizations/${owner.personal.id}/workspaces`, { token: billing.token }),
          403,
          "forbidden"
        )
      }))

    it.effect("a role on the account root reaches its child workspaces as account_cascade", () =>
      Effect.gen(function*() {
        const { billing, child } = yield* withBillingAdmin
        const cascaded = decisionByAction(yield* access(billing.token, child.id))
        assert.strictEqual(cascaded("billing.read").via?.kind, "account_cascade")
        assert.isFalse(cascaded("audit.read").allow)
      }))

    it.effect("the owner inspects another subject's access, and gets 404 for a subject that is not there", () =>
      Effect.gen(function*() {
        const { baseUrl, owner, billing } = yield* withBillingAdmin
        const inspected = decisionByAction(yield* access(owner.token, owner.personal.id, billing.user.id))
        assert.isTrue(inspected("organization.read").allow)
        assert.isFalse(inspected("audit.read").allow)
        const stranger = yield* newUser(baseUrl)
        for (const subject of [stranger.user.id, newId("usr_", Date.now()), "nobody", "sp_unknown"]) {
          failed(yield* access(owner.token, owner.personal.id, subject), 404, "not_found")
        }
      }))

    it.effect("account selection: a new workspace lands under the earliest account root its creator owns", () =>
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
        const placed = organizationOf(yield* create(baseUrl, carol.token, { name: "Placed" }))
        assert.strictEqual(placed.accountId, oldRoot.publicId)
        assert.isFalse(placed.isAccountRoot)
      }))

    it.effect("account selection: a creator who owns no root (only a shared one) starts a fresh account", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const sql = yield* SqlClient.SqlClient
        const alice = yield* newUser(baseUrl, "alice")
        // Dave is admin on Alice's root and owns no root at all: a fresh account is started for him.
        const dave = yield* newUser(baseUrl, "dave")
        yield* grant(alice.personal.id, dave.user.id, "admin")
        yield* sql`delete from role_bindings where subject_id = ${dave.user.id} and role = 'owner'`.pipe(Effect.orDie)
        const fresh = organizationOf(yield* create(baseUrl, dave.token, { name: "Fresh" }))
        assert.notStrictEqual(fresh.accountId, alice.personal.workspaceRef)
        assert.notStrictEqual(fresh.accountId, dave.personal.workspaceRef)
        assert.strictEqual(fresh.accountId, fresh.workspaceRef)
        assert.isTrue(fresh.isAccountRoot)
        assert.strictEqual(fresh.kind, "account")
        // And his next workspace lands under that new account.
        const next = organizationOf(yield* create(baseUrl, dave.token, { name: "Next" }))
        assert.strictEqual(next.accountId, fresh.workspaceRef)
      }))

    it.effect("routing order: no, a malformed or an unknown credential is 401 before the workspace is looked at", () =>
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
      }))

    it.effect("routing order: a forged secret or a logged-out session is 401, even on the user's own workspace", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const missing = newId("org_", Date.now())
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
      }))

    it.effect("routing order: once authenticated, the workspace (404) comes before the route's permission (403)", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* newUser(baseUrl)
        const other = yield* newUser(baseUrl)
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
