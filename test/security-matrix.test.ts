/**
 * Deny by default, proven route by route (spec: Authentication 1 and 6; contract §4 Routing order, §5 role matrix).
 * Every endpoint of `ControlPlaneApi`, found by reflection so a route added later is covered (or fails here until it
 * has a fixture), is called by seven callers: a holder of each workspace role (bindings seeded straight into the
 * database), a user of another workspace, and nobody. Each answer must be exactly what the endpoint's declared
 * requirement and the role matrix say:
 *
 * - allowed: a success (or a status the fixture names as a legitimate non-success for that route);
 * - a member without the permission: 403 `forbidden` naming that permission;
 * - the user of another workspace: 404 `not_found` on every workspace route (except one the route declares
 *   `reachesHiddenWorkspace`), and 404 again when it names this workspace's resources from its own workspace;
 * - nobody: 401 `unauthenticated` on everything that is not `requires.none`.
 *
 * Each fixture builds a request that passes validation, making fresh resources (as the workspace's creator) before
 * every call, so a destructive route meets a resource of its own each time.
 */
import {
  AgentProviderConnection,
  CliLink,
  ControlPlaneApi,
  CreatedApiKey,
  Environment,
  FeatureFlag,
  IntegrationConnection,
  Invitation,
  InvitationDelivery,
  LoginChallenge,
  Organization,
  OutboxMessage,
  type Permission,
  Project,
  Quota,
  ReachesHiddenWorkspace,
  RepoLink,
  Repository,
  RequiredAccess,
  type Requirement,
  rolePermissions,
  Run,
  Secret,
  Setting,
  StoredObject,
  Team,
  TeamMember,
  TeamRoleGrant,
  Upload,
  WebhookSubscription,
  type WorkspaceRole,
  workspaceRoles
} from "@cp/domain"
import { DEV_BILLPROV_WEBHOOK_SECRET } from "@cp/server/platform/config"
import { newId } from "@cp/server/platform/ids"
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { HttpApi } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { createHash, createHmac, randomUUID } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { monotonicFactory } from "ulid"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { ok, type Res, wire } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

/** A configured OAuth provider, so its start route answers (302) rather than 404. Nothing is ever fetched from it. */
const OAUTH_ENV = {
  OAUTH_MATRIX_CLIENT_ID: "matrix-client",
  OAUTH_MATRIX_CLIENT_SECRET: "matrix-secret",
  OAUTH_MATRIX_AUTHORIZE_URL: "https://oauth.invalid/authorize",
  OAUTH_MATRIX_TOKEN_URL: "https://oauth.invalid/token",
  OAUTH_MATRIX_USERINFO_URL: "https://oauth.invalid/userinfo"
}

interface Route {
  readonly key: string
  readonly method: string
  readonly path: string
  readonly requirement: Requirement
  /** Under `/v1/organizations/:orgId`: the workspace is resolved (or 404) before anything else. */
  readonly workspaceScoped: boolean
  /** Marked `reachesHiddenWorkspace`: a signed-in non-member may reach it (an invitee). */
  readonly reachesHidden: boolean
}

const routes: Array<Route> = []
HttpApi.reflect(ControlPlaneApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint, group }) => {
    const requirement = Context.getOrUndefined(endpoint.annotations, RequiredAccess)
    // An undeclared route is the requirements test's failure; here it must deny everyone, as the middleware does.
    routes.push({
      key: `${group.identifier}.${endpoint.identifier}`,
      method: endpoint.method,
      path: endpoint.path,
      // A resource permission is the workspace permission on the workspace-scoped endpoints the fixtures make.
      requirement: requirement?._tag === "ResourcePermission"
        ? { _tag: "Permission", permission: requirement.permission }
        : requirement ?? { _tag: "Permission", permission: "__undeclared__" as Permission },
      workspaceScoped: endpoint.path.startsWith("/v1/organizations/:orgId"),
      reachesHidden: Context.getOrUndefined(endpoint.annotations, ReachesHiddenWorkspace) === true
    })
  }
})

/** Someone who can call: a bearer token and who it is. */
interface Caller {
  readonly token: string
  readonly userId: string
  readonly email: string
}

/** A caller that is nobody yet (no account, no token): whom a fixture prepares for when no real caller is involved. */
const someoneElse = (): Caller => ({ token: "", userId: newId("usr_", Date.now()), email: freshEmail("nobody") })

/**
 * The people of the matrix: the target workspace, its creator, one holder per role, and a user of another workspace.
 */
class World extends Context.Service<World, {
  readonly orgId: string
  readonly creator: Caller
  readonly roles: Readonly<Record<WorkspaceRole, Caller>>
  readonly outsider: Caller & { readonly orgId: string }
  /** The project a workflow actor (OIDC exchange) is bound to, and how to mint its credential. */
  readonly workflow: { readonly projectId: string; readonly credential: Effect.Effect<Caller, never, TestServer> }
}>()("test/SecurityMatrix/World") {}

const signInCaller = Effect.gen(function*() {
  const { baseUrl } = yield* TestServer
  const email = freshEmail("matrix")
  const session = yield* signIn(baseUrl, { email })
  const caller: Caller = { token: session.token, userId: session.user.id, email }
  return caller
})

const personalWorkspaceOf = (caller: Caller) =>
  Effect.flatMap(
    TestServer,
    ({ baseUrl }) =>
      Effect.map(call(baseUrl, "GET", "/v1/organizations", { token: caller.token }), (res) => {
        const [personal] = ok(res, { organizations: Schema.Array(Organization) }).organizations
        assert.isDefined(personal)
        return personal.id
      })
  )

/** A signed-in user holding `role` on the workspace, through an active membership and one binding. */
const roleHolder = (orgId: string, role: WorkspaceRole) =>
  Effect.tap(signInCaller, (caller) => seedMember(orgId, caller.userId, role))

/**
 * An OIDC-enabled link of the workspace's matrix project to a fresh repository, and how to mint a simulator JWT for
 * that repository (what a CI provider would hand its workflow).
 */
const oidcLinkOf = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const { projectId } = yield* configScopeOf(ctx)
    const project = yield* asCreator(ctx, "GET", `/projects/${projectId}`, { project: Project })
    const repository = `matrix/${randomUUID().slice(0, 8)}`
    yield* asCreator(ctx, "POST", "/cli/links", { link: CliLink }, {
      remoteUrl: `https://github.com/${repository}`,
      projectSlug: project.project.slug,
      ciSettings: { oidcEnabled: true }
    })
    const jwt = Effect.map(
      call(baseUrl, "POST", "/dev/oidc/token", {
        body: { claims: { sub: `repo:${repository}`, repository, ref: "refs/heads/main" } }
      }),
      (res) => ok(res, { token: Schema.String }).token
    )
    return { baseUrl, projectId, jwt }
  })

/**
 * A workflow actor of the workspace: a credential minted through the simulator issuer and the exchange (fresh for
 * each route, as credentials live minutes).
 */
const workflowOf = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { baseUrl, jwt, projectId } = yield* oidcLinkOf(ctx)
    const credential = Effect.gen(function*() {
      const exchanged = ok(
        yield* call(baseUrl, "POST", "/v1/auth/oidc/exchange", {
          body: { token: yield* jwt, orgId: ctx.orgId, projectId }
        }),
        { token: Schema.String }
      )
      const caller: Caller = { token: exchanged.token, userId: "", email: freshEmail("workflow") }
      return caller
    })
    return { projectId, credential }
  })

const WorldLive = Layer.effect(
  World,
  Effect.gen(function*() {
    const creator = yield* signInCaller
    const orgId = yield* personalWorkspaceOf(creator)
    const roles = {} as Record<WorkspaceRole, Caller>
    for (const role of workspaceRoles) roles[role] = yield* roleHolder(orgId, role)
    const outsider = yield* signInCaller
    const workflow = yield* workflowOf({ orgId, creator, caller: creator })
    return { orgId, creator, roles, outsider: { ...outsider, orgId: yield* personalWorkspaceOf(outsider) }, workflow }
  })
)

