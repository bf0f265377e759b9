/**
 * An scmhost connection made end to end over real HTTP: connect, the simulator's install page, "Install" as an
 * account, the setup callback and the landing page (integrations-agents.md §1). Shared by the integrations and the
 * command-line links tests.
 */
import { IntegrationConnection } from "@cp/domain"
import { assert } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { ok, type Res } from "./envelope.ts"
import { call, TestServer } from "./server.ts"
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
