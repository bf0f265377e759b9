/**
 * The docs page as a person uses it, in headless Chromium (Debian's `chromium`, driven by playwright-core): it
 * loads nothing from another origin, shows an icon and no vendor toolbar, offers a bearer token field, and "Test
 * Request" with a pasted session token answers 200.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { CHROMIUM, launch } from "./support/browser.ts"
import { call, TestServer, testServer } from "./support/server.ts"
import { signIn, signInWithPersonal } from "./support/session.ts"

layer(testServer("memory"), { excludeTestServices: true })("docs page", (it) => {
  it.effect("chromium is installed where the test looks for it", () =>
    Effect.sync(() => assert.isTrue(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install chromium`)))

  it.effect("is self-contained, with an icon and without the vendor toolbar", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const browser = yield* launch
      const page = yield* Effect.promise(() => browser.newPage())
      const elsewhere: Array<string> = []
      yield* Effect.promise(() =>
        page.route("**/*", (route) => {
          const url = new URL(route.request().url())
          if (url.origin === baseUrl) return route.continue()
          elsewhere.push(url.href)
          return route.abort()
        })
      )
      yield* Effect.promise(() => page.goto(`${baseUrl}/docs`, { waitUntil: "networkidle" }))
      yield* Effect.promise(() => page.getByLabel("Bearer Token").first().waitFor())
      assert.deepStrictEqual(elsewhere, [])
      const icons = yield* Effect.promise(() =>
        page.locator("link[rel~=icon]").evaluateAll((links) => links.map((link) => link.getAttribute("href") ?? ""))
      )
      assert.isTrue(icons.some((href) => href.startsWith("data:image/svg+xml,")), JSON.stringify(icons))
      const text = yield* Effect.promise(() => page.locator("body").innerText())
      for (const vendor of ["Developer Tools", "Generate SDKs"]) assert.notInclude(text, vendor)
    }).pipe(Effect.scoped))

  it.effect("offers a bearer token field, and Test Request with a pasted token answers 200", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { token } = yield* signIn(baseUrl)
      const browser = yield* launch
      const page = yield* Effect.promise(() => browser.newPage())
      yield* Effect.promise(() => page.goto(`${baseUrl}/docs`))
      const field = page.getByLabel("Bearer Token").first()
      assert.strictEqual(yield* Effect.promise(() => field.getAttribute("placeholder")), "Token")
      yield* Effect.promise(() => field.fill(token))
      yield* Effect.promise(() => page.getByRole("button", { name: "Open Group Session" }).click())
      yield* Effect.promise(() =>
        page.locator("button", { hasText: "Test Request" }).filter({ hasText: "get /v1/auth/session" }).first().click()
      )
      const answered = page.waitForResponse((response) => response.url().endsWith("/v1/auth/session"))
      yield* Effect.promise(() => page.getByRole("button", { name: /^Send/ }).first().click())
      const response = yield* Effect.promise(() => answered)
      assert.strictEqual(response.status(), 200)
      const authorization = yield* Effect.promise(() => response.request().headerValue("authorization"))
      assert.strictEqual(authorization, `Bearer ${token}`)
    }).pipe(Effect.scoped))

  it.effect("a path sent as //v1/… (the page joins the relative server \"/\" and a path) reaches its route", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const { personal, token } = yield* signInWithPersonal(baseUrl)
      const res = yield* call(baseUrl, "GET", `//v1/organizations/${personal.slug}/projects`, { token })
      assert.strictEqual(res.status, 200, res.text)
    }))
})
