import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, TestServer, testServer } from "./support/server.ts"

layer(testServer("pglite"), { excludeTestServices: true })("smoke", (it) => {
  it.effect("health answers", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const res = yield* call(baseUrl, "GET", "/health")
      assert.strictEqual(res.status, 200)
    }))
})
