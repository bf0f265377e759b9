/** Deny by default: every endpoint of the API declares who may call it, or the suite fails. */
import { ControlPlaneApi } from "@cp/domain"
import { requirementOf } from "@cp/server/platform/apiMiddleware"
import { assert, describe, it } from "@effect/vitest"
import { HttpApi, type HttpApiEndpoint } from "effect/http-api"

const endpoints: Array<HttpApiEndpoint.Top> = []
HttpApi.reflect(ControlPlaneApi, { onGroup: () => {}, onEndpoint: ({ endpoint }) => endpoints.push(endpoint) })

describe("endpoint access declarations", () => {
  it("every endpoint declares none, authenticated, session or a permission", () => {
    const undeclared = endpoints.filter((endpoint) => requirementOf(endpoint) === undefined)
    assert.deepStrictEqual(undeclared.map((endpoint) => `${endpoint.method} ${endpoint.path}`), [])
    assert.isAbove(endpoints.length, 10)
  })
})
