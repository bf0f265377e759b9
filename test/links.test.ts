/**
 * Command-line links end to end (run-state.md §1; spec: Command-line workspace link, Run-state plane links table):
 * canonical URLs, the project created from the repository name or named by `projectSlug` (counting against
 * `limit.projects`), an active link answered as it is, `ciSettings` defaults and PATCH, resolve across workspaces with
 * `lastSeenAt`, unlink keeping the project; the scmhost identity of a linked repository from an active connection
 * (connected through the simulator) that sees it. On PGlite, and PostgreSQL when `DATABASE_URL` is set.
 */
import { CliLink, Project, Repository } from "@cp/domain"
import { simAccountId } from "@cp/server/integrations/simulator"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, invalidFields, ok, type Res } from "./support/envelope.ts"
import {
  connectionOf,
  connectScmhost,
  connectThenSetup,
  listenLocal,
  newWorld,
  serverOnScmhostAt
} from "./support/scmhost.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { signInWithPersonal } from "./support/session.ts"

const linkOf = (res: Res) => ok(res, { link: CliLink }).link

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `cli links [${backend}]`,
    (it) => {
      const owner = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "lnk")
        const as = (method: string, path: string, body?: unknown) =>
          call(baseUrl, method, `/v1/organizations/${user.personal.id}${path}`, {
            token: user.token,
            ...(body === undefined ? {} : { body })
          })
        const resolve = (remoteUrl: string) =>
          call(baseUrl, "GET", `/v1/cli/links/resolve?remoteUrl=${encodeURIComponent(remoteUrl)}`, {
            token: user.token
          })
        return { ...user, as, resolve }
      })
      const linksOf = (res: Res) => ok(res, { links: Schema.Array(CliLink) }).links
      const repo = () => `repo-${randomUUID().slice(0, 8)}`

      it.effect("a link is stored canonical; its project is made from the repo name; again: the same link", () =>
        Effect.gen(function*() {
          const { as, personal } = yield* owner
          const name = repo()
          const link = linkOf(yield* as("POST", "/cli/links", { remoteUrl: `git@GitHub.com:Acme/${name}.git` }))
          assert.strictEqual(link.remoteUrl, `https://github.com/Acme/${name}`)
          assert.strictEqual(link.provider, "scmhost")
          assert.strictEqual(link.orgId, personal.id)
          assert.strictEqual(link.orgSlug, personal.slug)
          assert.strictEqual(link.projectSlug, name)
          assert.deepStrictEqual(link.ciSettings, {
            oidcEnabled: false,
            apiKeyEnabled: true,
            allowedRefPattern: "*",
            allowedEnvironments: []
          })
          assert.match(link.id, /^wsl_/)
          assert.isNull(link.lastSeenAt)
          assert.isNull(link.deletedAt)
          assert.strictEqual(link.createdBy.kind, "user")
          const project = ok(yield* as("GET", `/projects/${link.projectId}`), { project: Project }).project
          assert.strictEqual(project.slug, name)
          const again = linkOf(yield* as("POST", "/cli/links", { remoteUrl: `https://github.com/Acme/${name}` }))
          assert.deepStrictEqual(again, link)
          assert.deepStrictEqual(linksOf(yield* as("GET", "/cli/links")).map((l) => l.id), [link.id])
          // Another host is plain git; projectSlug names an existing project, with settings sent on create.
          const other = linkOf(
            yield* as("POST", "/cli/links", {
              remoteUrl: `https://git.example/team/${name}.git`,
              projectSlug: name,
              ciSettings: { oidcEnabled: true, allowedRefPattern: "refs/heads/*" }
            })
          )
          assert.strictEqual(other.provider, "git")
          assert.strictEqual(other.projectId, link.projectId)
          assert.isTrue(other.ciSettings.oidcEnabled)
          assert.strictEqual(other.ciSettings.allowedRefPattern, "refs/heads/*")
          const forProject = linksOf(yield* as("GET", `/projects/${link.projectId}/cli/links`))
          assert.deepStrictEqual(forProject.map((l) => l.id), [other.id, link.id])
        }))

      it.effect("bad remotes are 422: a password, not a remote at all", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          const password = invalidFields(yield* as("POST", "/cli/links", { remoteUrl: "https://u:pw@github.com/a/b" }))
          assert.match(password["remoteUrl"]?.[0] ?? "", /password/)
          assert.property(invalidFields(yield* as("POST", "/cli/links", { remoteUrl: "not a url" })), "remoteUrl")
          assert.property(invalidFields(yield* as("POST", "/cli/links", {})), "remoteUrl")
        }))

      it.effect("a new project counts against limit.projects: at the ceiling the link is 412", () =>
        Effect.gen(function*() {
          const { as } = yield* owner
          // The free plan allows five active projects (docs/decisions.md).
          for (let i = 0; i < 5; i++) {
            ok(yield* as("POST", "/cli/links", { remoteUrl: `https://github.com/a/${repo()}` }))
          }
          failed(
            yield* as("POST", "/cli/links", { remoteUrl: `https://github.com/a/${repo()}` }),
            412,
            "precondition_failed"
          )
        }))

      it.effect("PATCH changes ciSettings; resolve lists visible links, marks them seen; unlink keeps projects", () =>
        Effect.gen(function*() {
          const { as, resolve } = yield* owner
          const name = repo()
          const link = linkOf(yield* as("POST", "/cli/links", { remoteUrl: `https://github.com/acme/${name}` }))
          const patched = linkOf(
            yield* as("PATCH", `/projects/${link.projectId}/cli/links/${link.id}`, {
              ciSettings: { oidcEnabled: true, allowedEnvironments: ["production"] }
            })
          )
          assert.deepStrictEqual(patched.ciSettings, {
            oidcEnabled: true,
            apiKeyEnabled: true,
            allowedRefPattern: "*",
            allowedEnvironments: ["production"]
          })
          const resolved = ok(yield* resolve(`ssh://git@github.com/acme/${name}.git`), {
            candidates: Schema.Array(CliLink),
            links: Schema.Array(CliLink)
          })
          assert.deepStrictEqual(resolved.links.map((l) => l.id), [link.id])
          assert.deepStrictEqual(resolved.candidates, resolved.links)
          assert.isString(resolved.links[0]?.lastSeenAt)
          // Someone else sees nothing.
          const { baseUrl } = yield* TestServer
          const stranger = yield* signInWithPersonal(baseUrl, "lnk")
          const none = ok(
            yield* call(baseUrl, "GET", `/v1/cli/links/resolve?remoteUrl=https://github.com/acme/${name}`, {
              token: stranger.token
            }),
            { candidates: Schema.Array(CliLink), links: Schema.Array(CliLink) }
          )
          assert.deepStrictEqual(none.links, [])
          assert.property(invalidFields(yield* resolve("nope")), "remoteUrl")
          const unlinked = linkOf(yield* as("DELETE", `/projects/${link.projectId}/cli/links/${link.id}`))
          assert.isString(unlinked.deletedAt)
          assert.deepStrictEqual(linksOf(yield* as("GET", `/projects/${link.projectId}/cli/links`)), [])
          ok(yield* as("GET", `/projects/${link.projectId}`), { project: Project })
          failed(
            yield* as("PATCH", `/projects/${link.projectId}/cli/links/${link.id}`, { ciSettings: {} }),
            404,
            "not_found"
          )
          // Linking again makes a new active link.
          const relinked = linkOf(yield* as("POST", "/cli/links", { remoteUrl: `https://github.com/acme/${name}` }))
          assert.notStrictEqual(relinked.id, link.id)
        }))

      it.effect("a repository an active scmhost connection sees gets its provider ids; others stay null", () =>
        Effect.gen(function*() {
          const world = yield* newWorld("lnkscm")
          const account = `Acme-${randomUUID().slice(0, 8)}`
          const { connection } = yield* connectScmhost(world, account)
          const repositories = ok(yield* world.api("GET", `/integrations/${connection.id}/repositories`), {
            repositories: Schema.Array(Repository)
          }).repositories
          const api = repositories.find((r) => r.fullName === `${account}/api`)
          assert.isDefined(api)
          // Matched case-insensitively, as the provider does; the ids are the simulator's.
          const seen = linkOf(
            yield* world.api("POST", "/cli/links", { remoteUrl: `git@github.com:${account.toLowerCase()}/API.git` })
          )
          assert.strictEqual(seen.provider, "scmhost")
          assert.strictEqual(seen.providerRepoId, api?.externalId)
          assert.strictEqual(seen.providerOwnerId, String(simAccountId(account)))
          assert.strictEqual(seen.providerOwnerLogin, account)
          // A repository the installation does not reach: scmhost, but no ids; the link is made all the same.
          const unseen = linkOf(
            yield* world.api("POST", "/cli/links", { remoteUrl: `https://github.com/${account}/${repo()}` })
          )
          assert.strictEqual(unseen.provider, "scmhost")
          assert.isNull(unseen.providerRepoId)
          assert.isNull(unseen.providerOwnerId)
          assert.isNull(unseen.providerOwnerLogin)
          // Another host is plain git, never asked.
          const plain = linkOf(
            yield* world.api("POST", "/cli/links", { remoteUrl: `https://git.example/${account}/web` })
          )
          assert.strictEqual(plain.provider, "git")
          assert.isNull(plain.providerRepoId)
          assert.isNull(plain.providerOwnerId)
          assert.isNull(plain.providerOwnerLogin)
          // A revoked connection sees nothing.
          ok(yield* world.api("DELETE", `/integrations/${connection.id}`))
          const afterRevoke = linkOf(
            yield* world.api("POST", "/cli/links", { remoteUrl: `https://github.com/${account}/web` })
          )
          assert.strictEqual(afterRevoke.provider, "scmhost")
          assert.isNull(afterRevoke.providerRepoId)
          assert.isNull(afterRevoke.providerOwnerLogin)
        }))
    }
  )
}

