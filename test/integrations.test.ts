/**
 * Integrations end to end over real HTTP (spec "Integrations", Authentication §8; integrations-agents.md §1–3):
 * scmhost connect through the simulator's install page and the setup callback, the repositories, a repo link with a
 * branch map, a signed `push` through the simulator to the ingress (the `scm.push` event and the delivery
 * `emitted`), and a repository-scoped token through the broker; then every bad input: unsigned, badly signed and
 * replayed webhooks, forged, reused and expired setup states, an installation of another workspace or an old one,
 * broker requests for unlinked repositories or ungranted permissions, a provider that is down, and no token anywhere.
 */
import { AuditEntry, InboundDelivery, IntegrationConnection, Organization, RepoLink, Repository } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createHmac, randomUUID } from "node:crypto"
import { createServer } from "node:http"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlRun, tokenEnv } from "./support/cli.ts"
import { failed, invalidFields, ok } from "./support/envelope.ts"
import { assertNotInDatabase, captured, CaptureLogs } from "./support/plaintext.ts"
import {
  connectionOf,
  connectScmhost,
  connectThenSetup,
  installThroughSimulator,
  listenLocal,
  newWorld,
  serverOnScmhostAt,
  type World
} from "./support/scmhost.ts"
import { call, sqlBackends, testServerOver } from "./support/server.ts"

const SECRET = "dev-scmhost-webhook-secret"
const sign = (body: string, secret = SECRET) => `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`

/** Sends a webhook exactly as the provider would, signed over the raw bytes. */
const sendWebhook = (
  baseUrl: string,
  event: string,
  payload: unknown,
  options: { readonly deliveryId?: string; readonly signature?: string | null } = {}
) => {
  const body = JSON.stringify(payload)
  const signature = options.signature === undefined ? sign(body) : options.signature
  return call(baseUrl, "POST", "/ingress/scmhost/webhook", {
    body,
    headers: {
      "content-type": "application/json",
      "x-scmhost-event": event,
      "x-scmhost-delivery": options.deliveryId ?? randomUUID(),
      ...(signature === null ? {} : { "x-hub-signature-256": signature })
    }
  })
}

const deliveriesOf = (world: World, connectionId: string) =>
  Effect.map(
    world.api("GET", `/integrations/${connectionId}/deliveries`),
    (res) => ok(res, { deliveries: Schema.Array(InboundDelivery) }).deliveries
  )

/** Normalization may finish after the answer: waits (briefly, in real time) until the delivery settles. */
const settled = (world: World, connectionId: string, deliveryKey: string) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 100; attempt++) {
      const found = (yield* deliveriesOf(world, connectionId)).find((d) => d.deliveryKey === deliveryKey)
      if (found !== undefined && found.status !== "received" && found.status !== "attributed") return found
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    }
    return yield* Effect.die(new Error(`delivery ${deliveryKey} never settled`))
  })

const auditOf = (world: World, eventType: string) =>
  Effect.map(
    world.api("GET", `/audit?eventType=${eventType}`),
    (res) => ok(res, { auditEntries: Schema.Array(AuditEntry) }).auditEntries
  )

const pushPayload = (installationId: string, repo: Repository, branch: string, sha = "a".repeat(40)) => ({
  ref: `refs/heads/${branch}`,
  before: "0".repeat(40),
  after: sha,
  compare: `https://scmhost.example/${repo.fullName}/compare`,
  repository: { id: Number(repo.externalId), full_name: repo.fullName },
  sender: { login: "octo" },
  installation: { id: Number(installationId) }
})

/** Connected, with the repositories and one linked to the project (`main` → `production`). */
const linkedWorld = Effect.gen(function*() {
  const world = yield* newWorld()
  const connected = yield* connectScmhost(world)
  const repositories = ok(
    yield* world.api("GET", `/integrations/${connected.connection.id}/repositories`),
    { repositories: Schema.Array(Repository) }
  ).repositories
  const repo = repositories[0]!
  const link = ok(
    yield* world.api("POST", `/projects/${world.projectId}/repo-links`, {
      connectionId: connected.connection.id,
      repoExternalId: repo.externalId,
      branchEnvMap: { main: "production" }
    }),
    { repoLink: RepoLink }
  ).repoLink
  return { world, connected, repositories, repo, link }
})

