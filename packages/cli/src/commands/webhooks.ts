/**
 * Webhook commands, in the workspace of `-w` (or the default):
 * `webhooks endpoints list|create|get|update|disable|enable|rotate-secret|delete|stats`,
 * `webhooks subscriptions list|create|get|enable|disable|delete`, `webhooks attempts list|get|replay`,
 * `webhooks recover <endpoint> --since <ISO time>` and `webhooks test <endpoint> [--event-type]`.
 * `endpoints list` and `endpoints create` take `--project` (id or slug) for project-scoped endpoints; `endpoints
 * delete` asks unless `--yes`. `rotate-secret` prints the new secret: the only time it is shown.
 */
import {
  type DeliveryAttempt,
  DeliveryAttemptId,
  type WebhookEndpoint,
  WebhookEndpointId,
  type WebhookSubscription,
  WebhookSubscriptionId
} from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import {
  confirm,
  fetchRows,
  flagWords,
  optionalKey,
  pageFlags,
  resolveProject,
  workspaceFlag,
  yesFlag
} from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const endpointColumns: Columns<WebhookEndpoint> = {
  id: (e) => e.id,
  url: (e) => e.url,
  name: (e) => e.name,
  project: (e) => e.projectId,
  status: (e) => e.status,
  reason: (e) => e.disabledReason,
  secret: (e) => e.secretVersion,
  updated: (e) => e.updatedAt
}

const subscriptionColumns: Columns<WebhookSubscription> = {
  id: (s) => s.id,
  endpoint: (s) => s.endpointId,
  eventType: (s) => s.eventType,
  enabled: (s) => s.enabled
}

const attemptColumns: Columns<DeliveryAttempt> = {
  id: (a) => a.id,
  event: (a) => a.eventType,
  status: (a) => a.status,
  attempt: (a) => a.attemptNumber,
  http: (a) => a.httpStatusCode,
  reason: (a) => a.failureReason,
  nextRetry: (a) => a.nextRetryAt,
  created: (a) => a.createdAt
}

const endpointArgument = Argument.String("endpoint").pipe(
  Argument.withSchema(WebhookEndpointId),
  Argument.withDescription("The endpoint's id (whe_…)")
)
const subscriptionArgument = Argument.String("subscription").pipe(
  Argument.withSchema(WebhookSubscriptionId),
  Argument.withDescription("The subscription's id (whs_…)")
)
const attemptArgument = Argument.String("attempt").pipe(
  Argument.withSchema(DeliveryAttemptId),
  Argument.withDescription("The delivery attempt's id (whd_…)")
)
const projectFlag = Flag.String("project").pipe(
  Flag.withDescription("Project id (prj_…) or slug: a project-scoped endpoint"),
  Flag.optional
)
const nameFlag = Flag.String("name").pipe(Flag.withDescription("Display name"), Flag.optional)
const descriptionFlag = Flag.String("description").pipe(Flag.withDescription("Description"), Flag.optional)

const showEndpoint = (endpoint: WebhookEndpoint) => renderTable(endpointColumns, [endpoint])
const showSubscription = (subscription: WebhookSubscription) => renderTable(subscriptionColumns, [subscription])
const showAttempt = (deliveryAttempt: DeliveryAttempt) => renderTable(attemptColumns, [deliveryAttempt])
const endpointOf = <E, R>(answer: Effect.Effect<{ readonly endpoint: WebhookEndpoint }, E, R>) =>
  Effect.map(answer, ({ endpoint }) => endpoint)
const subscriptionOf = <E, R>(answer: Effect.Effect<{ readonly subscription: WebhookSubscription }, E, R>) =>
  Effect.map(answer, ({ subscription }) => subscription)
const attemptOf = <E, R>(answer: Effect.Effect<{ readonly deliveryAttempt: DeliveryAttempt }, E, R>) =>
  Effect.map(answer, ({ deliveryAttempt }) => deliveryAttempt)