/** What a fixture works with: the workspace whose resources the request names, its creator, and the caller. */
interface Ctx {
  readonly orgId: string
  readonly creator: Caller
  readonly caller: Caller
}

/** A request for one route, besides the method and the workspace: path parameters, query and JSON body. */
interface Req {
  readonly params?: Readonly<Record<string, string>>
  readonly query?: Readonly<Record<string, string>>
  readonly body?: unknown
  /** Request headers a route authenticates by (a provider webhook's signature). */
  readonly headers?: Readonly<Record<string, string>>
}

interface Fixture {
  readonly request: (ctx: Ctx) => Effect.Effect<Req, never, TestServer | SqlClient.SqlClient>
  /** Non-success statuses that still mean "allowed" for this route (never 401 or 403, nor 404 on a workspace route). */
  readonly alsoAllowed?: ReadonlyArray<number>
  /**
   * The call spends or changes its caller (logout, joining by invitation): each column uses a fresh caller, which
   * receives its role only after the request is prepared (so it can be invited first).
   */
  readonly freshCaller?: boolean
  /** The request names resources of the workspace in its body (path ids are detected from the path). */
  readonly referencesInBody?: boolean
  /** The path's parameters name no resource of the workspace (a provider's name): any workspace may use them. */
  readonly pathNamesNoResource?: boolean
}

/**
 * Raw HTTP as the workspace's creator, for setting fixtures up: the answer's data, checked against `fields`; fails
 * the test unless it succeeds.
 */
const asCreator = <const F extends Schema.Struct.Fields>(
  ctx: Ctx,
  method: string,
  path: string,
  fields: F,
  body?: unknown
) =>
  Effect.flatMap(TestServer, ({ baseUrl }) =>
    Effect.map(
      call(
        baseUrl,
        method,
        `/v1/organizations/${ctx.orgId}${path}`,
        body === undefined ? { token: ctx.creator.token } : { token: ctx.creator.token, body }
      ),
      (res) => ok(res, fields)
    ))

const newTeam = (ctx: Ctx) =>
  Effect.map(
    asCreator(ctx, "POST", "/teams", { team: Team }, { name: `Team ${randomUUID().slice(0, 8)}` }),
    (data) => data.team.id
  )

/**
 * The matrix creates many projects in one workspace: it moves the workspace to a plan without a project ceiling
 * (plans are data: a row in `workspace_plans`), so `limit.projects` never answers 412 here.
 */
const unlimitedProjects = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`insert into plans (id, name) values ('matrix-unlimited', 'Matrix') on conflict do nothing`
    yield* sql`
      insert into plan_entitlements (plan_id, entitlement_key, value_type, enabled, limit_value)
      values ('matrix-unlimited', 'limit.projects', 'quantity', true, null),
        ('matrix-unlimited', 'limit.repo_links', 'quantity', true, null),
        ('matrix-unlimited', 'feature.integrations.scmhost', 'boolean', true, null)
      on conflict do nothing`
    yield* sql`
      insert into workspace_plans (org_id, plan_id) values (${orgId}, 'matrix-unlimited') on conflict do nothing`
  }).pipe(Effect.orDie)

const newProject = (ctx: Ctx) =>
  Effect.andThen(
    unlimitedProjects(ctx.orgId),
    Effect.map(
      asCreator(ctx, "POST", "/projects", { project: Project }, { name: `Project ${randomUUID().slice(0, 8)}` }),
      (data) => data.project.id
    )
  )

const newEnvironment = (ctx: Ctx) =>
  Effect.gen(function*() {
    const projectId = yield* newProject(ctx)
    const data = yield* asCreator(ctx, "POST", `/projects/${projectId}/environments`, { environment: Environment }, {
      name: `Env ${randomUUID().slice(0, 8)}`
    })
    return { projectId, environmentId: data.environment.id }
  })

/** A subject that belongs to the workspace (an active member with no role of its own), by id only. */
const newWorkspaceMember = (ctx: Ctx) =>
  Effect.gen(function*() {
    const userId = newId("usr_", Date.now())
    yield* seedMember(ctx.orgId, userId, null)
    return userId
  })

/** A member holding `viewer`, and its `mem_` id, for the member routes. */
const newMemberId = (ctx: Ctx) =>
  Effect.gen(function*() {
    const userId = newId("usr_", Date.now())
    yield* seedMember(ctx.orgId, userId, "viewer")
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<
      { id: string }
    >`select id from members where org_id = ${ctx.orgId} and subject_id = ${userId}`
      .pipe(Effect.orDie)
    return rows[0]?.id ?? ""
  })

/** An invitation from the creator to the caller's own address: its id and (test mode) its token. */
const invitationForCaller = (ctx: Ctx) =>
  Effect.map(
    asCreator(ctx, "POST", "/invitations", { invitation: Invitation, delivery: InvitationDelivery }, {
      email: ctx.caller.email,
      role: "viewer"
    }),
    (data) => ({ id: data.invitation.id, token: data.delivery.token })
  )

const loginCode = (email: string) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const start = ok(yield* call(baseUrl, "POST", "/v1/auth/login/start", { body: { email } }), LoginChallenge)
    const outbox = ok(yield* call(baseUrl, "GET", `/v1/dev/outbox?to=${encodeURIComponent(email)}`), {
      messages: Schema.Array(OutboxMessage)
    })
    const message = outbox.messages.find((m) => m.data["challengeId"] === start.challengeId)
    return { challengeId: start.challengeId, code: wire(Schema.String, message?.data["code"]) }
  })

/**
 * One project of the workspace and one environment of it, made once per workspace by the creator (projects are limited
 * per workspace, and no configuration route removes anything), as configuration scope params.
 */
const configScopes = new Map<string, { readonly projectId: string; readonly environmentId: string }>()
const configScopeOf = (ctx: Ctx) =>
  Effect.gen(function*() {
    const known = configScopes.get(ctx.orgId)
    if (known !== undefined) return known
    const project = yield* asCreator(ctx, "POST", "/projects", { project: Project }, {
      name: `Matrix config ${randomUUID().slice(0, 8)}`
    })
    const projectId = project.project.id
    const data = yield* asCreator(ctx, "POST", `/projects/${projectId}/environments`, { environment: Environment }, {
      name: `Env ${randomUUID().slice(0, 8)}`
    })
    const scope = { projectId, environmentId: data.environment.id }
    configScopes.set(ctx.orgId, scope)
    return scope
  })
const newProjectScope = (ctx: Ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ projectId }))
const newEnvironmentScope = (ctx: Ctx) => Effect.map(configScopeOf(ctx), (scope) => ({ ...scope }))

/** The seven configuration routes of one scope group (settings and flags), each on a fresh scope of its own. */
const configFixtures = (
  group: string,
  scope: (ctx: Ctx) => Effect.Effect<Record<string, string>, never, TestServer | SqlClient.SqlClient>,
  prefix: (params: Record<string, string>) => string
): Record<string, Fixture> => {
  const key = () => `matrix.${randomUUID().slice(0, 8)}`
  return {
    [`${group}.listSettings`]: { request: (ctx) => Effect.map(scope(ctx), (params) => ({ params })) },
    [`${group}.createSetting`]: {
      request: (ctx) => Effect.map(scope(ctx), (params) => ({ params, body: { key: key(), value: 1 } }))
    },
    [`${group}.resolveSetting`]: {
      request: (ctx) => Effect.map(scope(ctx), (params) => ({ params, query: { key: "ui.theme" } }))
    },
    [`${group}.updateSetting`]: {
      request: (ctx) =>
        Effect.gen(function*() {
          const params = yield* scope(ctx)
          const data = yield* asCreator(ctx, "POST", `${prefix(params)}/config/settings`, { setting: Setting }, {
            key: key(),
            value: 1
          })
          return { params: { ...params, settingId: data.setting.id }, body: { value: 2 } }
        })
    },
    [`${group}.listFeatureFlags`]: { request: (ctx) => Effect.map(scope(ctx), (params) => ({ params })) },
    [`${group}.createFeatureFlag`]: {
      request: (ctx) => Effect.map(scope(ctx), (params) => ({ params, body: { key: key(), enabled: true } }))
    },
    [`${group}.updateFeatureFlag`]: {
      request: (ctx) =>
        Effect.gen(function*() {
          const params = yield* scope(ctx)
          const data = yield* asCreator(ctx, "POST", `${prefix(params)}/config/feature-flags`, {
            featureFlag: FeatureFlag
          }, {
            key: key(),
            enabled: true
          })
          return { params: { ...params, flagId: data.featureFlag.id }, body: { enabled: false } }
        })
    }
  }
}

