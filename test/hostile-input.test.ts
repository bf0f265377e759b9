/**
 * Hostile input end to end (issue 10 items 3, 4, 11, 12, 14): every string a request carries refuses U+0000 and
 * unpaired surrogates with 422 on the field, free-form JSON values refuse nesting deeper than 32 levels, effective
 * access refuses another workspace's project, an unknown challenge id of any form is 404, and email addresses
 * refuse look-alike characters while every spelling of one mailbox shares one rate-limit bucket. Runs on PGlite,
 * and on PostgreSQL too when `DATABASE_URL` is set (PostgreSQL text cannot hold either character).
 */
import { Environment, LoginChallenge, Project, Team } from "@cp/domain"
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { dataOf, failed, invalidFields, ok } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, freshEmail, signInWithPersonal } from "./support/session.ts"

const NUL = "a\u0000b"
const LONE = "a\ud800b"

/** JSON text of arrays nested `depth` levels deep around `null` (the top level counts as 1). */
const nested = (depth: number): string => `${"[".repeat(depth)}null${"]".repeat(depth)}`

/** JSON text of objects nested `depth` levels deep (built as text: the test's own JSON.stringify would overflow). */
const nestedObject = (depth: number): string => `${"{\"k\":".repeat(depth)}1${"}".repeat(depth)}`

interface BodyCase {
  readonly name: string
  readonly method: string
  /** The path, with `{org}`, `{project}`, `{env}` and `{team}` filled from the seeded workspace. */
  readonly path: string
  /** The body with the hostile `text` placed in the field under test. */
  readonly body: (text: string) => unknown
  /** The field `details.fields` must name. */
  readonly field: string
  readonly anonymous?: boolean
}

const unique = () => randomUUID().slice(0, 8)