/** A command on one endpoint: `webhooks endpoints <name> <endpoint>`. */
const onEndpoint = <A, E>(
  name: string,
  description: string,
  call: (
    api: ControlPlaneClient["Service"]["api"],
    params: { readonly orgId: string; readonly endpointId: WebhookEndpointId }
  ) => Effect.Effect<A, E>,
  view: (value: A) => string
) =>
  Command.make(
    name,
    { workspace: workspaceFlag, endpoint: endpointArgument },
    Effect.fn(`cpctl.webhooks.endpoints.${name}`)(function*(flags) {
      const { api } = yield* ControlPlaneClient
      yield* printResult(yield* call(api, { orgId: flags.workspace, endpointId: flags.endpoint }), view)
    })
  ).pipe(Command.withDescription(description), withClient)

const listEndpoints = Command.make(
  "list",
  { workspace: workspaceFlag, project: projectFlag, ...pageFlags },
  Effect.fn("cpctl.webhooks.endpoints.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const orgId = flags.workspace
    const projectId = Option.isSome(flags.project) ? yield* resolveProject(orgId, flags.project.value) : undefined
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        projectId === undefined
          ? api.webhooks.listEndpoints({ params: { orgId }, query })
          : api.webhooks.listProjectEndpoints({ params: { orgId, projectId }, query }),
        (page) => ({ rows: page.data.endpoints, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: endpointColumns,
      empty: "No webhook endpoints: create one with `cpctl webhooks endpoints create <url>`.",
      command: [
        "cpctl",
        "webhooks",
        "endpoints",
        "list",
        "-w",
        orgId,
        ...flagWords("--project", flags.project),
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List webhook endpoints (every scope, or one project's)"), withClient)

const createEndpoint = Command.make(
  "create",
  {
    workspace: workspaceFlag,
    url: Argument.String("url").pipe(Argument.withDescription("The https:// URL to deliver to")),
    project: projectFlag,
    name: nameFlag,
    description: descriptionFlag
  },
  Effect.fn("cpctl.webhooks.endpoints.create")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const payload = {
      url: flags.url,
      ...optionalKey("name", flags.name),
      ...optionalKey("description", flags.description)
    }
    const created = Option.isSome(flags.project)
      ? yield* api.webhooks.createProjectEndpoint({
        params: { orgId: flags.workspace, projectId: yield* resolveProject(flags.workspace, flags.project.value) },
        payload
      })
      : yield* api.webhooks.createEndpoint({ params: { orgId: flags.workspace }, payload })
    yield* printResult(created.endpoint, showEndpoint)
  })
).pipe(
  Command.withDescription("Create an endpoint; run rotate-secret to obtain a secret to verify deliveries with"),
  withClient
)

const updateEndpoint = Command.make(
  "update",
  {
    workspace: workspaceFlag,
    endpoint: endpointArgument,
    url: Flag.String("url").pipe(Flag.withDescription("New https:// URL"), Flag.optional),
    name: nameFlag,
    description: descriptionFlag
  },
  Effect.fn("cpctl.webhooks.endpoints.update")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const updated = yield* api.webhooks.updateEndpoint({
      params: { orgId: flags.workspace, endpointId: flags.endpoint },
      payload: {
        ...optionalKey("url", flags.url),
        ...optionalKey("name", flags.name),
        ...optionalKey("description", flags.description)
      }
    })
    yield* printResult(updated.endpoint, showEndpoint)
  })
).pipe(Command.withDescription("Change an endpoint's URL, name or description"), withClient)

const disableEndpoint = Command.make(
  "disable",
  {
    workspace: workspaceFlag,
    endpoint: endpointArgument,
    reason: Flag.String("reason").pipe(Flag.withDescription("Why (recorded as disabledReason)"), Flag.optional)
  },
  Effect.fn("cpctl.webhooks.endpoints.disable")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const disabled = yield* api.webhooks.disableEndpoint({
      params: { orgId: flags.workspace, endpointId: flags.endpoint },
      payload: optionalKey("reason", flags.reason)
    })
    yield* printResult(disabled.endpoint, showEndpoint)
  })
).pipe(Command.withDescription("Stop deliveries to an endpoint"), withClient)

