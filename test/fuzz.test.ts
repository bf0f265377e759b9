/**
 * Schema fuzz of every route (issue 10): each endpoint of `ControlPlaneApi` is called as the owner of a seeded
 * workspace with requests generated from its own schemas and hostile mutations of them (`support/fuzz.ts`). No
 * answer may be 5xx, and every 4xx carries the error envelope with the stable code of its status. The generated
 * requests and a sample of the mutations are also sent without a credential and with an invalid one: a route that
 * needs one must answer 401 first (routing order, contract §4). Bounded for CI
 * (`FUZZ_RUNS`, default 6 generated requests per endpoint plus every mutation); `npm run fuzz` runs longer, and
 * `FUZZ_SEED` replays a run. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 */
import {
  ApiKey,
  ControlPlaneApi,
  Environment,
  FeatureFlag,
  Invitation,
  Member,
  Secret,
  Setting,
  Team
} from "@cp/domain"
import { requirementOf } from "@cp/server/platform/apiMiddleware"
import { assert, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { ok } from "./support/envelope.ts"
import { endpointsOf, type FuzzEndpoint, type FuzzRequest, requestsFor } from "./support/fuzz.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, freshEmail, signIn, signInWithPersonal } from "./support/session.ts"

const BAD_TOKEN = "sps_ses_01JAAAAAAAAAAAAAAAAAAAAAAA.not-a-secret"
const RUNS = Number(process.env["FUZZ_RUNS"] ?? "6")
const SEED = Number(process.env["FUZZ_SEED"] ?? "20261125")

/** The stable code of each error status (contract §4 and the spec's error table). */
const CODES: Readonly<Record<number, ReadonlyArray<string>>> = {
  400: ["bad_request"],
  401: ["unauthenticated"],
  403: ["forbidden"],
  404: ["not_found", "object_missing"],
  405: ["unsupported"],
  409: ["conflict", "provider_connection_conflict", "ref_conflict"],
  412: ["precondition_failed"],
  413: ["payload_too_large"],
  415: ["unsupported"],
  422: ["validation_failed"],
  429: ["rate_limited"],
  // The spec's answer for the project-scoped catalog entity route.
  501: ["not_implemented"]
}

const ErrorEnvelope = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    details: Schema.Record(Schema.String, Schema.Unknown),
    requestId: Schema.String
  })
})
const isErrorEnvelope = Schema.is(ErrorEnvelope)

/** What is wrong with an answer, or undefined: a 5xx (but the spec's 501), or an error without envelope and code. */
const problemOf = (res: { readonly status: number; readonly json: unknown; readonly text: string }) => {
  if (res.status >= 500 && res.status !== 501) return `status ${res.status}`
  if (res.status < 400) return undefined
  if (!isErrorEnvelope(res.json)) return `status ${res.status} without the error envelope`
  const { code, details } = res.json.error
  if (!(CODES[res.status] ?? []).includes(code)) return `status ${res.status} with code ${code}`
  if (code === "validation_failed" && details["fields"] === undefined && details["header"] === undefined) {
    return "validation_failed without details.fields or details.header"
  }
  return undefined
}

/** Destructive routes last, so the seeded resources exist for every other one; logout ends a session of its own. */
const order = (endpoint: FuzzEndpoint) => endpoint.name === "session.logout" ? 2 : endpoint.method === "DELETE" ? 1 : 0