const bodyCases: ReadonlyArray<BodyCase> = [
  { name: "workspace name", method: "POST", path: "/v1/organizations", body: (t) => ({ name: t }), field: "name" },
  {
    name: "project name",
    method: "POST",
    path: "/v1/organizations/{org}/projects",
    body: (t) => ({ name: t }),
    field: "name"
  },
  {
    name: "environment name",
    method: "POST",
    path: "/v1/organizations/{org}/projects/{project}/environments",
    body: (t) => ({ name: t }),
    field: "name"
  },
  {
    name: "team name",
    method: "POST",
    path: "/v1/organizations/{org}/teams",
    body: (t) => ({ name: t }),
    field: "name"
  },
  {
    name: "team rename",
    method: "PATCH",
    path: "/v1/organizations/{org}/teams/{team}",
    body: (t) => ({ name: t }),
    field: "name"
  },
  {
    name: "team member subject",
    method: "POST",
    path: "/v1/organizations/{org}/teams/{team}/members",
    body: (t) => ({ subjectId: t }),
    field: "subjectId"
  },
  {
    name: "setting description",
    method: "POST",
    path: "/v1/organizations/{org}/config/settings",
    body: (t) => ({ key: `k${unique()}`, value: 1, description: t }),
    field: "description"
  },
  {
    name: "setting value (a JSON string)",
    method: "POST",
    path: "/v1/organizations/{org}/config/settings",
    body: (t) => ({ key: `k${unique()}`, value: { nested: [t] } }),
    field: "value"
  },
  {
    name: "setting value (a JSON object key)",
    method: "POST",
    path: "/v1/organizations/{org}/projects/{project}/config/settings",
    body: (t) => ({ key: `k${unique()}`, value: { [t]: true } }),
    field: "value"
  },
  {
    name: "setting key",
    method: "POST",
    path: "/v1/organizations/{org}/config/settings",
    body: (t) => ({ key: t, value: 1 }),
    field: "key"
  },
  {
    name: "feature flag description",
    method: "POST",
    path: "/v1/organizations/{org}/projects/{project}/environments/{env}/config/feature-flags",
    body: (t) => ({ key: `f${unique()}`, enabled: true, description: t }),
    field: "description"
  },
  {
    name: "feature flag value",
    method: "POST",
    path: "/v1/organizations/{org}/config/feature-flags",
    body: (t) => ({ key: `f${unique()}`, enabled: true, value: t }),
    field: "value"
  },
  {
    name: "secret display name",
    method: "POST",
    path: "/v1/organizations/{org}/config/secrets",
    body: (t) => ({ secretKey: `K${unique().toUpperCase().replace(/[^A-Z0-9]/g, "")}`, value: "v", displayName: t }),
    field: "displayName"
  },
  {
    name: "secret value",
    method: "POST",
    path: "/v1/organizations/{org}/projects/{project}/config/secrets",
    body: (t) => ({ secretKey: "HOSTILE", value: t, displayName: "d" }),
    field: "value"
  },
  {
    name: "API key label",
    method: "POST",
    path: "/v1/organizations/{org}/api-keys",
    body: (t) => ({ label: t, role: "viewer" }),
    field: "label"
  },
  {
    name: "invitation email",
    method: "POST",
    path: "/v1/organizations/{org}/invitations",
    body: (t) => ({ email: `${t}@example.test`, role: "viewer" }),
    field: "email"
  },
  {
    name: "invitation token",
    method: "POST",
    path: "/v1/organizations/{org}/invitations/accept",
    body: (t) => ({ token: t }),
    field: "token"
  },
  {
    name: "profile display name",
    method: "PATCH",
    path: "/v1/auth/profile",
    body: (t) => ({ displayName: t }),
    field: "displayName"
  },
  {
    name: "profile last workspace",
    method: "PATCH",
    path: "/v1/auth/profile",
    body: (t) => ({ lastOrgSlug: t }),
    field: "lastOrgSlug"
  },
  {
    name: "login email",
    method: "POST",
    path: "/v1/auth/login/start",
    body: (t) => ({ email: `${t}@example.test` }),
    field: "email",
    anonymous: true
  },
  {
    name: "login challenge id",
    method: "POST",
    path: "/v1/auth/login/complete",
    body: (t) => ({ challengeId: t, code: "123456" }),
    field: "challengeId",
    anonymous: true
  }
]

/** Query parameters: only U+0000 (a lone surrogate cannot be percent-encoded). */
const queryCases: ReadonlyArray<{ readonly name: string; readonly path: string; readonly field: string }> = [
  { name: "outbox recipient", path: "/v1/dev/outbox?to=", field: "to" },
  { name: "effective-access subject", path: "/v1/organizations/{org}/effective-access?subjectId=", field: "subjectId" },
  { name: "secrets scope", path: "/v1/organizations/{org}/config/secrets?scope=", field: "scope" },
  { name: "list cursor", path: "/v1/organizations?cursor=", field: "cursor" },
  { name: "audit category", path: "/v1/organizations/{org}/audit?category=", field: "category" },
  { name: "resolve key", path: "/v1/organizations/{org}/config/settings/resolve?key=", field: "key" }
]