/** The four secret routes of one scope group, each writing secrets under fresh keys (as the creator, where set up). */
const secretFixtures = (
  group: string,
  scope: (ctx: Ctx) => Effect.Effect<Record<string, string>, never, TestServer | SqlClient.SqlClient>,
  prefix: (params: Record<string, string>) => string
): Record<string, Fixture> => {
  const secretKey = () => `MATRIX_${randomUUID().slice(0, 8).toUpperCase()}`
  const newSecret = (ctx: Ctx) =>
    Effect.gen(function*() {
      const params = yield* scope(ctx)
      const data = yield* asCreator(ctx, "POST", `${prefix(params)}/config/secrets`, { secret: Secret }, {
        secretKey: secretKey(),
        value: "matrix-value",
        displayName: "Matrix"
      })
      return { ...params, secretId: data.secret.id }
    })
  return {
    [`${group}.list`]: { request: (ctx) => Effect.map(scope(ctx), (params) => ({ params })) },
    [`${group}.create`]: {
      request: (ctx) =>
        Effect.map(
          scope(ctx),
          (params) => ({ params, body: { secretKey: secretKey(), value: "matrix-value", displayName: "Matrix" } })
        )
    },
    [`${group}.rotate`]: {
      request: (ctx) => Effect.map(newSecret(ctx), (params) => ({ params, body: { value: "rotated-value" } }))
    },
    [`${group}.revoke`]: { request: (ctx) => Effect.map(newSecret(ctx), (params) => ({ params })) }
  }
}

const none = (): Effect.Effect<Req> => Effect.succeed({})

/** A workspace quota on a metric of its own (one quota per metric, period and scope). */
const newQuotaBody = () => ({
  metric: `matrix.${randomUUID().slice(0, 8)}`,
  limit: 10,
  period: "day",
  enforcement: "soft"
})
const newQuota = (ctx: Ctx) =>
  Effect.map(asCreator(ctx, "POST", "/quotas", { quota: Quota }, newQuotaBody()), (data) => data.quota.id)
/** A fresh agent provider connection of the workspace (its key accepted by the test server's simulator). */
const newAgentConnection = (ctx: Ctx) =>
  Effect.map(
    asCreator(ctx, "POST", "/agents/providers", { connection: AgentProviderConnection }, {
      provider: "openai",
      apiKey: `sk-matrix-${randomUUID()}`,
      name: `matrix-${randomUUID().slice(0, 8)}`
    }),
    (data) => ({ params: { connectionId: data.connection.id } })
  )

/**
 * A webhook endpoint of the workspace, written straight into the database after every earlier one is removed (the
 * matrix makes more than the 20 a workspace may hold). Its URL is loopback, which the server (without
 * `WEBHOOK_ALLOW_PRIVATE_NETWORKS`) refuses at delivery time: nothing is ever sent.
 */
const seedEndpoint = (ctx: Ctx) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date()
    const endpointId = newId("whe_", now.getTime())
    yield* sql`delete from webhook_endpoints where org_id = ${ctx.orgId}`
    yield* sql`insert into webhook_endpoints ${
      sql.insert({
        id: endpointId,
        orgId: ctx.orgId,
        projectId: null,
        url: "https://127.0.0.1:9/hook",
        name: "matrix",
        description: null,
        status: "active",
        disabledReason: null,
        disabledAt: null,
        secretVersion: 1,
        secretLastRotatedAt: null,
        sealedSecret: "unused",
        previousSealedSecret: null,
        previousSecretExpiresAt: null,
        kekId: "unused",
        consecutiveFailures: 0,
        createdAt: now,
        updatedAt: now
      })
    }`
    return endpointId
  }).pipe(Effect.orDie)

const seedSubscription = (ctx: Ctx) =>
  Effect.gen(function*() {
    const endpointId = yield* seedEndpoint(ctx)
    const data = yield* asCreator(ctx, "POST", "/webhooks/subscriptions", { subscription: WebhookSubscription }, {
      endpointId,
      eventType: "*"
    })
    return data.subscription.id
  })

/** A terminal (failed) delivery attempt of a fresh endpoint, written straight into the database. */
const seedAttempt = (ctx: Ctx) =>
  Effect.gen(function*() {
    const endpointId = yield* seedEndpoint(ctx)
    const sql = yield* SqlClient.SqlClient
    const now = new Date()
    const attemptId = newId("whd_", now.getTime())
    const eventId = randomUUID()
    yield* sql`insert into webhook_deliveries ${
      sql.insert({
        id: attemptId,
        orgId: ctx.orgId,
        endpointId,
        subscriptionId: null,
        eventId,
        eventType: "project.created",
        status: "failed",
        attemptNumber: 5,
        httpStatusCode: null,
        failureReason: "destination_not_allowed",
        idempotencyKey: eventId,
        nextRetryAt: null,
        completedAt: now,
        createdAt: now,
        updatedAt: now,
        body: "{}",
        dueAt: null,
        claimedUntil: null,
        claimToken: null,
        traceContext: null,
        responseBody: null
      })
    }`.pipe(Effect.orDie)
    return attemptId
  })

const withEndpoint = (body?: Record<string, unknown>) => (ctx: Ctx) =>
  Effect.map(seedEndpoint(ctx), (endpointId) => ({ params: { endpointId }, ...(body === undefined ? {} : { body }) }))

/** The webhook routes: endpoints (workspace and project), subscriptions and attempts, each on fresh resources. */
const webhookFixtures: Record<string, Fixture> = {
  "webhooks.listEndpoints": { request: none },
  "webhooks.createEndpoint": {
    request: (ctx) => Effect.as(seedEndpoint(ctx), { body: { url: "https://192.0.2.1/hook" } })
  },
  "webhooks.listProjectEndpoints": { request: (ctx) => Effect.map(newProjectScope(ctx), (params) => ({ params })) },
  "webhooks.createProjectEndpoint": {
    request: (ctx) =>
      Effect.gen(function*() {
        yield* seedEndpoint(ctx)
        return { params: yield* newProjectScope(ctx), body: { url: "https://192.0.2.1/hook" } }
      })
  },
  "webhooks.getEndpoint": { request: withEndpoint() },
  "webhooks.updateEndpoint": { request: withEndpoint({ name: "renamed" }) },
  "webhooks.deleteEndpoint": { request: withEndpoint() },
  "webhooks.disableEndpoint": { request: withEndpoint({ reason: "matrix" }) },
  "webhooks.enableEndpoint": { request: withEndpoint() },
  "webhooks.rotateSecret": { request: withEndpoint() },
  "webhooks.listEndpointSubscriptions": { request: withEndpoint() },
  "webhooks.listDeliveryAttempts": { request: withEndpoint() },
  "webhooks.endpointStats": { request: withEndpoint() },
  "webhooks.recoverEndpoint": { request: withEndpoint({ since: new Date(Date.now() - 60_000).toISOString() }) },
  "webhooks.testEndpoint": { request: withEndpoint({}) },
  "webhooks.createSubscription": {
    request: (ctx) => Effect.map(seedEndpoint(ctx), (endpointId) => ({ body: { endpointId, eventType: "*" } })),
    referencesInBody: true
  },
  "webhooks.getSubscription": {
    request: (ctx) => Effect.map(seedSubscription(ctx), (subscriptionId) => ({ params: { subscriptionId } }))
  },
  "webhooks.updateSubscription": {
    request: (ctx) =>
      Effect.map(seedSubscription(ctx), (subscriptionId) => ({ params: { subscriptionId }, body: { enabled: false } }))
  },
  "webhooks.deleteSubscription": {
    request: (ctx) => Effect.map(seedSubscription(ctx), (subscriptionId) => ({ params: { subscriptionId } }))
  },
  "webhooks.getDeliveryAttempt": {
    request: (ctx) => Effect.map(seedAttempt(ctx), (attemptId) => ({ params: { attemptId } }))
  },
  "webhooks.replayDeliveryAttempt": {
    request: (ctx) => Effect.map(seedAttempt(ctx), (attemptId) => ({ params: { attemptId } }))
  }
}

