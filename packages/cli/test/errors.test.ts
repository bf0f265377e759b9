import { Conflict, NotFound, wireError } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect } from "effect"
import { CliError } from "effect/cli"
import { HttpClientError, HttpClientRequest, HttpClientResponse } from "effect/http"
import { TestConsole } from "effect/testing"
import { CliFailure, type CpctlError, reportFailure } from "../src/errors.ts"

const request = HttpClientRequest.get("http://cp.test/v1/organizations")

const statusError = (status: number, body: string) =>
  new HttpClientError.HttpClientError({
    reason: new HttpClientError.StatusCodeError({
      request,
      response: HttpClientResponse.fromWeb(request, new Response(body, { status }))
    })
  })

const reported = (cause: Cause.Cause<CpctlError>) => Effect.andThen(reportFailure(cause), TestConsole.errorLines)

describe("reportFailure", () => {
  it.effect("prints a wire error as `error <code>: <message>`", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* reported(Cause.fail(wireError(NotFound, "Workspace not found"))), [
        "error not_found: Workspace not found"
      ])
    }))

  it.effect("adds the details on a second line", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* reported(Cause.fail(wireError(Conflict, "Slug is taken", { slug: "acme" }))), [
        "error conflict: Slug is taken\ndetails: {\"slug\":\"acme\"}"
      ])
    }))

  it.effect("reads the error body of a status no endpoint declares (a 500)", () =>
    Effect.gen(function*() {
      const body = JSON.stringify({ error: { code: "internal_error", message: "Internal error", details: {} } })
      assert.deepStrictEqual(yield* reported(Cause.fail(statusError(500, body))), [
        "error internal_error: Internal error"
      ])
    }))

  it.effect("falls back to the status when that body is not the wire's", () =>
    Effect.gen(function*() {
      const [line] = yield* reported(Cause.fail(statusError(502, "<html>Bad gateway</html>")))
      assert.match(String(line), /^error http_502: /)
    }))

  it.effect("prints local failures with their own code", () =>
    Effect.gen(function*() {
      const failure = new CliFailure({ code: "input_required", message: "--email is required without a terminal" })
      assert.deepStrictEqual(yield* reported(Cause.fail(failure)), [
        "error input_required: --email is required without a terminal"
      ])
    }))

  it.effect("prints a defect as one line, without its stack", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* reported(Cause.die(new Error("boom"))), [
        "error internal: cpctl failed unexpectedly: Error: boom"
      ])
    }))

  it.effect("prints nothing for usage errors (already shown with the help) or an interrupt", () =>
    Effect.gen(function*() {
      const usage = new CliError.ShowHelp({ commandPath: ["cpctl"], errors: [] })
      assert.deepStrictEqual(yield* reported(Cause.fail(usage)), [])
      assert.deepStrictEqual(yield* reported(Cause.interrupt()), [])
    }))
})
