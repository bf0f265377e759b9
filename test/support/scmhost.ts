/**
 * An scmhost connection made end to end over real HTTP: connect, the simulator's install page, "Install" as an
 * account, the setup callback and the landing page (integrations-agents.md §1). Shared by the integrations and the
 * command-line links tests.
 */
import { IntegrationConnection } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { generateKeyPairSync, randomUUID } from "node:crypto"
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import { databaseLayer } from "../../packages/persistence/test/harness.ts"
import { ok, type Res } from "./envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./server.ts"
import { createProject, signInWithPersonal } from "./session.ts"

export const connectionOf = (res: Res) => ok(res, { connection: IntegrationConnection }).connection

/** A signed-in user with a project that has a `production` environment, and a caller of its workspace. */
export const newWorld = (prefix = "scm") =>
  Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const user = yield* signInWithPersonal(baseUrl, prefix)
    const orgId = user.personal.id
    const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
      call(baseUrl, method, `/v1/organizations/${orgId}${path}`, {
        token: user.token,
        ...(body === undefined ? {} : { body }),
        ...(headers === undefined ? {} : { headers })
      })
    const projectId = yield* createProject(baseUrl, user.token, orgId)
    ok(yield* api("POST", `/projects/${projectId}/environments`, { name: "Production", slug: "production" }))
    return { baseUrl, orgId, token: user.token, api, projectId }
  })

export type World = Effect.Success<ReturnType<typeof newWorld>>

/** Connect, click "Install" on the simulator's page as `account`, follow the redirect to the setup callback. */
export const installThroughSimulator = (world: World, account: string) =>
  Effect.gen(function*() {
    const started = ok(yield* world.api("POST", "/integrations/scmhost/connect", { displayName: "Source" }), {
      connection: IntegrationConnection,
      installUrl: Schema.String
    })
    assert.strictEqual(started.connection.status, "pending")
    const installUrl = new URL(started.installUrl)
    assert.match(installUrl.pathname, /^\/dev\/scmhost\/apps\/[^/]+\/installations\/new$/)
    const state = installUrl.searchParams.get("state") ?? ""
    const page = yield* call(world.baseUrl, "GET", `${installUrl.pathname}${installUrl.search}`)
    assert.strictEqual(page.status, 200)
    assert.include(page.text, "Install")
    const form = page.text.match(/action="([^"]+)"/)?.[1] ?? ""
    const installed = yield* call(world.baseUrl, "POST", form, {
      body: new URLSearchParams({ account, state }).toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    assert.strictEqual(installed.status, 302)
    const setupUrl = new URL(installed.headers.get("location") ?? "")
    assert.strictEqual(setupUrl.pathname, "/ingress/scmhost/setup")
    const installationId = setupUrl.searchParams.get("installation_id") ?? ""
    return { started, state, setupPath: `${setupUrl.pathname}${setupUrl.search}`, installationId }
  })

export const connectScmhost = (world: World, account = `acme-${randomUUID().slice(0, 8)}`) =>
  Effect.gen(function*() {
    const install = yield* installThroughSimulator(world, account)
    const setup = yield* call(world.baseUrl, "GET", install.setupPath)
    assert.strictEqual(setup.status, 302)
    assert.include(
      setup.headers.get("location") ?? "",
      `/integrations/connected?connectionId=${install.started.connection.id}`
    )
    const landing = yield* call(
      world.baseUrl,
      "GET",
      new URL(setup.headers.get("location") ?? "").pathname +
        new URL(setup.headers.get("location") ?? "").search
    )
    assert.strictEqual(landing.status, 200)
    assert.include(landing.text, install.started.connection.id)
    const connection = connectionOf(yield* world.api("GET", `/integrations/${install.started.connection.id}`))
    return { ...install, connection, account }
  })

/** Connect, then the setup callback for `installationId` with the connect step's state, asking for JSON. */
export const connectThenSetup = (world: World, installationId = "123") =>
  Effect.gen(function*() {
    const started = ok(yield* world.api("POST", "/integrations/scmhost/connect", {}), {
      connection: IntegrationConnection,
      installUrl: Schema.String
    })
    const state = new URL(started.installUrl).searchParams.get("state") ?? ""
    const setup = yield* call(
      world.baseUrl,
      "GET",
      `/ingress/scmhost/setup?installation_id=${installationId}&state=${encodeURIComponent(state)}`,
      { headers: { accept: "application/json" } }
    )
    return { started, setup }
  })

/** A fresh app private key (PKCS#8 PEM) for a server configured against a provider other than the simulator. */
export const testAppPrivateKey = (): string =>
  generateKeyPairSync("rsa", {
    modulusLength: 2048,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" }
  }).privateKey

/** Starts `server` on a free local port; its base URL. */
export const listenLocal = (server: Server): Promise<string> =>
  new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`))
  )

/**
 * A test server on the first SQL backend whose source-control app is the provider at `apiUrl` (a stand-in that
 * fails in the way under test), plus the settings `env` makes of that URL.
 */
export const serverOnScmhostAt = (
  apiUrl: Promise<string>,
  env: (api: string) => Readonly<Record<string, string>> = () => ({})
) =>
  Layer.unwrap(
    Effect.promise(() => apiUrl).pipe(Effect.map((api) =>
      Layer.merge(
        testServerOver(databaseLayer(sqlBackends[0]!), {
          SCMHOST_API_URL: api,
          SCMHOST_APP_ID: "7",
          SCMHOST_APP_SLUG: "x",
          SCMHOST_APP_PRIVATE_KEY: testAppPrivateKey(),
          ...env(api)
        }),
        NodeServices.layer
      )
    ))
  )