const nextRunId = monotonicFactory()

/**
 * A fresh run of one job `a` in the workspace's matrix project (and its environment), made by the creator; with a
 * lease on `a` if asked.
 */
const newRun = (ctx: Ctx, leased = false) =>
  Effect.gen(function*() {
    const { environmentId, projectId } = yield* configScopeOf(ctx)
    const runId = nextRunId()
    const state = `/projects/${projectId}/state/runs`
    yield* asCreator(ctx, "POST", state, { run: Run }, { runId, environmentId, jobs: [{ jobId: "a" }] })
    if (leased) yield* asCreator(ctx, "POST", `${state}/${runId}/jobs/a:claim`, {}, { runnerId: "matrix" })
    return { projectId, runId }
  })

/** A fresh link of the workspace's matrix project, made by the creator. */
const newLink = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { projectId } = yield* configScopeOf(ctx)
    const project = yield* asCreator(ctx, "GET", `/projects/${projectId}`, { project: Project })
    const data = yield* asCreator(ctx, "POST", "/cli/links", { link: CliLink }, {
      remoteUrl: `https://github.com/matrix/${randomUUID().slice(0, 8)}`,
      projectSlug: project.project.slug
    })
    return { projectId, linkId: data.link.id }
  })

const linkFixtures: Record<string, Fixture> = {
  "cliLinks.create": {
    request: (ctx) =>
      Effect.map(configScopeOf(ctx), () => ({
        body: { remoteUrl: `https://github.com/matrix/${randomUUID().slice(0, 8)}` }
      }))
  },
  "cliLinks.list": { request: none },
  "cliLinks.listForProject": {
    request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } }))
  },
  "cliLinks.update": {
    request: (ctx) => Effect.map(newLink(ctx), (params) => ({ params, body: { ciSettings: { oidcEnabled: true } } }))
  },
  "cliLinks.unlink": { request: (ctx) => Effect.map(newLink(ctx), (params) => ({ params })) },
  "cliLinkResolve.resolve": {
    request: () => Effect.succeed({ query: { remoteUrl: "https://github.com/matrix/none" } })
  }
}

const oidcFixtures: Record<string, Fixture> = {
  "oidc.exchange": {
    request: (ctx) =>
      Effect.gen(function*() {
        const { jwt, projectId } = yield* oidcLinkOf(ctx)
        return { body: { token: yield* jwt, orgId: ctx.orgId, projectId } }
      })
  },
  "oidc.devJwks": { request: none },
  "oidc.devToken": { request: () => Effect.succeed({ body: { claims: { sub: "matrix" } } }) }
}

const runFixtures: Record<string, Fixture> = {
  "runs.create": {
    request: (ctx) =>
      Effect.map(configScopeOf(ctx), ({ projectId }) => ({
        params: { projectId },
        body: { runId: nextRunId(), jobs: [{ jobId: "a" }] }
      }))
  },
  "runs.list": { request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } })) },
  "runs.get": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params })) },
  "runs.jobs": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params })) },
  "runs.runnable": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params })) },
  "runs.frontier": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params })) },
  "runs.log": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params })) },
  "runs.cancel": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params, body: {} })) },
  "runs.claim": {
    request: (ctx) =>
      Effect.map(newRun(ctx), (params) => ({ params: { ...params, jobId: "a" }, body: { runnerId: "m" } }))
  },
  "runs.heartbeat": {
    request: (ctx) =>
      Effect.map(newRun(ctx, true), (params) => ({
        params: { ...params, jobId: "a" },
        body: { runnerId: "matrix", leaseEpoch: 1 }
      }))
  },
  "jobLogs.append": {
    request: (ctx) =>
      Effect.map(newRun(ctx, true), (params) => ({
        params: { ...params, jobId: "a" },
        body: { runnerId: "matrix", leaseEpoch: 1, seq: 0, content: "line\n" }
      }))
  },
  "runSecrets.resolve": {
    request: (ctx) =>
      Effect.map(newRun(ctx, true), (params) => ({
        params,
        body: { runnerId: "matrix", leaseEpoch: 1, jobId: "a", names: ["MATRIX_NONE"] }
      }))
  },
  "runSecrets.output": {
    request: (ctx) =>
      Effect.map(newRun(ctx, true), (params) => ({
        params,
        body: {
          runnerId: "matrix",
          leaseEpoch: 1,
          jobId: "a",
          secrets: { [`OUT_${randomUUID().slice(0, 8).toUpperCase()}`]: "v" }
        }
      }))
  },
  "jobLogs.read": { request: (ctx) => Effect.map(newRun(ctx), (params) => ({ params: { ...params, jobId: "a" } })) },
  "runs.complete": {
    request: (ctx) =>
      Effect.map(newRun(ctx, true), (params) => ({
        params: { ...params, jobId: "a" },
        body: { runnerId: "matrix", leaseEpoch: 1, outcome: "succeeded" }
      }))
  }
}

/** A pending scmhost connection installed through the simulator: the setup callback's query, not yet called. */
const installedScm = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    yield* unlimitedProjects(ctx.orgId)
    const started = yield* asCreator(ctx, "POST", "/integrations/scmhost/connect", {
      connection: IntegrationConnection,
      installUrl: Schema.String
    }, {})
    const state = new URL(started.installUrl).searchParams.get("state") ?? ""
    const installed = yield* call(baseUrl, "POST", `/dev/scmhost/apps/matrix/installations`, {
      body: new URLSearchParams({ account: `matrix-${randomUUID().slice(0, 8)}`, state }).toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    const location = new URL(installed.headers.get("location") ?? "http://x/")
    return {
      connectionId: started.connection.id,
      query: Object.fromEntries(location.searchParams.entries()),
      installationId: location.searchParams.get("installation_id") ?? ""
    }
  })

/** An active scmhost connection of the workspace, with its installation. */
const newScmConnection = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* TestServer
    const installed = yield* installedScm(ctx)
    const query = new URLSearchParams(installed.query).toString()
    ok(yield* call(baseUrl, "GET", `/ingress/scmhost/setup?${query}`, { headers: { accept: "application/json" } }))
    return installed
  })

/** A repo link of a new project to the first repository of a new connection. */
const newRepoLink = (ctx: Ctx) =>
  Effect.gen(function*() {
    const connection = yield* newScmConnection(ctx)
    const projectId = yield* newProject(ctx)
    const repos = yield* asCreator(ctx, "GET", `/integrations/${connection.connectionId}/repositories`, {
      repositories: Schema.Array(Repository)
    })
    const repo = repos.repositories[0]!
    const link = yield* asCreator(ctx, "POST", `/projects/${projectId}/repo-links`, { repoLink: RepoLink }, {
      connectionId: connection.connectionId,
      repoExternalId: repo.externalId
    })
    return { ...connection, projectId, repo, repoLinkId: link.repoLink.id }
  })