for (const backend of sqlBackends) {
  layer(
    Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer).pipe(Layer.provideMerge(CaptureLogs)),
    { excludeTestServices: true, timeout: 180_000 }
  )(`integrations [${backend}]`, (it) => {
    it.effect("done when: install page, setup, repositories, repo link, signed push, scm.push, broker token", () =>
      Effect.gen(function*() {
        const world = yield* newWorld()
        const connected = yield* connectScmhost(world, "acme-done")
        const connection = connected.connection
        assert.strictEqual(connection.status, "active")
        assert.strictEqual(connection.externalAccountLogin, "acme-done")
        assert.strictEqual(connection.externalAccountType, "Organization")
        assert.strictEqual(connection.repositorySelection, "all")
        assert.isNotNull(connection.connectedAt)
        assert.strictEqual(connection.scope, "account")

        const repositories = ok(
          yield* world.api("GET", `/integrations/${connection.id}/repositories`),
          { repositories: Schema.Array(Repository) }
        ).repositories
        assert.deepStrictEqual(repositories.map((r) => r.fullName), [
          "acme-done/api",
          "acme-done/web",
          "acme-done/infra"
        ])
        const filtered = ok(
          yield* world.api("GET", `/integrations/${connection.id}/repositories?q=WEB`),
          { repositories: Schema.Array(Repository) }
        ).repositories
        assert.deepStrictEqual(filtered.map((r) => r.fullName), ["acme-done/web"])

        const repo = repositories[0]!
        const link = ok(
          yield* world.api("POST", `/projects/${world.projectId}/repo-links`, {
            connectionId: connection.id,
            repoExternalId: repo.externalId,
            branchEnvMap: { main: "production" }
          }),
          { repoLink: RepoLink }
        ).repoLink
        assert.strictEqual(link.repoFullName, "acme-done/api")
        assert.strictEqual(link.defaultBranch, "main")
        assert.deepStrictEqual(link.branchEnvMap, { main: "production" })

        // The simulator sends a signed push to the server's own ingress.
        const sha = "b".repeat(40)
        const sent = yield* call(
          world.baseUrl,
          "POST",
          `/dev/scmhost/installations/${connected.installationId}/events`,
          {
            body: {
              event: "push",
              payload: {
                ref: "refs/heads/main",
                after: sha,
                repository: { id: Number(repo.externalId), full_name: repo.fullName }
              }
            }
          }
        )
        assert.strictEqual(sent.status, 200)
        const deliveryKey = (sent.json as { deliveryId: string }).deliveryId
        assert.strictEqual((sent.json as { status: number }).status, 200)
        const delivery = yield* settled(world, connection.id, deliveryKey)
        assert.strictEqual(delivery.status, "emitted")
        assert.strictEqual(delivery.event, "push")
        assert.isTrue(delivery.signatureOk)

        const pushes = yield* auditOf(world, "scm.push")
        assert.strictEqual(pushes.length, 1)
        const push = pushes[0]!
        assert.strictEqual(push.projectId, world.projectId)
        assert.isNotNull(push.environmentId)
        assert.deepInclude(push.payload, {
          repoFullName: "acme-done/api",
          ref: "refs/heads/main",
          sha,
          branch: "main",
          environmentSlug: "production",
          repoLinkId: link.id
        })

        // The broker: a token for the linked repository, contents read.
        const issued = ok(
          yield* world.api("POST", "/integrations/scmhost/token", {
            repositories: [repo.externalId],
            permissions: { contents: "read" }
          }),
          {
            token: Schema.String,
            expiresAt: Schema.String,
            repositories: Schema.Array(Schema.Unknown),
            permissions: Schema.Unknown
          }
        )
        assert.match(issued.token, /^ghs_/)
        assert.isAtMost(Date.parse(issued.expiresAt) - Date.now(), 60 * 60 * 1000 + 1000)
        assert.deepStrictEqual(issued.repositories, [{ externalId: repo.externalId, fullName: repo.fullName }])
        assert.deepStrictEqual(issued.permissions, { contents: "read" })
        // The token works against the provider: it lists exactly the one repository.
        const listed = yield* Effect.promise(() =>
          fetch(`${world.baseUrl}/dev/scmhost/api/installation/repositories`, {
            headers: { authorization: `Bearer ${issued.token}` }
          }).then((r) => r.json() as Promise<{ total_count: number }>)
        )
        assert.strictEqual(listed.total_count, 1)
        const audit = yield* auditOf(world, "integration.token.issued")
        assert.strictEqual(audit.length, 1)
        assert.notInclude(JSON.stringify(audit), issued.token)

        // No token anywhere: database (every text column), logs.
        yield* assertNotInDatabase([issued.token, issued.token.slice(4, 40)], "integration_deliveries.body_base64")
        assert.isFalse(captured.some((line) => line.includes(issued.token)), "a log line holds the token")
      }))

    it.effect("webhooks: unsigned, badly signed and wrongly keyed deliveries are 401 and store nothing", () =>
      Effect.gen(function*() {
        const { connected, repo, world } = yield* linkedWorld
        const payload = pushPayload(connected.installationId, repo, "main")
        const unsigned = yield* sendWebhook(world.baseUrl, "push", payload, { signature: null })
        failed(unsigned, 401, "unauthenticated")
        failed(
          yield* sendWebhook(world.baseUrl, "push", payload, { signature: "sha256=deadbeef" }),
          401,
          "unauthenticated"
        )
        failed(
          yield* sendWebhook(world.baseUrl, "push", payload, { signature: sign("{}", SECRET) }),
          401,
          "unauthenticated"
        )
        failed(
          yield* sendWebhook(world.baseUrl, "push", payload, { signature: sign(JSON.stringify(payload), "wrong") }),
          401,
          "unauthenticated"
        )
        // A body that is not even JSON is refused on its signature, before any parsing.
        const garbage = yield* call(world.baseUrl, "POST", "/ingress/scmhost/webhook", {
          body: "{not json",
          headers: { "content-type": "application/json", "x-hub-signature-256": "sha256=00" }
        })
        failed(garbage, 401, "unauthenticated")
        assert.deepStrictEqual(yield* deliveriesOf(world, connected.connection.id), [])
      }))

    it.effect("webhooks: a replayed delivery id answers 200 and is processed once; replay re-runs it", () =>
      Effect.gen(function*() {
        const { connected, repo, world } = yield* linkedWorld
        const deliveryId = randomUUID()
        const payload = pushPayload(connected.installationId, repo, "main", "c".repeat(40))
        const first = yield* sendWebhook(world.baseUrl, "push", payload, { deliveryId })
        assert.strictEqual(first.status, 200)
        const delivery = yield* settled(world, connected.connection.id, deliveryId)
        const again = yield* sendWebhook(world.baseUrl, "push", payload, { deliveryId })
        assert.strictEqual(again.status, 200)
        assert.strictEqual((again.json as { data: { deliveryId: string } }).data.deliveryId, delivery.id)
        assert.strictEqual((yield* deliveriesOf(world, connected.connection.id)).length, 1)
        assert.strictEqual((yield* auditOf(world, "scm.push")).length, 1)

        const replayed = ok(
          yield* world.api("POST", `/integrations/${connected.connection.id}/deliveries/${delivery.id}/replay`),
          { delivery: InboundDelivery }
        ).delivery
        assert.strictEqual(replayed.status, "emitted")
        assert.strictEqual((yield* auditOf(world, "scm.push")).length, 2)
      }))

    it.effect("webhooks: unlinked repositories and unknown installations are skipped; pull requests normalized", () =>
      Effect.gen(function*() {
        const { connected, repo, repositories, world } = yield* linkedWorld
        const other = repositories[1]!
        const key = randomUUID()
        yield* sendWebhook(world.baseUrl, "push", pushPayload(connected.installationId, other, "main"), {
          deliveryId: key
        })
        const skipped = yield* settled(world, connected.connection.id, key)
        assert.strictEqual(skipped.status, "skipped")
        assert.strictEqual(skipped.failureReason, "no_repo_link")

        const merged = randomUUID()
        yield* sendWebhook(world.baseUrl, "pull_request", {
          action: "closed",
          pull_request: {
            merged: true,
            merge_commit_sha: "d".repeat(40),
            head: { ref: "feature", sha: "e".repeat(40) },
            base: { ref: "main" },
            html_url: "https://x/pr/1"
          },
          repository: { id: Number(repo.externalId), full_name: repo.fullName },
          installation: { id: Number(connected.installationId) }
        }, { deliveryId: merged })
        assert.strictEqual((yield* settled(world, connected.connection.id, merged)).status, "emitted")
        const entries = yield* auditOf(world, "scm.pull_request.merged")
        assert.deepInclude(entries[0]!.payload, { branch: "main", environmentSlug: "production", sha: "d".repeat(40) })

        const unknown = yield* sendWebhook(world.baseUrl, "push", pushPayload("99999999", repo, "main"))
        assert.strictEqual(unknown.status, 200)
      }))

    it.effect("a verified push to a mapped branch refreshes the environment and brings an archived one back", () =>
      Effect.gen(function*() {
        const { connected, repo, world } = yield* linkedWorld
        const environments = ok(yield* world.api("GET", `/projects/${world.projectId}/environments`), {
          environments: Schema.Array(Schema.Struct({ id: Schema.String, slug: Schema.String, status: Schema.String }))
        }).environments
        const production = environments.find((e) => e.slug === "production")!
        ok(yield* world.api("DELETE", `/projects/${world.projectId}/environments/${production.id}`))
        const key = randomUUID()
        yield* sendWebhook(world.baseUrl, "push", pushPayload(connected.installationId, repo, "main"), {
          deliveryId: key
        })
        assert.strictEqual((yield* settled(world, connected.connection.id, key)).status, "emitted")
        const after = ok(yield* world.api("GET", `/projects/${world.projectId}/environments/${production.id}`), {
          environment: Schema.Struct({ status: Schema.String, lastActiveAt: Schema.NullOr(Schema.String) })
        }).environment
        assert.strictEqual(after.status, "active")
        assert.isNotNull(after.lastActiveAt)
      }))

    it.effect("setup: forged, reused and missing states are 401 (JSON or an HTML page) and change nothing", () =>
      Effect.gen(function*() {
        const world = yield* newWorld()
        const install = yield* installThroughSimulator(world, `forge-${randomUUID().slice(0, 6)}`)
        const json = { accept: "application/json" }
        const forged = install.setupPath.replace(/state=[^&]+/, "state=eyJ4IjoxfQ.AAAA")
        failed(yield* call(world.baseUrl, "GET", forged, { headers: json }), 401, "unauthenticated")
        const page = yield* call(world.baseUrl, "GET", forged)
        assert.strictEqual(page.status, 401)
        assert.include(page.headers.get("content-type") ?? "", "text/html")
        failed(
          yield* call(world.baseUrl, "GET", install.setupPath.replace(/&state=[^&]+/, ""), { headers: json }),
          401,
          "unauthenticated"
        )
        assert.strictEqual(
          connectionOf(yield* world.api("GET", `/integrations/${install.started.connection.id}`)).status,
          "pending"
        )
        const done = yield* call(world.baseUrl, "GET", install.setupPath, { headers: json })
        assert.strictEqual(
          ok(done, { connection: IntegrationConnection, redirectUrl: Schema.String }).connection.status,
          "active"
        )
        failed(yield* call(world.baseUrl, "GET", install.setupPath, { headers: json }), 401, "unauthenticated")
      }))

    it.effect("setup: another workspace's installation is 409; an old installation id is refused", () =>
      Effect.gen(function*() {
        const first = yield* newWorld("first")
        const connected = yield* connectScmhost(first)
        const second = yield* newWorld("second")
        // Provider timestamps have whole seconds: the first installation must be from an earlier second.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1100)))
        const started = ok(yield* second.api("POST", "/integrations/scmhost/connect", {}), {
          connection: IntegrationConnection,
          installUrl: Schema.String
        })
        const state = new URL(started.installUrl).searchParams.get("state") ?? ""
        // The second workspace claims the first's installation id, which was created before its state.
        const spoof = yield* call(
          second.baseUrl,
          "GET",
          `/ingress/scmhost/setup?installation_id=${connected.installationId}&setup_action=install&state=${
            encodeURIComponent(state)
          }`,
          { headers: { accept: "application/json" } }
        )
        assert.strictEqual(spoof.status, 412)
        // Re-installing on that account (an update, fresh) still cannot bind it twice.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1100)))
        const again = yield* installThroughSimulator(second, connected.account)
        assert.strictEqual(again.installationId, connected.installationId)
        failed(
          yield* call(second.baseUrl, "GET", again.setupPath, { headers: { accept: "application/json" } }),
          409,
          "conflict"
        )
      }))

    it.effect("broker: unlinked repositories and ungranted permissions are 403 before the provider is called", () =>
      Effect.gen(function*() {
        const { repo, repositories, world } = yield* linkedWorld
        const unlinked = yield* world.api("POST", "/integrations/scmhost/token", {
          repositories: [repositories[2]!.externalId],
          permissions: { contents: "read" }
        })
        assert.strictEqual(failed(unlinked, 403, "forbidden").details["repository"], repositories[2]!.externalId)
        const ungranted = yield* world.api("POST", "/integrations/scmhost/token", {
          repositories: [repo.externalId],
          permissions: { administration: "write" }
        })
        assert.strictEqual(failed(ungranted, 403, "forbidden").details["permission"], "administration")
        const tooHigh = yield* world.api("POST", "/integrations/scmhost/token", {
          repositories: [repo.externalId],
          permissions: { metadata: "write" }
        })
        assert.strictEqual(failed(tooHigh, 403, "forbidden").details["permission"], "metadata")
        const template = ok(
          yield* world.api("POST", "/integrations/scmhost/token", {
            repositories: [repo.externalId],
            template: "ci-status"
          }),
          { permissions: Schema.Unknown }
        )
        assert.deepStrictEqual(template.permissions, { checks: "write", statuses: "write", metadata: "read" })
        invalidFields(yield* world.api("POST", "/integrations/scmhost/token", { repositories: [repo.externalId] }))
        assert.strictEqual((yield* auditOf(world, "integration.token.issued")).length, 1)
      }))

    it.effect("repo links: bad environment, unknown repository, duplicate, unlink; revoke stops the broker", () =>
      Effect.gen(function*() {
        const { connected, link, repo, repositories, world } = yield* linkedWorld
        const base = { connectionId: connected.connection.id }
        const badEnv = yield* world.api("POST", `/projects/${world.projectId}/repo-links`, {
          ...base,
          repoExternalId: repositories[1]!.externalId,
          branchEnvMap: { main: "production", dev: "nowhere" }
        })
        assert.deepStrictEqual(Object.keys(invalidFields(badEnv)), ["branchEnvMap.dev"])
        invalidFields(
          yield* world.api("POST", `/projects/${world.projectId}/repo-links`, { ...base, repoExternalId: "42" })
        )
        failed(
          yield* world.api("POST", `/projects/${world.projectId}/repo-links`, {
            ...base,
            repoExternalId: repo.externalId
          }),
          409,
          "conflict"
        )
        const listed = ok(yield* world.api("GET", `/projects/${world.projectId}/repo-links`), {
          repoLinks: Schema.Array(RepoLink)
        }).repoLinks
        assert.deepStrictEqual(listed.map((l) => l.id), [link.id])
        const patched = ok(
          yield* world.api("PATCH", `/projects/${world.projectId}/repo-links/${link.id}`, {
            branchEnvMap: {}
          }),
          { repoLink: RepoLink }
        ).repoLink
        assert.deepStrictEqual(patched.branchEnvMap, {})
        const removed = ok(yield* world.api("DELETE", `/projects/${world.projectId}/repo-links/${link.id}`), {
          repoLink: RepoLink
        }).repoLink
        assert.isNotNull(removed.deletedAt)
        failed(yield* world.api("DELETE", `/projects/${world.projectId}/repo-links/${link.id}`), 404, "not_found")

        ok(
          yield* world.api("POST", `/projects/${world.projectId}/repo-links`, {
            ...base,
            repoExternalId: repo.externalId
          })
        )
        const revoked = connectionOf(yield* world.api("DELETE", `/integrations/${connected.connection.id}`))
        assert.strictEqual(revoked.status, "revoked")
        assert.isNotNull(revoked.revokedAt)
        failed(
          yield* world.api("POST", "/integrations/scmhost/token", {
            repositories: [repo.externalId],
            permissions: { contents: "read" }
          }),
          403,
          "forbidden"
        )
        assert.strictEqual(
          connectionOf(yield* world.api("GET", `/integrations/${connected.connection.id}`)).status,
          "revoked"
        )
      }))

    it.effect("sharing: a child sees an account connection (auto), or only with a grant (granted)", () =>
      Effect.gen(function*() {
        const world = yield* newWorld("share")
        const connected = yield* connectScmhost(world)
        const child = ok(
          yield* call(world.baseUrl, "POST", "/v1/organizations", { token: world.token, body: { name: "Child" } }),
          { organization: Organization }
        ).organization
        const childList = Effect.map(
          call(world.baseUrl, "GET", `/v1/organizations/${child.id}/integrations`, { token: world.token }),
          (res) => ok(res, { connections: Schema.Array(IntegrationConnection) }).connections
        )
        const inherited = (yield* childList)[0]!
        assert.strictEqual(inherited.id, connected.connection.id)
        assert.isTrue(inherited.inherited)
        assert.strictEqual(inherited.sharedByName, "Personal")
        // The child can use it but not change it.
        const childPatch = yield* call(
          world.baseUrl,
          "DELETE",
          `/v1/organizations/${child.id}/integrations/${inherited.id}`,
          {
            token: world.token
          }
        )
        failed(childPatch, 403, "forbidden")

        ok(yield* world.api("PATCH", `/integrations/${connected.connection.id}`, { shareMode: "granted" }))
        assert.deepStrictEqual(yield* childList, [])
        const grant = ok(
          yield* world.api("POST", `/integrations/${connected.connection.id}/grants`, { workspaceOrgId: child.id }),
          { grant: Schema.Struct({ connectionId: Schema.String, workspaceOrgId: Schema.String }) }
        ).grant
        assert.strictEqual(grant.workspaceOrgId, child.id)
        failed(
          yield* world.api("POST", `/integrations/${connected.connection.id}/grants`, { workspaceOrgId: child.id }),
          409,
          "conflict"
        )
        invalidFields(
          yield* world.api("POST", `/integrations/${connected.connection.id}/grants`, { workspaceOrgId: world.orgId })
        )
        assert.strictEqual((yield* childList).length, 1)
        ok(yield* world.api("DELETE", `/integrations/${connected.connection.id}/grants/${child.id}`))
        assert.deepStrictEqual(yield* childList, [])
        failed(
          yield* world.api("DELETE", `/integrations/${connected.connection.id}/grants/${child.id}`),
          404,
          "not_found"
        )
      }))

    it.effect("scope templates: declared and custom, subset rule, duplicates, soft retirement, broker use", () =>
      Effect.gen(function*() {
        const { repo, world } = yield* linkedWorld
        const path = "/integrations/providers/scmhost/scope-templates"
        const listed = ok(yield* world.api("GET", path), {
          scopeTemplates: Schema.Array(Schema.Struct({ templateId: Schema.String, status: Schema.String }))
        }).scopeTemplates
        assert.deepStrictEqual(listed.map((t) => t.templateId), ["repo-read", "repo-write", "ci-status"])
        const created = yield* world.api("POST", path, {
          templateId: "deploy-bot",
          displayName: "Deploy bot",
          permissions: { contents: "read", deployments: "write" }
        })
        assert.strictEqual(created.status, 200, created.text)
        failed(
          yield* world.api("POST", path, { templateId: "deploy-bot", displayName: "Again", permissions: {} }),
          409,
          "conflict"
        )
        failed(
          yield* world.api("POST", path, { templateId: "repo-read", displayName: "Again", permissions: {} }),
          409,
          "conflict"
        )
        assert.deepStrictEqual(
          Object.keys(invalidFields(
            yield* world.api("POST", path, {
              templateId: "too-much",
              displayName: "Too much",
              permissions: { metadata: "write" }
            })
          )),
          ["permissions.metadata"]
        )
        invalidFields(yield* world.api("POST", path, { templateId: "Bad_Id", displayName: "x", permissions: {} }))
        failed(yield* world.api("GET", "/integrations/providers/nope/scope-templates"), 404, "not_found")
        // The installation lacks `deployments`: the broker refuses the template's permission.
        const denied = yield* world.api("POST", "/integrations/scmhost/token", {
          repositories: [repo.externalId],
          template: "deploy-bot"
        })
        assert.strictEqual(failed(denied, 403, "forbidden").details["permission"], "deployments")
        const retired = ok(yield* world.api("PATCH", `${path}/deploy-bot`, { status: "retired" }), {
          scopeTemplate: Schema.Struct({ status: Schema.String })
        }).scopeTemplate
        assert.strictEqual(retired.status, "retired")
        const after = ok(yield* world.api("GET", path), {
          scopeTemplates: Schema.Array(Schema.Struct({ templateId: Schema.String, status: Schema.String }))
        }).scopeTemplates
        assert.strictEqual(after.find((t) => t.templateId === "deploy-bot")?.status, "retired")
        invalidFields(
          yield* world.api("POST", "/integrations/scmhost/token", {
            repositories: [repo.externalId],
            template: "deploy-bot"
          })
        )
        failed(yield* world.api("PATCH", `${path}/repo-read`, { status: "retired" }), 409, "conflict")
        failed(yield* world.api("PATCH", `${path}/missing`, { status: "retired" }), 404, "not_found")
      }))

    it.effect("installation webhooks suspend, unsuspend and revoke the connection", () =>
      Effect.gen(function*() {
        const { connected, repo, world } = yield* linkedWorld
        const installation = (action: string) =>
          sendWebhook(world.baseUrl, "installation", {
            action,
            installation: { id: Number(connected.installationId) }
          }, { deliveryId: `${action}-${randomUUID()}` })
        const statusNow = Effect.map(
          world.api("GET", `/integrations/${connected.connection.id}`),
          (res) => connectionOf(res).status
        )
        const waitFor = (status: string) =>
          Effect.gen(function*() {
            for (let i = 0; i < 100 && (yield* statusNow) !== status; i++) {
              yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
            }
            assert.strictEqual(yield* statusNow, status)
          })
        yield* installation("suspend")
        yield* waitFor("suspended")
        const key = randomUUID()
        yield* sendWebhook(world.baseUrl, "push", pushPayload(connected.installationId, repo, "main"), {
          deliveryId: key
        })
        assert.strictEqual((yield* settled(world, connected.connection.id, key)).failureReason, "connection_suspended")
        yield* installation("unsuspend")
        yield* waitFor("active")
        yield* installation("deleted")
        yield* waitFor("revoked")
      }))

    it.effect("dbhost: a pasted token is verified, held in custody and never echoed; 412 reasons; unknown is 404", () =>
      Effect.gen(function*() {
        const world = yield* newWorld("dbhost")
        const token = `dbh_${randomUUID()}`
        const connected = connectionOf(
          yield* world.api("POST", "/integrations/dbhost/connect", { parentToken: token, displayName: "Databases" })
        )
        assert.strictEqual(connected.status, "active")
        assert.strictEqual(connected.externalAccountLogin, "sim-db-org")
        failed(
          yield* world.api("POST", "/integrations/dbhost/connect", { parentToken: `dbh_${randomUUID()}` }),
          409,
          "conflict"
        )
        const empty = yield* world.api("POST", "/integrations/dbhost/connect", { parentToken: "dbh_empty" })
        assert.strictEqual(failed(empty, 412, "precondition_failed").details["reason"], "no_org_visible")
        const pasted = `sk_live_${randomUUID()}`
        const rejected = yield* world.api("POST", "/integrations/dbhost/connect", { parentToken: pasted })
        assert.strictEqual(failed(rejected, 412, "precondition_failed").details["reason"], "token_rejected")
        const tooLong = `dbh_${"x".repeat(5000)}`
        const invalid = yield* world.api("POST", "/integrations/dbhost/connect", { parentToken: tooLong })
        invalidFields(invalid)
        const scoped = yield* world.api("POST", "/integrations/dbhost/connect", {
          parentToken: `dbh_${randomUUID()}`,
          scope: "another-org"
        })
        assert.strictEqual(failed(scoped, 412, "precondition_failed").details["reason"], "scope_not_visible")
        failed(yield* world.api("POST", "/integrations/nowhere/connect", { parentToken: pasted }), 404, "not_found")
        for (const res of [empty, rejected, invalid, scoped]) {
          assert.notInclude(res.text, pasted)
          assert.notInclude(res.text, "x".repeat(100))
        }
        yield* assertNotInDatabase([token, pasted], "integration_connections.sealed_token")
        assert.isFalse(captured.some((line) => line.includes(token) || line.includes(pasted)))
      }))

    it.effect("entitlements: scmhost off is 403 naming it; limit.repo_links at the ceiling is 412", () =>
      Effect.gen(function*() {
        const { connected, repositories, world } = yield* linkedWorld
        const sql = yield* SqlClient.SqlClient
        const plan = `tight-${randomUUID().slice(0, 8)}`
        yield* sql`insert into plans (id, name) values (${plan}, 'Tight')`.pipe(Effect.orDie)
        yield* sql`
          insert into plan_entitlements (plan_id, entitlement_key, value_type, enabled, limit_value)
          values (${plan}, 'limit.repo_links', 'quantity', true, 1),
            (${plan}, 'feature.integrations.scmhost', 'boolean', false, null)`.pipe(Effect.orDie)
        yield* sql`
          insert into workspace_plans (org_id, plan_id) values (${world.orgId}, ${plan})
          on conflict (org_id) do update set plan_id = excluded.plan_id`.pipe(Effect.orDie)
        const off = yield* world.api("POST", "/integrations/scmhost/connect", {})
        assert.strictEqual(failed(off, 403, "forbidden").details["entitlement"], "feature.integrations.scmhost")
        const full = yield* world.api("POST", `/projects/${world.projectId}/repo-links`, {
          connectionId: connected.connection.id,
          repoExternalId: repositories[1]!.externalId
        })
        assert.deepInclude(failed(full, 412, "precondition_failed").details, {
          reason: "limit_reached",
          entitlement: "limit.repo_links"
        })
      }))

    it.effect("cpctl: integrations, repositories, repo-links; the token printed once, on stdout only", () =>
      Effect.gen(function*() {
        const { connected, link, repo, world } = yield* linkedWorld
        const env = { ...tokenEnv(world.baseUrl, world.token), CP_WORKSPACE: world.orgId }
        const listed = yield* cpctlRun(env, ["integrations", "list"])
        assert.strictEqual(listed.exitCode, 0, listed.stderr)
        assert.include(listed.stdout, connected.connection.id)
        const repos = yield* cpctlRun(env, ["integrations", "repositories", connected.connection.id, "--filter", "web"])
        assert.include(repos.stdout, "/web")
        assert.notInclude(repos.stdout, "/api")
        const links = yield* cpctlRun(env, ["repo-links", "list", world.projectId])
        assert.include(links.stdout, link.id)
        assert.include(links.stdout, "main=production")
        const issued = yield* cpctlRun(env, [
          "integrations",
          "token",
          "--repo",
          repo.externalId,
          "--permission",
          "contents=read"
        ])
        assert.strictEqual(issued.exitCode, 0, issued.stderr)
        const lines = issued.stdout.trim().split("\n")
        assert.strictEqual(lines.length, 1)
        assert.match(lines[0]!, /^ghs_/)
        assert.notInclude(issued.stderr, lines[0]!)
        const refused = yield* cpctlRun(env, ["integrations", "token", "--repo", "1", "--permission", "contents=read"])
        assert.notStrictEqual(refused.exitCode, 0)
        assert.include(refused.stderr, "forbidden")
      }))
  })
}