for (const backend of sqlBackends) {
  layer(testServerOver(databaseLayer(backend)), { excludeTestServices: true })(`hostile input [${backend}]`, (it) => {
    /** An owner with a project, an environment and a team in its `Personal` workspace. */
    const seeded = (baseUrl: string) =>
      Effect.gen(function*() {
        const owner = yield* signInWithPersonal(baseUrl, "hostile")
        const org = owner.personal.id
        const project = yield* createProject(baseUrl, owner.token, org)
        const env = ok(
          yield* call(baseUrl, "POST", `/v1/organizations/${org}/projects/${project}/environments`, {
            token: owner.token,
            body: { name: "Staging" }
          }),
          { environment: Environment }
        ).environment.id
        const team = ok(
          yield* call(baseUrl, "POST", `/v1/organizations/${org}/teams`, {
            token: owner.token,
            body: { name: `T ${unique()}` }
          }),
          { team: Team }
        ).team
        const fill = (path: string) =>
          path.replace("{org}", org).replace("{project}", project).replace("{env}", env)
            .replace("{team}", team.id)
        return { owner, fill }
      })

    it.effect("NUL and lone surrogates in every body string answer 422 on the field", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { fill, owner } = yield* seeded(baseUrl)
        for (const hostile of [NUL, LONE]) {
          for (const c of bodyCases) {
            const res = yield* call(baseUrl, c.method, fill(c.path), {
              ...(c.anonymous === true ? {} : { token: owner.token }),
              body: c.body(hostile)
            })
            const label = `${c.name} with ${JSON.stringify(hostile)}: ${res.status} ${res.text}`
            assert.strictEqual(res.status, 422, label)
            assert.property(invalidFields(res), c.field, label)
          }
        }
      }))

    it.effect("NUL in every string query parameter answers 422 on the parameter", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { fill, owner } = yield* seeded(baseUrl)
        for (const c of queryCases) {
          const res = yield* call(baseUrl, "GET", fill(c.path) + encodeURIComponent(NUL), { token: owner.token })
          const label = `${c.name}: ${res.status} ${res.text}`
          assert.strictEqual(res.status, 422, label)
          assert.property(invalidFields(res), c.field, label)
        }
      }))

    it.effect("single-line fields refuse control characters; descriptions keep line breaks", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { fill, owner } = yield* seeded(baseUrl)
        for (const name of ["a\u001bb", "a\nb", "a\u0085b"]) {
          const res = yield* call(baseUrl, "POST", fill("/v1/organizations/{org}/projects"), {
            token: owner.token,
            body: { name }
          })
          assert.property(invalidFields(res), "name", JSON.stringify(name))
        }
        const created = yield* call(baseUrl, "POST", fill("/v1/organizations/{org}/config/settings"), {
          token: owner.token,
          body: { key: `k${unique()}`, value: "ok \ud83d\ude00", description: "line one\n\tline two" }
        })
        ok(created)
      }))

    it.effect("JSON values deeper than 32 levels answer 422 on value; 32 levels are stored (under the body cap)", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { fill, owner } = yield* seeded(baseUrl)
        const settings = fill("/v1/organizations/{org}/config/settings")
        const flags = fill("/v1/organizations/{org}/projects/{project}/config/feature-flags")
        const post = (path: string, fields: string, value: string) =>
          call(baseUrl, "POST", path, { token: owner.token, body: `{${fields},"value":${value}}` })
        ok(yield* post(settings, `"key":"deep32"`, nested(32)))
        ok(yield* post(settings, `"key":"object32"`, nestedObject(32)))
        for (const depth of [33, 5000, 150_000]) {
          for (const value of [nested(depth), nestedObject(depth)]) {
            const created = yield* post(settings, `"key":"d${depth}","valueType":"json"`, value)
            assert.match(invalidFields(created)["value"]?.join() ?? "", /32 levels/, created.text)
            const flag = yield* post(flags, `"key":"f${depth}","enabled":true`, value)
            assert.property(invalidFields(flag), "value")
            const patched = yield* call(baseUrl, "PATCH", `${settings}/stg_01JAAAAAAAAAAAAAAAAAAAAAAA`, {
              token: owner.token,
              body: `{"value":${value}}`
            })
            assert.property(invalidFields(patched), "value")
          }
        }
      }))

    it.effect("a body nested 400000 levels deep is refused without failing the server, idempotency key or not", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { fill, owner } = yield* seeded(baseUrl)
        const deep = nested(400_000)
        for (const headers of [{}, { "idempotency-key": `deep-${unique()}` }]) {
          for (const path of ["/v1/organizations/{org}/projects", "/v1/organizations/{org}/config/settings"]) {
            const res = yield* call(baseUrl, "POST", fill(path), { token: owner.token, body: deep, headers })
            failed(res, 422, "validation_failed")
          }
        }
      }))

    it.effect("effective access for another workspace's project answers 422 on projectId", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const { fill, owner } = yield* seeded(baseUrl)
        const other = yield* signInWithPersonal(baseUrl, "other")
        const foreign = yield* createProject(baseUrl, other.token, other.personal.id)
        const res = yield* call(baseUrl, "GET", fill(`/v1/organizations/{org}/effective-access?projectId=${foreign}`), {
          token: owner.token
        })
        assert.deepStrictEqual(invalidFields(res), { projectId: ["names no project in this workspace"] })
        const mine = ok(
          yield* call(baseUrl, "GET", fill("/v1/organizations/{org}/projects/{project}"), { token: owner.token }),
          { project: Project }
        ).project.id
        ok(
          yield* call(baseUrl, "GET", fill(`/v1/organizations/{org}/effective-access?projectId=${mine}`), {
            token: owner.token
          })
        )
      }))

    it.effect("login complete with a challenge id of any other form answers 404 not_found", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        for (const challengeId of ["chl_1", "not-an-id", "00000000-0000-7000-8000-000000000000", "x".repeat(255)]) {
          const res = yield* call(baseUrl, "POST", "/v1/auth/login/complete", { body: { challengeId, code: "123456" } })
          failed(res, 404, "not_found")
        }
        // Empty and overlong are malformed input, not ids.
        const empty = yield* call(baseUrl, "POST", "/v1/auth/login/complete", { body: { challengeId: "", code: "1" } })
        assert.includeMembers(Object.keys(invalidFields(empty)), ["challengeId", "code"])
      }))

    it.effect("full-width, zero-width and control characters in an email address answer 422 on email", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const local = `u${unique()}`
        for (
          const email of [
            `${local}\u200b@example.test`, // zero-width space
            `${local}@exa\u200dmple.test`, // zero-width joiner
            `\ufeff${local}@example.test`, // byte-order mark
            `${local}@ｅxample.test`, // full-width e
            `ｕser@example.test`, // full-width u
            `${local}＠example.test`, // full-width @
            `${local}@example\uff0etest` // full-width full stop
          ]
        ) {
          const res = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
          assert.property(invalidFields(res), "email", email)
        }
      }))

    it.effect("every spelling of one mailbox counts against one rate-limit identity", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const local = `limit${unique()}`
        // Ten per window per identity (auth family); the spellings share the count.
        const spellings = [
          `${local}@example.test`,
          `${local.toUpperCase()}@EXAMPLE.TEST`,
          `${local}@example.test.`,
          ` ${local}@Example.Test. `,
          `"${local}"@example.test`
        ]
        for (let i = 0; i < 10; i++) {
          const email = spellings[i % spellings.length] ?? ""
          const res = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
          dataOf(res, LoginChallenge)
        }
        for (const email of spellings) {
          const res = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } })
          assert.strictEqual(failed(res, 429, "rate_limited").details["scope"], "identity", email)
        }
        // An internationalized domain and its ASCII (IDNA) form are one mailbox too.
        const idn = [`${local}@bücher.example`, `${local}@XN--BCHER-KVA.example.`]
        for (let i = 0; i < 10; i++) {
          dataOf(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email: idn[i % 2] } }), LoginChallenge)
        }
        for (const email of idn) {
          failed(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), 429, "rate_limited")
        }
        // Another mailbox is not affected.
        dataOf(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email: freshEmail() } }), LoginChallenge)
      }))

    it.effect("a trailing dot on the domain signs in the same user", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const first = yield* signInWithPersonal(baseUrl, "dot")
        const start = yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email: `${first.email}.` } })
        const challenge = dataOf(start, LoginChallenge)
        assert.match(challenge.challengeId, /^chl_/)
        const outbox = yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(first.email)}`)
        assert.include(outbox.text, challenge.challengeId)
      }))
  })
}