for (const backend of sqlBackends) {
  layer(testServerOver(databaseLayer(backend)), { excludeTestServices: true })(`schema fuzz [${backend}]`, (it) => {
    it.effect(
      `every route, ${RUNS} generated requests each plus hostile mutations: no 5xx, every 4xx enveloped`,
      () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const owner = yield* signInWithPersonal(baseUrl, "fuzz")
          const logoutSession = yield* signIn(baseUrl, { email: owner.email })
          const org = owner.personal.id
          const token = owner.token
          const post = (path: string, body: unknown) =>
            call(baseUrl, "POST", `/v1/organizations/${org}${path}`, { token, body })
          const projectId = yield* createProject(baseUrl, token, org)
          const environment = ok(yield* post(`/projects/${projectId}/environments`, { name: "Fuzz" }), {
            environment: Environment
          })
          const team = ok(yield* post("/teams", { name: "Fuzzers" }), { team: Team })
          const setting = ok(yield* post("/config/settings", { key: "fuzz.k", value: 1 }), { setting: Setting })
          const flag = ok(yield* post("/config/feature-flags", { key: "fuzz.f", enabled: true }), {
            featureFlag: FeatureFlag
          })
          const secret = ok(yield* post("/config/secrets", { secretKey: "FUZZ", value: "v", displayName: "F" }), {
            secret: Secret
          })
          const apiKey = ok(yield* post("/api-keys", { label: "fuzz", role: "viewer" }), {
            apiKey: Schema.Struct({ ...ApiKey.fields, secret: Schema.String })
          })
          const invitation = ok(yield* post("/invitations", { email: freshEmail("invitee"), role: "viewer" }), {
            invitation: Invitation,
            delivery: Schema.optionalKey(Schema.Unknown)
          })
          const members = ok(yield* call(baseUrl, "GET", `/v1/organizations/${org}/members`, { token }), {
            members: Schema.Array(Member)
          })
          const params: Record<string, string> = {
            orgId: org,
            projectId,
            environmentId: environment.environment.id,
            teamId: team.team.id,
            settingId: setting.setting.id,
            flagId: flag.featureFlag.id,
            secretId: secret.secret.id,
            apiKeyId: apiKey.apiKey.id,
            invitationId: invitation.invitation.id,
            memberId: members.members[0]?.id ?? "mem_x",
            subjectId: owner.user.id,
            provider: "fuzz"
          }

          const endpoints = [...endpointsOf(ControlPlaneApi)].sort((a, b) => order(a) - order(b))
          const skipped: Array<string> = []
          const problems: Array<string> = []
          let sent = 0
          const statuses = new Map<number, number>()
          for (const [index, endpoint] of endpoints.entries()) {
            const requests: ReadonlyArray<FuzzRequest> = yield* requestsFor(endpoint, {
              runs: RUNS,
              seed: SEED + index * 7919,
              params,
              skipped
            })
            const bearer = endpoint.name === "session.logout" ? logoutSession.token : token
            // Routing order (contract §4): without a valid credential, a route that needs one answers 401 whatever
            // else is wrong with the request.
            const needsCredential = requirementOf(endpoint.endpoint)?._tag !== "None"
            for (const request of requests) {
              const callers = request.probe ? [bearer, undefined, BAD_TOKEN] : [bearer]
              for (const credential of callers) {
                const res = yield* call(baseUrl, request.method, request.path, {
                  ...(credential === undefined ? {} : { token: credential }),
                  ...(request.body === undefined ? {} : { body: request.body }),
                  // A JSON client: routes that also serve browsers (the setup callback) answer it in JSON.
                  headers: { accept: "application/json", ...request.headers }
                })
                sent++
                statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
                const caller = credential === bearer
                  ? "owner"
                  : credential === undefined
                  ? "no credential"
                  : "bad token"
                const problem = caller !== "owner" && needsCredential && res.status !== 401
                  ? `status ${res.status} for a caller with ${caller}, expected 401`
                  : problemOf(res)
                if (problem !== undefined) {
                  const what = `${endpoint.name} [${request.origin}; ${caller}] ${request.method} ${request.path}`
                  problems.push(`${what.slice(0, 200)}: ${problem}: ${res.text.slice(0, 300)}`)
                }
              }
            }
          }
          const histogram = [...statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}: ${n}`).join(", ")
          console.log(
            `schema fuzz [${backend}]: ${endpoints.length} routes, ${sent} requests, seed ${SEED} (${histogram})`
          )
          if (skipped.length > 0) console.log(`schemas not derived: ${skipped.join("; ")}`)
          // Every route was reached, and the seeded owner's session still works (only the logout session ended).
          assert.isAbove(sent, endpoints.length * RUNS * 2)
          ok(yield* call(baseUrl, "GET", "/v1/auth/session", { token }))
          assert.deepStrictEqual(
            problems,
            [],
            `seed ${SEED}, ${sent} requests; schemas not derived: ${skipped.join("; ")}`
          )
        }),
      { timeout: 30 * 60_000 }
    )
  })
}