describe("integrations: a provider that is down or failing", () => {
  const failing = createServer((_request, response) => {
    response.writeHead(503, { "content-type": "application/json" })
    response.end("{}")
  })
  const url = listenLocal(failing)
  for (const [name, apiUrl] of [["5xx", url], ["down", Promise.resolve("http://127.0.0.1:9")]] as const) {
    layer(
      serverOnScmhostAt(apiUrl, (api) => ({
        INTEGRATION_PLAIN_API_URL: api,
        INTEGRATION_BROKEN_API_URL: api,
        INTEGRATION_BROKEN_CUSTODY: "1"
      })),
      { excludeTestServices: true, timeout: 60_000 }
    )(`provider ${name}`, (it) => {
      it.effect("the setup callback answers 502 provider_unavailable", () =>
        Effect.gen(function*() {
          const { setup } = yield* connectThenSetup(yield* newWorld())
          failed(setup, 502, "provider_unavailable")
        }))
      it.effect("generic providers: the custody gate comes before the provider; a failing provider is 502", () =>
        Effect.gen(function*() {
          const world = yield* newWorld()
          const gate = yield* world.api("POST", "/integrations/plain/connect", { parentToken: "plain-secret-token" })
          assert.deepInclude(failed(gate, 412, "precondition_failed").details, {
            gate: "plain_custody",
            reason: "not_configured"
          })
          const down = yield* world.api("POST", "/integrations/broken/connect", { parentToken: "broken-secret-token" })
          failed(down, 502, "provider_unavailable")
          assert.notInclude(gate.text + down.text, "secret-token")
        }))
    })
  }
})