const deleteEndpoint = Command.make(
  "delete",
  { workspace: workspaceFlag, endpoint: endpointArgument, yes: yesFlag },
  Effect.fn("cpctl.webhooks.endpoints.delete")(function*({ endpoint, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(yes, `Delete webhook endpoint ${endpoint} with its subscriptions and delivery attempts?`)
    const deleted = yield* api.webhooks.deleteEndpoint({ params: { orgId: workspace, endpointId: endpoint } })
    yield* printResult(deleted.endpoint, (e) => `Deleted endpoint ${e.id} (${e.url}).`)
  })
).pipe(
  Command.withDescription("Delete an endpoint with its subscriptions and delivery attempts (asks unless --yes)"),
  withClient
)

const endpoints = Command.make("endpoints").pipe(
  Command.withDescription("Webhook endpoints"),
  Command.withSubcommands([
    listEndpoints,
    createEndpoint,
    onEndpoint(
      "get",
      "Show an endpoint",
      (api, params) => endpointOf(api.webhooks.getEndpoint({ params })),
      showEndpoint
    ),
    updateEndpoint,
    disableEndpoint,
    onEndpoint(
      "enable",
      "Resume deliveries to an endpoint (does not resend failed ones)",
      (api, params) => endpointOf(api.webhooks.enableEndpoint({ params })),
      showEndpoint
    ),
    onEndpoint(
      "rotate-secret",
      "Make a new signing secret and print it (the only time it is shown); the old one signs for 24 h more",
      (api, params) => api.webhooks.rotateSecret({ params }),
      (rotated) =>
        `${renderTable(endpointColumns, [rotated.endpoint])}\nSecret: ${rotated.secret}\nPrevious secret valid until: ${
          rotated.previousSecretExpiresAt?.toISOString() ?? "-"
        }`
    ),
    deleteEndpoint,
    onEndpoint(
      "stats",
      "Deliveries of the last 24 hours",
      (api, params) => Effect.map(api.webhooks.endpointStats({ params }), ({ stats }) => stats),
      (stats) =>
        renderTable({
          success: (s) => s.success,
          failed: (s) => s.failed,
          retrying: (s) => s.retrying,
          pending: (s) => s.pending,
          lastSuccess: (s) => s.lastSuccessAt,
          lastFailure: (s) => s.lastFailureAt,
          streak: (s) => s.consecutiveFailures
        }, [stats])
    )
  ])
)

const listSubscriptions = Command.make(
  "list",
  { workspace: workspaceFlag, endpoint: endpointArgument, ...pageFlags },
  Effect.fn("cpctl.webhooks.subscriptions.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const params = { orgId: flags.workspace, endpointId: flags.endpoint }
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.webhooks.listEndpointSubscriptions({ params, query }),
        (page) => ({ rows: page.data.subscriptions, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: subscriptionColumns,
      empty: "No subscriptions: add one with `cpctl webhooks subscriptions create <endpoint> <event-type>`.",
      command: [
        "cpctl",
        "webhooks",
        "subscriptions",
        "list",
        flags.endpoint,
        "-w",
        flags.workspace,
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List an endpoint's subscriptions"), withClient)

const createSubscription = Command.make(
  "create",
  {
    workspace: workspaceFlag,
    endpoint: endpointArgument,
    eventType: Argument.String("event-type").pipe(
      Argument.withDescription("An event type, a prefix wildcard such as project.*, or *")
    )
  },
  Effect.fn("cpctl.webhooks.subscriptions.create")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const created = yield* api.webhooks.createSubscription({
      params: { orgId: flags.workspace },
      payload: { endpointId: flags.endpoint, eventType: flags.eventType }
    })
    yield* printResult(created.subscription, showSubscription)
  })
).pipe(Command.withDescription("Subscribe an endpoint to an event type"), withClient)

/** A command on one subscription. */
const onSubscription = <A, E>(
  name: string,
  description: string,
  call: (
    api: ControlPlaneClient["Service"]["api"],
    params: { readonly orgId: string; readonly subscriptionId: WebhookSubscriptionId }
  ) => Effect.Effect<A, E>,
  view: (value: A) => string
) =>
  Command.make(
    name,
    { workspace: workspaceFlag, subscription: subscriptionArgument },
    Effect.fn(`cpctl.webhooks.subscriptions.${name}`)(function*(flags) {
      const { api } = yield* ControlPlaneClient
      yield* printResult(yield* call(api, { orgId: flags.workspace, subscriptionId: flags.subscription }), view)
    })
  ).pipe(Command.withDescription(description), withClient)

const subscriptions = Command.make("subscriptions").pipe(
  Command.withDescription("Which event types an endpoint receives"),
  Command.withSubcommands([
    listSubscriptions,
    createSubscription,
    onSubscription(
      "get",
      "Show a subscription",
      (api, params) => subscriptionOf(api.webhooks.getSubscription({ params })),
      showSubscription
    ),
    onSubscription(
      "enable",
      "Enable a subscription",
      (api, params) => subscriptionOf(api.webhooks.updateSubscription({ params, payload: { enabled: true } })),
      showSubscription
    ),
    onSubscription(
      "disable",
      "Disable a subscription (it matches nothing while disabled)",
      (api, params) => subscriptionOf(api.webhooks.updateSubscription({ params, payload: { enabled: false } })),
      showSubscription
    ),
    onSubscription(
      "delete",
      "Delete a subscription",
      (api, params) => subscriptionOf(api.webhooks.deleteSubscription({ params })),
      (subscription) => `Deleted subscription ${subscription.id} (${subscription.eventType}).`
    )
  ])
)

const listAttempts = Command.make(
  "list",
  { workspace: workspaceFlag, endpoint: endpointArgument, ...pageFlags },
  Effect.fn("cpctl.webhooks.attempts.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const params = { orgId: flags.workspace, endpointId: flags.endpoint }
    const { next, rows } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.webhooks.listDeliveryAttempts({ params, query }),
        (page) => ({ rows: page.data.deliveryAttempts, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: attemptColumns,
      empty: "No delivery attempts yet.",
      command: [
        "cpctl",
        "webhooks",
        "attempts",
        "list",
        flags.endpoint,
        "-w",
        flags.workspace,
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List an endpoint's delivery attempts, newest first"), withClient)

/** A command on one delivery attempt. */
const onAttempt = <E>(
  name: string,
  description: string,
  call: (
    api: ControlPlaneClient["Service"]["api"],
    params: { readonly orgId: string; readonly attemptId: DeliveryAttemptId }
  ) => Effect.Effect<DeliveryAttempt, E>
) =>
  Command.make(
    name,
    { workspace: workspaceFlag, attempt: attemptArgument },
    Effect.fn(`cpctl.webhooks.attempts.${name}`)(function*(flags) {
      const { api } = yield* ControlPlaneClient
      yield* printResult(yield* call(api, { orgId: flags.workspace, attemptId: flags.attempt }), showAttempt)
    })
  ).pipe(Command.withDescription(description), withClient)

const attempts = Command.make("attempts").pipe(
  Command.withDescription("Delivery attempts"),
  Command.withSubcommands([
    listAttempts,
    onAttempt(
      "get",
      "Show a delivery attempt",
      (api, params) => attemptOf(api.webhooks.getDeliveryAttempt({ params }))
    ),
    onAttempt(
      "replay",
      "Send the attempt's original payload again, as a new attempt",
      (api, params) => attemptOf(api.webhooks.replayDeliveryAttempt({ params }))
    )
  ])
)

const recover = Command.make(
  "recover",
  {
    workspace: workspaceFlag,
    endpoint: endpointArgument,
    since: Flag.String("since").pipe(Flag.withDescription("ISO time, at most 14 days ago"))
  },
  Effect.fn("cpctl.webhooks.recover")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const recovered = yield* api.webhooks.recoverEndpoint({
      params: { orgId: flags.workspace, endpointId: flags.endpoint },
      payload: { since: new Date(flags.since) }
    })
    yield* printResult(recovered, ({ replayed }) => `Replayed ${replayed} failed attempt(s).`)
  })
).pipe(Command.withDescription("Replay every failed attempt of an endpoint created since a time"), withClient)

const test = Command.make(
  "test",
  {
    workspace: workspaceFlag,
    endpoint: endpointArgument,
    eventType: Flag.String("event-type").pipe(Flag.withDescription("Type of the synthetic event"), Flag.optional)
  },
  Effect.fn("cpctl.webhooks.test")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const tried = yield* api.webhooks.testEndpoint({
      params: { orgId: flags.workspace, endpointId: flags.endpoint },
      payload: optionalKey("eventType", flags.eventType)
    })
    yield* printResult(tried.deliveryAttempt, showAttempt)
  })
).pipe(Command.withDescription("Send a synthetic signed event now and show how it went"), withClient)

export const webhooks = Command.make("webhooks").pipe(
  Command.withDescription("Outbound signed webhooks"),
  Command.withSubcommands([endpoints, subscriptions, attempts, recover, test])
)