/** A child workspace of the (account-root) workspace, made by its creator, and a connection of the workspace. */
const newChildAndConnection = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { connectionId } = yield* installedScm(ctx)
    const { baseUrl } = yield* TestServer
    const child = yield* call(baseUrl, "POST", "/v1/organizations", {
      token: ctx.creator.token,
      body: { name: `Matrix child ${randomUUID().slice(0, 8)}` }
    })
    const childId = ok(child, { organization: Organization }).organization.id
    return { connectionId, childId }
  })

const integrationFixtures: Readonly<Record<string, Fixture>> = {
  "integrations.connect": {
    request: (ctx) => Effect.as(unlimitedProjects(ctx.orgId), { params: { provider: "scmhost" }, body: {} }),
    pathNamesNoResource: true
  },
  "integrations.list": { request: none },
  "integrations.get": {
    request: (ctx) => Effect.map(installedScm(ctx), ({ connectionId }) => ({ params: { connectionId } }))
  },
  "integrations.update": {
    request: (ctx) =>
      Effect.map(
        installedScm(ctx),
        ({ connectionId }) => ({ params: { connectionId }, body: { shareMode: "granted" } })
      )
  },
  "integrations.revoke": {
    request: (ctx) => Effect.map(installedScm(ctx), ({ connectionId }) => ({ params: { connectionId } }))
  },
  "integrations.repositories": {
    request: (ctx) => Effect.map(newScmConnection(ctx), ({ connectionId }) => ({ params: { connectionId } }))
  },
  "integrations.deliveries": {
    request: (ctx) => Effect.map(installedScm(ctx), ({ connectionId }) => ({ params: { connectionId } }))
  },
  "integrations.replay": {
    request: (ctx) =>
      Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const link = yield* newRepoLink(ctx)
        const deliveryKey = randomUUID()
        yield* call(baseUrl, "POST", `/dev/scmhost/installations/${link.installationId}/events`, {
          body: { event: "push", payload: { ref: "refs/heads/main", after: "a".repeat(40) }, deliveryId: deliveryKey }
        })
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ id: string }>`
          select id from integration_deliveries where delivery_key = ${deliveryKey}`.pipe(Effect.orDie)
        return { params: { connectionId: link.connectionId, deliveryId: rows[0]?.id ?? "" } }
      })
  },
  "integrations.issueToken": {
    request: (ctx) =>
      Effect.map(newRepoLink(ctx), ({ repo }) => ({
        body: { repositories: [repo.externalId], permissions: { contents: "read" } }
      }))
    // Not `referencesInBody`: a repository another workspace linked is refused by the broker's own rule (403
    // naming the repository, integrations-agents.md §3), not hidden as a 404; test/integrations.test.ts covers it.
  },
  "integrations.listRepoLinks": {
    request: (ctx) => Effect.map(newProject(ctx), (projectId) => ({ params: { projectId } }))
  },
  "integrations.createRepoLink": {
    request: (ctx) =>
      Effect.gen(function*() {
        const connection = yield* newScmConnection(ctx)
        const projectId = yield* newProject(ctx)
        const repos = yield* asCreator(ctx, "GET", `/integrations/${connection.connectionId}/repositories`, {
          repositories: Schema.Array(Repository)
        })
        return {
          params: { projectId },
          body: { connectionId: connection.connectionId, repoExternalId: repos.repositories[0]!.externalId }
        }
      }),
    referencesInBody: true
  },
  "integrations.updateRepoLink": {
    request: (ctx) =>
      Effect.map(newRepoLink(ctx), ({ projectId, repoLinkId }) => ({
        params: { projectId, repoLinkId },
        body: { defaultBranch: "develop" }
      }))
  },
  "integrations.deleteRepoLink": {
    request: (ctx) =>
      Effect.map(newRepoLink(ctx), ({ projectId, repoLinkId }) => ({ params: { projectId, repoLinkId } }))
  },
  "integrations.listGrants": {
    request: (ctx) => Effect.map(installedScm(ctx), ({ connectionId }) => ({ params: { connectionId } }))
  },
  "integrations.createGrant": {
    request: (ctx) =>
      Effect.map(newChildAndConnection(ctx), ({ childId, connectionId }) => ({
        params: { connectionId },
        body: { workspaceOrgId: childId }
      }))
  },
  "integrations.revokeGrant": {
    request: (ctx) =>
      Effect.gen(function*() {
        const { childId, connectionId } = yield* newChildAndConnection(ctx)
        yield* asCreator(ctx, "POST", `/integrations/${connectionId}/grants`, { grant: Schema.Unknown }, {
          workspaceOrgId: childId
        })
        return { params: { connectionId, workspaceOrgId: childId } }
      })
  },
  "integrations.listScopeTemplates": {
    request: () => Effect.succeed({ params: { provider: "scmhost" } }),
    pathNamesNoResource: true
  },
  "integrations.createScopeTemplate": {
    request: () =>
      Effect.succeed({
        params: { provider: "scmhost" },
        body: {
          templateId: `m-${randomUUID().slice(0, 8)}`,
          displayName: "Matrix",
          permissions: { contents: "read" }
        }
      }),
    pathNamesNoResource: true
  },
  "integrations.updateScopeTemplate": {
    request: (ctx) =>
      Effect.gen(function*() {
        const templateId = `m-${randomUUID().slice(0, 8)}`
        yield* asCreator(ctx, "POST", "/integrations/providers/scmhost/scope-templates", {
          scopeTemplate: Schema.Unknown
        }, { templateId, displayName: "Matrix", permissions: { contents: "read" } })
        return { params: { provider: "scmhost", templateId }, body: { status: "retired" } }
      })
  },
  "ingress.scmhostSetup": {
    request: (ctx) => Effect.map(installedScm(ctx), ({ query }) => ({ query }))
  },
  "ingress.scmhostWebhook": {
    request: () => {
      const body = JSON.stringify({ zen: "matrix", hook_id: 1 })
      return Effect.succeed({
        body,
        headers: {
          "content-type": "application/json",
          "x-scmhost-event": "ping",
          "x-scmhost-delivery": randomUUID(),
          "x-hub-signature-256": `sha256=${
            createHmac("sha256", "dev-scmhost-webhook-secret").update(body).digest("hex")
          }`
        }
      })
    }
  }
}