describe("cli links: the provider fails after the connection is made", () => {
  // The provider knows the installation (so the connection becomes active) and fails every other call.
  const provider = createServer((request, response) => {
    const installation = /^\/app\/installations\/([0-9]+)$/.exec(request.url ?? "")
    if (request.method === "GET" && installation !== null) {
      const now = new Date().toISOString()
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({
        id: Number(installation[1]),
        account: { id: 4242, login: "down-org", type: "Organization" },
        permissions: { metadata: "read" },
        repository_selection: "all",
        created_at: now,
        updated_at: now
      }))
      return
    }
    response.writeHead(503, { "content-type": "application/json" })
    response.end("{}")
  })
  const apiUrl = listenLocal(provider)
  layer(serverOnScmhostAt(apiUrl), { excludeTestServices: true, timeout: 60_000 })("provider failing", (it) => {
    it.effect("the link is still created, with null provider ids", () =>
      Effect.gen(function*() {
        const world = yield* newWorld("lnkdown")
        const { started, setup } = yield* connectThenSetup(world)
        assert.strictEqual(setup.status, 200, setup.text)
        const connection = connectionOf(yield* world.api("GET", `/integrations/${started.connection.id}`))
        assert.strictEqual(connection.status, "active")
        const link = linkOf(
          yield* world.api("POST", "/cli/links", { remoteUrl: "https://github.com/down-org/api" })
        )
        assert.strictEqual(link.provider, "scmhost")
        assert.isNull(link.providerRepoId)
        assert.isNull(link.providerOwnerId)
        assert.isNull(link.providerOwnerLogin)
      }))
  })
})