const sha256Of = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`

/** A fresh object of the matrix project, stored by the creator: its project and digest. */
const newObject = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { projectId } = yield* configScopeOf(ctx)
    const bytes = `matrix ${randomUUID()}`
    const digest = sha256Of(bytes)
    yield* asCreator(ctx, "PUT", `/projects/${projectId}/state/objects/${digest}`, { object: StoredObject }, bytes)
    return { projectId, digest }
  })

/** A fresh upload of the matrix project whose part 1 holds all of `bytes`: its route parameters. */
const newUpload = (ctx: Ctx, bytes: string) =>
  Effect.gen(function*() {
    const { projectId } = yield* configScopeOf(ctx)
    const digest = sha256Of(bytes)
    const path = `/projects/${projectId}/state/objects/${digest}/uploads`
    const { upload } = yield* asCreator(ctx, "POST", path, { upload: Upload }, { size: Buffer.byteLength(bytes) })
    return { projectId, digest, uploadId: upload.id }
  })

const objectFixtures: Record<string, Fixture> = {
  "objects.missing": {
    request: (ctx) =>
      Effect.map(configScopeOf(ctx), ({ projectId }) => ({
        params: { projectId },
        body: { digests: [sha256Of("matrix none")] }
      }))
  },
  "objects.list": { request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } })) },
  "objects.put": {
    request: (ctx) =>
      Effect.map(configScopeOf(ctx), ({ projectId }) => {
        const bytes = `matrix ${randomUUID()}`
        return { params: { projectId, digest: sha256Of(bytes) }, body: bytes }
      })
  },
  "objects.get": { request: (ctx) => Effect.map(newObject(ctx), (params) => ({ params })) },
  "objects.startUpload": {
    request: (ctx) =>
      Effect.map(configScopeOf(ctx), ({ projectId }) => ({
        params: { projectId, digest: sha256Of(`matrix ${randomUUID()}`) },
        body: { size: 10 }
      }))
  },
  "objects.putPart": {
    request: (ctx) =>
      Effect.map(newUpload(ctx, `matrix ${randomUUID()}`), (params) => ({
        params: { ...params, partNumber: "1" },
        body: "part"
      }))
  },
  "objects.completeUpload": {
    request: (ctx) =>
      Effect.gen(function*() {
        const bytes = `matrix ${randomUUID()}`
        const params = yield* newUpload(ctx, bytes)
        yield* asCreator(
          ctx,
          "PUT",
          `/projects/${params.projectId}/state/objects/${params.digest}/uploads/${params.uploadId}/parts/1`,
          { part: Schema.Unknown },
          bytes
        )
        return { params }
      })
  },
  "objects.gcReport": {
    request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } }))
  },
  "objects.gcCollect": {
    request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId }, body: {} }))
  },
  "stateReadModels.usage": { request: none },
  "stateReadModels.runs": { request: none }
}

/** A fresh state address in the workspace's matrix project (a new component each time): the path parameters. */
const newTfState = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { environmentId, projectId } = yield* configScopeOf(ctx)
    const environment = yield* asCreator(ctx, "GET", `/projects/${projectId}/environments/${environmentId}`, {
      environment: Environment
    })
    return { projectId, component: `c-${randomUUID().slice(0, 8)}`, environment: environment.environment.slug }
  })

/** A fresh ref of the matrix project, set by the creator: its path parameters. */
const newRef = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { digest, projectId } = yield* newObject(ctx)
    const name = `refs/matrix/${randomUUID().slice(0, 8)}`
    yield* asCreator(ctx, "PUT", `/projects/${projectId}/state/refs/${encodeURIComponent(name)}`, {}, { digest })
    return { projectId, name, digest }
  })

/** The matrix project with a published catalog head. */
const publishedCatalog = (ctx: Ctx) =>
  Effect.gen(function*() {
    const { digest, projectId } = yield* newObject(ctx)
    yield* asCreator(ctx, "PUT", `/projects/${projectId}/state/catalog/head`, {}, { digest })
    return { params: { projectId } }
  })

const refFixtures: Readonly<Record<string, Fixture>> = {
  "refs.list": { request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } })) },
  "refs.get": { request: (ctx) => Effect.map(newRef(ctx), ({ name, projectId }) => ({ params: { projectId, name } })) },
  "refs.set": {
    request: (ctx) =>
      Effect.map(newObject(ctx), ({ digest, projectId }) => ({
        params: { projectId, name: `refs/set/${randomUUID().slice(0, 8)}` },
        body: { digest }
      }))
  },
  "refs.delete": {
    request: (ctx) => Effect.map(newRef(ctx), ({ name, projectId }) => ({ params: { projectId, name } }))
  },
  "refs.publish": {
    request: (ctx) =>
      Effect.map(newObject(ctx), ({ digest, projectId }) => ({ params: { projectId }, body: { digest } }))
  },
  "refs.head": { request: publishedCatalog },
  "refs.history": { request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } })) },
  "catalog.entities": { request: none },
  "repoFacets.list": { request: none },
  "repoFacets.get": {
    request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } }))
  },
  "triggers.list": {
    request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } }))
  },
  // The spec's answer for this route is 501 for everyone allowed.
  "catalog.projectEntities": {
    request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } })),
    alsoAllowed: [501]
  }
}

const tfstateFixtures: Readonly<Record<string, Fixture>> = {
  "tfstate.list": { request: (ctx) => Effect.map(configScopeOf(ctx), ({ projectId }) => ({ params: { projectId } })) },
  "tfstate.read": {
    request: (ctx) =>
      Effect.gen(function*() {
        const params = yield* newTfState(ctx)
        const { baseUrl } = yield* TestServer
        const url = `/v1/organizations/${ctx.orgId}/projects/${params.projectId}/state/tfstate/${params.component}/` +
          params.environment
        const stored = yield* call(baseUrl, "POST", url, { token: ctx.creator.token, body: { version: 4, serial: 1 } })
        assert.strictEqual(stored.status, 200, stored.text)
        return { params }
      })
  },
  "tfstate.write": {
    request: (ctx) => Effect.map(newTfState(ctx), (params) => ({ params, body: { version: 4, serial: 1 } }))
  },
  "tfstate.remove": { request: (ctx) => Effect.map(newTfState(ctx), (params) => ({ params })) },
  "tfstate.lock": {
    request: (ctx) => Effect.map(newTfState(ctx), (params) => ({ params, body: { ID: randomUUID() } }))
  },
  "tfstate.unlock": { request: (ctx) => Effect.map(newTfState(ctx), (params) => ({ params, body: "" })) },
  "tfstate.versions": { request: (ctx) => Effect.map(newTfState(ctx), (params) => ({ params })) }
}

/**
 * One fixture per route, keyed `<group>.<endpoint>`. A route added to the API without one fails this suite: add its
 * fixture here, a request the route accepts for an allowed caller.
 */
const fixtures: Readonly<Record<string, Fixture>> = {
  ...integrationFixtures,
  ...webhookFixtures,
  ...runFixtures,
  ...objectFixtures,
  ...tfstateFixtures,
  ...refFixtures,
  ...linkFixtures,
  ...oidcFixtures,
  ...secretFixtures("secrets", () => Effect.succeed({}), () => ""),
  ...secretFixtures("projectSecrets", newProjectScope, (p) => `/projects/${p["projectId"]}`),
  ...secretFixtures(
    "environmentSecrets",
    newEnvironmentScope,
    (p) => `/projects/${p["projectId"]}/environments/${p["environmentId"]}`
  ),
  ...configFixtures("configuration", () => Effect.succeed({}), () => ""),
  ...configFixtures("projectConfiguration", newProjectScope, (p) => `/projects/${p["projectId"]}`),
  ...configFixtures(
    "environmentConfiguration",
    newEnvironmentScope,
    (p) => `/projects/${p["projectId"]}/environments/${p["environmentId"]}`
  ),
  "agentProviders.list": { request: none },
  "agentProviders.create": {
    request: () =>
      Effect.succeed({
        body: { provider: "anthropic", apiKey: `sk-matrix-${randomUUID()}`, name: `m-${randomUUID().slice(0, 8)}` }
      })
  },
  "agentProviders.update": {
    request: (ctx) => Effect.map(newAgentConnection(ctx), (req) => ({ ...req, body: { config: { a: 1 } } }))
  },
  "agentProviders.disconnect": { request: newAgentConnection },
  "agentProviders.verify": { request: newAgentConnection },
  // Not an operator (PLATFORM_ADMIN_EMAILS is unset here): the route does not exist for the caller.
  "admin.rotateKek": { request: none, alsoAllowed: [404] },
  "system.health": { request: none },
  "system.outbox": { request: none },

  "identity.loginStart": { request: () => Effect.succeed({ body: { email: freshEmail("start") } }) },
  "identity.loginComplete": { request: () => Effect.map(loginCode(freshEmail("complete")), (body) => ({ body })) },
  "identity.oauthProviders": { request: none },
  "identity.oauthStart": { request: () => Effect.succeed({ params: { provider: "matrix" } }) },
  // A state the server never issued: the route is reached and refuses the state (412), whoever calls.
  "identity.oauthCallback": {
    request: () => Effect.succeed({ params: { provider: "matrix" }, query: { code: "c", state: "never-issued" } }),
    alsoAllowed: [412]
  },

  "session.session": { request: none },
  "session.logout": { request: none, freshCaller: true },
  "session.getProfile": { request: none },
  "session.updateProfile": { request: () => Effect.succeed({ body: { displayName: "Matrix" } }) },
  "session.securityEvents": { request: none },

  "workspaces.create": { request: () => Effect.succeed({ body: { name: "Matrix child" } }) },
  "workspaces.list": { request: none },
  "workspaces.get": { request: none },
  "workspaces.children": { request: none },
  "workspaces.effectiveAccess": { request: none },

  "apiKeys.create": { request: () => Effect.succeed({ body: { label: "matrix", role: "viewer" } }) },
  "apiKeys.list": { request: none },
  "apiKeys.revoke": {
    request: (ctx) =>
      Effect.map(
        asCreator(ctx, "POST", "/api-keys", { apiKey: CreatedApiKey }, { label: "to revoke", role: "viewer" }),
        (data) => ({ params: { apiKeyId: data.apiKey.id } })
      )
  },

  "audit.list": { request: none },

  "members.list": { request: none },
  "members.updateRole": {
    request: (ctx) => Effect.map(newMemberId(ctx), (memberId) => ({ params: { memberId }, body: { role: "builder" } }))
  },
  "members.remove": { request: (ctx) => Effect.map(newMemberId(ctx), (memberId) => ({ params: { memberId } })) },

  "invitations.list": { request: none },
  "invitations.create": { request: () => Effect.succeed({ body: { email: freshEmail("invitee"), role: "viewer" } }) },
  "invitations.revoke": {
    request: (ctx) =>
      Effect.map(
        asCreator(ctx, "POST", "/invitations", { invitation: Invitation }, {
          email: freshEmail("revoked"),
          role: "viewer"
        }),
        (data) => ({ params: { invitationId: data.invitation.id } })
      )
  },
  // Invited before it got its role, a member already belongs (409); the outsider, invited too, joins.
  "invitations.accept": {
    request: (ctx) => Effect.map(invitationForCaller(ctx), ({ token }) => ({ body: { token } })),
    alsoAllowed: [409],
    freshCaller: true,
    referencesInBody: true
  },
  "invitations.mine": { request: none },
  "invitations.acceptMine": {
    request: (ctx) => Effect.map(invitationForCaller(ctx), ({ id }) => ({ params: { invitationId: id } })),
    alsoAllowed: [409],
    freshCaller: true
  },

  "teams.list": { request: none },
  "teams.create": { request: () => Effect.succeed({ body: { name: `Matrix ${randomUUID().slice(0, 8)}` } }) },
  "teams.get": { request: (ctx) => Effect.map(newTeam(ctx), (teamId) => ({ params: { teamId } })) },
  "teams.update": {
    request: (ctx) => Effect.map(newTeam(ctx), (teamId) => ({ params: { teamId }, body: { name: "Renamed" } }))
  },
  "teams.delete": { request: (ctx) => Effect.map(newTeam(ctx), (teamId) => ({ params: { teamId } })) },
  "teams.listMembers": { request: (ctx) => Effect.map(newTeam(ctx), (teamId) => ({ params: { teamId } })) },
  "teams.addMember": {
    request: (ctx) =>
      Effect.gen(function*() {
        return { params: { teamId: yield* newTeam(ctx) }, body: { subjectId: yield* newWorkspaceMember(ctx) } }
      })
  },
  "teams.removeMember": {
    request: (ctx) =>
      Effect.gen(function*() {
        const teamId = yield* newTeam(ctx)
        const subjectId = yield* newWorkspaceMember(ctx)
        yield* asCreator(ctx, "POST", `/teams/${teamId}/members`, { member: TeamMember }, { subjectId })
        return { params: { teamId, subjectId } }
      })
  },
  "teams.listGrants": { request: none },
  "teams.grant": {
    request: (ctx) =>
      Effect.map(newTeam(ctx), (teamId) => ({ body: { teamId, role: "viewer", scopeKind: "organization" } })),
    referencesInBody: true
  },
  "teams.revoke": {
    request: (ctx) =>
      Effect.gen(function*() {
        const body = { teamId: yield* newTeam(ctx), role: "viewer", scopeKind: "organization" }
        yield* asCreator(ctx, "POST", "/team-roles", { grant: TeamRoleGrant }, body)
        return { body }
      }),
    referencesInBody: true
  },
  "projects.list": { request: none },
  "projects.create": {
    request: (ctx) => Effect.as(unlimitedProjects(ctx.orgId), { body: { name: `Matrix ${randomUUID().slice(0, 8)}` } })
  },
  "projects.get": { request: (ctx) => Effect.map(newProject(ctx), (projectId) => ({ params: { projectId } })) },
  "projects.archive": { request: (ctx) => Effect.map(newProject(ctx), (projectId) => ({ params: { projectId } })) },
  "projects.restore": {
    request: (ctx) =>
      Effect.gen(function*() {
        const projectId = yield* newProject(ctx)
        yield* asCreator(ctx, "DELETE", `/projects/${projectId}`, { project: Project })
        return { params: { projectId } }
      })
  },
  "projects.listEnvironments": {
    request: (ctx) => Effect.map(newProject(ctx), (projectId) => ({ params: { projectId } }))
  },
  "projects.createEnvironment": {
    request: (ctx) => Effect.map(newProject(ctx), (projectId) => ({ params: { projectId }, body: { name: "Staging" } }))
  },
  "projects.getEnvironment": { request: (ctx) => Effect.map(newEnvironment(ctx), (params) => ({ params })) },
  "projects.archiveEnvironment": { request: (ctx) => Effect.map(newEnvironment(ctx), (params) => ({ params })) },

  "usage.record": { request: () => Effect.succeed({ body: { metric: "matrix.calls", idempotencyKey: randomUUID() } }) },
  "usage.batch": {
    request: () => Effect.succeed({ body: { records: [{ metric: "matrix.calls", idempotencyKey: randomUUID() }] } })
  },
  "usage.summary": { request: () => Effect.succeed({ query: { metric: "matrix.calls" } }) },
  "quotas.list": { request: none },
  "quotas.create": { request: () => Effect.succeed({ body: newQuotaBody() }) },
  "quotas.update": {
    request: (ctx) => Effect.map(newQuota(ctx), (quotaId) => ({ params: { quotaId }, body: { limit: 5 } }))
  },
  "quotas.delete": { request: (ctx) => Effect.map(newQuota(ctx), (quotaId) => ({ params: { quotaId } })) },
  "quotas.check": { request: () => Effect.succeed({ body: { metric: "matrix.calls" } }) },
  "quotas.violations": { request: none },
  "billing.plans": { request: none },
  // A first checkout creates the customer.
  "billing.customer": {
    request: (ctx) =>
      Effect.as(asCreator(ctx, "POST", "/billing/checkout", { checkoutUrl: Schema.String }, { planCode: "team" }), {})
  },
  "billing.summary": { request: none },
  "billing.invoices": { request: none },
  "billing.entitlements": { request: none },
  "billing.paymentMethods": { request: none },
  "billing.checkout": { request: () => Effect.succeed({ body: { planCode: "team" } }) },
  "billing.portal": { request: none, alsoAllowed: [412] },
  "billing.change": { request: () => Effect.succeed({ body: { planCode: "business" } }), alsoAllowed: [412] },
  "billing.cancel": { request: none, alsoAllowed: [412] },
  "billing.reconcile": { request: none },
  "billingWebhooks.billprov": { request: () => Effect.succeed(signedBillingEvent()) }
}

/** A provider webhook of a type billing ignores, signed with the development secret. */
const signedBillingEvent = (): Req => {
  const id = `msg_${randomUUID()}`
  const at = new Date()
  const body = JSON.stringify({ type: "customer.updated", timestamp: at.toISOString(), data: {} })
  return {
    body,
    headers: {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": new Webhook(DEV_BILLPROV_WEBHOOK_SECRET).sign(id, at, body)
    }
  }
}

/** How a call came out, in the terms the matrix speaks. */
type Outcome = "allow" | "deny:401" | "deny:403" | "deny:404" | `unexpected ${string}`

/** What a denial must carry: the error code, and (for 403) the permission in its details. */
const Denial = Schema.Struct({
  error: Schema.Struct({ code: Schema.String, details: Schema.Record(Schema.String, Schema.Unknown) })
})
const isDenial = Schema.is(Denial)

const outcomeOf = (route: Route, fixture: Fixture, res: Res): Outcome => {
  if (res.status < 400 || fixture.alsoAllowed?.includes(res.status)) return "allow"
  const error = isDenial(res.json) ? res.json.error : undefined
  const permission = route.requirement._tag === "Permission" ? route.requirement.permission : undefined
  if (res.status === 401 && error?.code === "unauthenticated") return "deny:401"
  if (res.status === 403 && error?.code === "forbidden" && error.details["permission"] === permission) {
    return "deny:403"
  }
  if (res.status === 404 && error?.code === "not_found") return "deny:404"
  return `unexpected ${res.status} ${res.text.slice(0, 300)}`
}

type Column = WorkspaceRole | "outsider" | "anonymous" | "outsider-naming-our-resources" | "workflow"

/** What the requirement and the role matrix say each caller gets. */
const expectedOutcome = (route: Route, column: Column): Outcome => {
  const { requirement } = route
  if (column === "anonymous") return requirement._tag === "None" ? "allow" : "deny:401"
  if (column === "outsider-naming-our-resources") return "deny:404"
  if (column === "workflow") return "deny:403"
  if (column === "outsider") {
    if (route.workspaceScoped && !route.reachesHidden) return "deny:404"
    return requirement._tag === "Permission" ? "deny:404" : "allow"
  }
  if (requirement._tag !== "Permission") return "allow"
  return rolePermissions[column]?.has(requirement.permission) ? "allow" : "deny:403"
}

const pathOf = (route: Route, orgId: string, req: Req) => {
  // `:jobId:claim`: a parameter, then a literal custom verb.
  const path = route.path.replace(
    /:(\w+)(:\w+)?/g,
    (_, name: string, verb: string | undefined) =>
      encodeURIComponent(name === "orgId" ? orgId : req.params?.[name] ?? `missing-${name}`) + (verb ?? "")
  )
  const query = new URLSearchParams(req.query ?? {}).toString()
  return query === "" ? path : `${path}?${query}`
}

/**
 * What a workflow actor gets (run-state.md §8): the project_builder set within its bound project, nothing at
 * workspace level. Checked on routes open to anyone and on workspace routes that need a permission.
 */
const expectedForWorkflow = (route: Route, req: Req, boundProject: string): Outcome => {
  const { requirement } = route
  if (requirement._tag === "None") return "allow"
  if (requirement._tag !== "Permission") return "deny:403"
  return rolePermissions.project_builder.has(requirement.permission) && req.params?.["projectId"] === boundProject
    ? "allow"
    : "deny:403"
}

/** Whether a workflow actor is checked on this route: routes open to anyone, and workspace permission routes. */
const checksWorkflow = (route: Route, fixture: Fixture) =>
  fixture.freshCaller !== true && !route.reachesHidden &&
  (route.requirement._tag === "None" || (route.workspaceScoped && route.requirement._tag === "Permission"))

/** Whether the request names this workspace's resources: ids in the path beyond the workspace, or in the body. */
const namesResources = (route: Route, fixture: Fixture) =>
  route.workspaceScoped &&
  ((fixture.pathNamesNoResource !== true && /:(?!orgId\b)\w+/.test(route.path)) || fixture.referencesInBody === true)

describe("security matrix fixtures", () => {
  it("every route of the API has a fixture, and every fixture a route", () => {
    const keys = routes.map((route) => route.key)
    assert.deepStrictEqual(keys.filter((key) => fixtures[key] === undefined), [], "routes without a fixture")
    assert.deepStrictEqual(Object.keys(fixtures).filter((key) => !keys.includes(key)), [], "fixtures of no route")
    assert.isAbove(routes.filter((route) => route.workspaceScoped).length, 10)
  })

  it("a fixture never counts a denial as allowed", () => {
    for (const route of routes) {
      const tolerated = fixtures[route.key]?.alsoAllowed ?? []
      assert.notInclude(tolerated, 401, route.key)
      assert.notInclude(tolerated, 403, route.key)
      if (route.workspaceScoped) assert.notInclude(tolerated, 404, route.key)
    }
  })
})

for (const backend of sqlBackends) {
  layer(WorldLive.pipe(Layer.provideMerge(testServerOver(databaseLayer(backend), OAUTH_ENV))), {
    excludeTestServices: true
  })(`security matrix [${backend}]`, (it) => {
    for (const route of routes) {
      const fixture = fixtures[route.key]
      if (fixture === undefined) continue
      const label = route.requirement._tag === "Permission" ? route.requirement.permission : route.requirement._tag
      it.effect(`${route.method} ${route.path} (${label})`, () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const world = yield* World
          const ctx = (caller: Caller): Ctx => ({ orgId: world.orgId, creator: world.creator, caller })

          const callAs = Effect.fnUntraced(
            function*(column: Column, caller: Caller | undefined, orgId: string, req: Req) {
              const body = {
                ...(req.body === undefined ? {} : { body: req.body }),
                ...(req.headers === undefined
                  ? {}
                  : { headers: { "content-type": "application/json", ...req.headers } })
              }
              const res = yield* call(
                baseUrl,
                route.method,
                pathOf(route, orgId, req),
                caller === undefined ? body : { ...body, token: caller.token }
              )
              return [column, outcomeOf(route, fixture, res)] as const
            }
          )
          /** The column's caller and its request; a fresh caller gets its role only after its request is prepared. */
          const prepared = Effect.fnUntraced(function*(role: WorkspaceRole | undefined, standing: Caller) {
            if (!fixture.freshCaller) return { caller: standing, req: yield* fixture.request(ctx(standing)) }
            const caller = yield* signInCaller
            const req = yield* fixture.request(ctx(caller))
            if (role !== undefined) yield* seedMember(world.orgId, caller.userId, role)
            return { caller, req }
          })

          const actual: Array<readonly [Column, Outcome]> = []
          for (const role of workspaceRoles) {
            const { caller, req } = yield* prepared(role, world.roles[role])
            actual.push(yield* callAs(role, caller, world.orgId, req))
          }
          const outsider = yield* prepared(undefined, world.outsider)
          actual.push(yield* callAs("outsider", outsider.caller, world.orgId, outsider.req))
          actual.push(yield* callAs("anonymous", undefined, world.orgId, yield* fixture.request(ctx(someoneElse()))))
          // From its own workspace, the outsider names ours: our team, key, member or invitation is not there.
          if (namesResources(route, fixture)) {
            const req = yield* fixture.request(ctx(someoneElse()))
            actual.push(yield* callAs("outsider-naming-our-resources", world.outsider, world.outsider.orgId, req))
          }

          const expected = actual.map(([column]) => [column, expectedOutcome(route, column)] as const)
          // A workflow actor bound to the matrix project (its expectation depends on the project the request names).
          if (checksWorkflow(route, fixture)) {
            const workflow = yield* world.workflow.credential
            const req = yield* fixture.request(ctx(workflow))
            actual.push(yield* callAs("workflow", workflow, world.orgId, req))
            expected.push(["workflow", expectedForWorkflow(route, req, world.workflow.projectId)] as const)
          }
          assert.deepStrictEqual(Object.fromEntries(actual), Object.fromEntries(expected))
        }))
    }
  })
}
