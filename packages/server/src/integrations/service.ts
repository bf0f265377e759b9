/**
 * Integration connections, repo links and the token broker (spec "Integrations"; integrations-agents.md §1–3).
 * scmhost connects through the app's install page and the setup callback (a signed single-use state first, then the
 * installation checked with the provider); an installation binds one connection across all workspaces. The broker
 * denies by default and never stores, caches, logs or events the token it hands back.
 */
import {
  type Actor,
  actorId,
  type BrokeredToken,
  Conflict,
  type ConnectInput,
  type ConnectionPatch,
  Forbidden,
  type GrantInput,
  type InboundDelivery,
  type IntegrationConnection,
  IntegrationConnection as ConnectionSchema,
  type IntegrationConnectionId,
  type IntegrationGrant,
  IntegrationGrant as GrantSchema,
  NotFound,
  type OrgId,
  PreconditionFailed,
  type ProjectId,
  type ProviderUnavailable,
  type RepoLink,
  RepoLink as RepoLinkSchema,
  type RepoLinkId,
  type RepoLinkInput,
  type RepoLinkPatch,
  type Repository,
  type ResolvedWorkspace,
  SCMHOST,
  type TokenRequest,
  Unauthenticated,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  connectionAccountConstraint,
  type ConnectionRow,
  EnvironmentsRepo,
  type GrantRow,
  InboundDeliveriesRepo,
  type InboundDeliveryRow,
  IntegrationConnectionsRepo,
  IntegrationGrantsRepo,
  OrganizationsRepo,
  ProjectsRepo,
  type RepoLinkRow,
  RepoLinksRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option, Result, Schema } from "effect"
import { lock } from "../agents/custody.ts"
import { randomBase64Url, signToken, verifyToken } from "../platform/crypto.ts"
import { Entitlements } from "../platform/entitlements.ts"
import { apiJson, eventActorOf, EventLog, previousJson } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { ServerKeys } from "../platform/keys.ts"
import { decide } from "../platform/rbac.ts"
import { selfUrls } from "../platform/selfUrl.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"
import { IntegrationProviders } from "./providers.ts"
import { missingPermission } from "./rules.ts"
import { type Installation, type ProviderRepository, ScmhostClient } from "./scmhost.ts"
import { ScopeTemplatesService } from "./templates.ts"

const STATE_PURPOSE = "scmhost-setup-state"
const STATE_LIFETIME_MS = 60 * 60 * 1000
const StateClaims = Schema.Struct({ connectionId: Schema.String, stateId: Schema.String })
const PermissionsJson = Schema.fromJsonString(Schema.Record(Schema.String, Schema.String))
const BranchEnvMapJson = Schema.fromJsonString(Schema.Record(Schema.String, Schema.String))

const connectionNotFound = (connectionId: string) =>
  wireError(NotFound, "Integration connection not found", { connectionId })
const repoLinkNotFound = (repoLinkId: string) => wireError(NotFound, "Repo link not found", { repoLinkId })
const badState = () =>
  wireError(Unauthenticated, "The setup state is invalid, used or expired; start connecting again", {
    reason: "invalid_state"
  })

/** The API view of a stored connection; shared rows add where they come from. */
export const toConnection = (
  row: ConnectionRow,
  sharedBy?: { readonly workspaceRef: IntegrationConnection["sharedByWorkspaceRef"] & string; readonly name: string }
): IntegrationConnection => ({
  id: row.id,
  orgId: row.orgId,
  provider: row.provider,
  status: row.status,
  scope: row.scope,
  shareMode: row.shareMode,
  displayName: row.displayName,
  externalAccountLogin: row.externalAccountLogin,
  externalAccountType: row.externalAccountType,
  repositorySelection: row.repositorySelection,
  createdBy: row.createdBy,
  connectedAt: row.connectedAt,
  revokedAt: row.revokedAt,
  suspendedAt: row.suspendedAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
  ...(sharedBy === undefined
    ? {}
    : { inherited: true, sharedByWorkspaceRef: sharedBy.workspaceRef, sharedByName: sharedBy.name })
})

export const toRepoLink = (row: RepoLinkRow): RepoLink => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  connectionId: row.connectionId,
  repoExternalId: row.repoExternalId,
  repoFullName: row.repoFullName,
  defaultBranch: row.defaultBranch,
  branchEnvMap: Schema.decodeUnknownSync(BranchEnvMapJson)(row.branchEnvMapJson),
  createdBy: row.createdBy,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
  deletedAt: row.deletedAt
})

export const toDelivery = (row: InboundDeliveryRow): InboundDelivery => ({
  id: row.id,
  connectionId: row.connectionId,
  deliveryKey: row.deliveryKey,
  event: row.event,
  action: row.action,
  status: row.status,
  signatureOk: row.signatureOk,
  failureReason: row.failureReason,
  receivedAt: row.receivedAt,
  processedAt: row.processedAt
})

export const permissionsOf = (row: ConnectionRow): Readonly<Record<string, string>> =>
  Schema.decodeUnknownSync(PermissionsJson)(row.permissionsJson)

/** What the setup callback answers: the active connection and where the browser goes next. */
export interface SetupOutcome {
  readonly connection: IntegrationConnection
  readonly redirectUrl: string
}

/** A connection the workspace can see: its own, or one its account root shares with it. */
interface Visible {
  readonly row: ConnectionRow
  readonly own: boolean
  readonly view: IntegrationConnection
}

export class IntegrationsService extends Context.Service<IntegrationsService, {
  readonly connect: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    provider: string,
    input: ConnectInput
  ) => Effect.Effect<
    { readonly connection: IntegrationConnection; readonly installUrl?: string },
    NotFound | Forbidden | PreconditionFailed | Conflict | ProviderUnavailable
  >
  readonly setup: (query: {
    readonly installationId: string | undefined
    readonly state: string | undefined
  }) => Effect.Effect<SetupOutcome, Unauthenticated | Conflict | PreconditionFailed | ProviderUnavailable>
  readonly list: (
    workspace: ResolvedWorkspace
  ) => Effect.Effect<{ readonly connections: ReadonlyArray<IntegrationConnection> }>
  readonly get: (
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId
  ) => Effect.Effect<{ readonly connection: IntegrationConnection }, NotFound>
  readonly update: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId,
    patch: ConnectionPatch
  ) => Effect.Effect<{ readonly connection: IntegrationConnection }, NotFound | Forbidden>
  readonly revoke: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId
  ) => Effect.Effect<{ readonly connection: IntegrationConnection }, NotFound | Forbidden>
  readonly repositories: (
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId,
    q: string | undefined
  ) => Effect.Effect<
    { readonly repositories: ReadonlyArray<Repository> },
    NotFound | PreconditionFailed | ProviderUnavailable
  >
  readonly deliveries: (
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId
  ) => Effect.Effect<{ readonly deliveries: ReadonlyArray<InboundDelivery> }, NotFound>
  /** The visible connection (for replay's access check). */
  readonly visible: (
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId
  ) => Effect.Effect<ConnectionRow, NotFound>
  readonly listGrants: (
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId
  ) => Effect.Effect<{ readonly grants: ReadonlyArray<IntegrationGrant> }, NotFound | Forbidden>
  readonly createGrant: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId,
    input: GrantInput
  ) => Effect.Effect<{ readonly grant: IntegrationGrant }, NotFound | Forbidden | Conflict | ValidationFailed>
  readonly revokeGrant: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    connectionId: IntegrationConnectionId,
    workspaceOrgId: OrgId
  ) => Effect.Effect<{ readonly grant: IntegrationGrant }, NotFound | Forbidden>
  readonly listRepoLinks: (
    workspace: ResolvedWorkspace,
    projectId: ProjectId
  ) => Effect.Effect<{ readonly repoLinks: ReadonlyArray<RepoLink> }, NotFound>
  readonly createRepoLink: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    input: RepoLinkInput
  ) => Effect.Effect<
    { readonly repoLink: RepoLink },
    NotFound | Conflict | PreconditionFailed | ValidationFailed | ProviderUnavailable
  >
  readonly updateRepoLink: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    repoLinkId: RepoLinkId,
    patch: RepoLinkPatch
  ) => Effect.Effect<{ readonly repoLink: RepoLink }, NotFound | ValidationFailed>
  readonly deleteRepoLink: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    projectId: ProjectId,
    repoLinkId: RepoLinkId
  ) => Effect.Effect<{ readonly repoLink: RepoLink }, NotFound>
  readonly issueToken: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    request: TokenRequest
  ) => Effect.Effect<BrokeredToken, Forbidden | PreconditionFailed | ValidationFailed | ProviderUnavailable>
  /**
   * The repository `owner/name` (matched case-insensitively, as the provider does) as the first active scmhost
   * connection the workspace sees (its own, then shared ones) reaches it; None when none reaches it. A provider
   * failure fails only when no other connection answered with the repository.
   */
  readonly findRepository: (
    workspace: ResolvedWorkspace,
    fullName: string
  ) => Effect.Effect<Option.Option<ProviderRepository>, ProviderUnavailable>
}>()("@cp/server/IntegrationsService") {
  static readonly layer = Layer.effect(
    IntegrationsService,
    Effect.gen(function*() {
      const connections = yield* IntegrationConnectionsRepo
      const links = yield* RepoLinksRepo
      const deliveries = yield* InboundDeliveriesRepo
      const organizations = yield* OrganizationsRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const entitlements = yield* Entitlements
      const tx = yield* Transactor
      const events = yield* EventLog
      const keys = yield* ServerKeys
      const client = yield* ScmhostClient
      const urls = yield* selfUrls
      const grants = yield* IntegrationGrantsRepo
      const providers = yield* IntegrationProviders
      const templates = yield* ScopeTemplatesService

      /** The account root sharing with this workspace, when it is a child. */
      const accountRootOf = (workspace: ResolvedWorkspace) =>
        workspace.organization.isAccountRoot
          ? Effect.succeed(Option.none())
          : organizations.findByPublicId(workspace.organization.accountId)

      /** Every connection the workspace sees: its own, then those its account root shares with it (`auto`). */
      const visibleAll = Effect.fnUntraced(function*(workspace: ResolvedWorkspace) {
        const own = yield* connections.list(workspace.organization.id)
        const root = yield* accountRootOf(workspace)
        const granted = new Set(yield* grants.grantedTo(workspace.organization.id))
        const shared = Option.isNone(root) || root.value.id === workspace.organization.id
          ? []
          : (yield* connections.list(root.value.id)).filter((row) =>
            row.scope === "account" && (row.shareMode === "auto" || granted.has(row.id))
          )
        return [
          ...own.map((row): Visible => ({ row, own: true, view: toConnection(row) })),
          ...shared.map((row): Visible => ({
            row,
            own: false,
            view: Option.isSome(root)
              ? toConnection(row, { workspaceRef: root.value.publicId, name: root.value.name })
              : toConnection(row)
          }))
        ]
      })

      const findVisible = (workspace: ResolvedWorkspace, connectionId: IntegrationConnectionId) =>
        Effect.flatMap(visibleAll(workspace), (all) => {
          const found = all.find((entry) => entry.row.id === connectionId)
          return found === undefined ? Effect.fail(connectionNotFound(connectionId)) : Effect.succeed(found)
        })

      const findOwn = (workspace: ResolvedWorkspace, connectionId: IntegrationConnectionId) =>
        Effect.flatMap(findVisible(workspace, connectionId), (entry) =>
          entry.own
            ? Effect.succeed(entry.row)
            : Effect.fail(
              wireError(Forbidden, "Shared connections can be changed only by the workspace that owns them", {
                connectionId,
                reason: "inherited_connection"
              })
            ))

      const recordConnection = (
        actor: Actor | undefined,
        type: "integration.connected" | "integration.updated" | "integration.revoked",
        row: ConnectionRow,
        before?: ConnectionRow
      ) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: actor === undefined ? { actorType: "system", actorId: "system" } : eventActorOf(actor),
          subject: { kind: "integration_connection", id: row.id, name: row.displayName },
          data: {
            connection: apiJson(ConnectionSchema, toConnection(row)),
            ...(before === undefined
              ? {}
              : { previous: previousJson(ConnectionSchema, toConnection(before), toConnection(row)) })
          },
          description: `Integration ${row.provider} connection ${row.displayName} ${type.slice("integration.".length)}`
        })

      const recordLink = (
        actor: Actor,
        type: "repo_link.created" | "repo_link.updated" | "repo_link.deleted",
        row: RepoLinkRow,
        before?: RepoLinkRow
      ) =>
        events.record({
          orgId: row.orgId,
          projectId: row.projectId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "repo_link", id: row.id, name: row.repoFullName },
          data: {
            repoLink: apiJson(RepoLinkSchema, toRepoLink(row)),
            ...(before === undefined
              ? {}
              : { previous: previousJson(RepoLinkSchema, toRepoLink(before), toRepoLink(row)) })
          },
          description: `Repository ${row.repoFullName} ${type.slice("repo_link.".length)}`
        })

      /** The installation's repositories as the API lists them. */
      const repositoriesOf = Effect.fnUntraced(function*(row: ConnectionRow) {
        if (row.status !== "active" || row.installationId === null) {
          return yield* wireError(PreconditionFailed, "The connection is not active", {
            reason: "connection_not_active",
            status: row.status
          })
        }
        const found = yield* client.repositories(row.installationId)
        return found.map((repo): Repository => ({
          externalId: String(repo.id),
          fullName: repo.full_name,
          defaultBranch: repo.default_branch,
          private: repo.private
        }))
      })

      /** `branchEnvMap` values must name live environments of the project (422 naming the key). */
      const checkBranchMap = Effect.fnUntraced(function*(
        workspace: ResolvedWorkspace,
        projectId: ProjectId,
        map: Readonly<Record<string, string>>
      ) {
        const live = new Set(yield* environments.liveSlugs({ orgId: workspace.organization.id, projectId }))
        const fields = Object.fromEntries(
          Object.entries(map).filter(([, slug]) => !live.has(slug)).map(([branch, slug]) => [
            `branchEnvMap.${branch}`,
            [`'${slug}' is not a live environment of this project`]
          ])
        )
        if (Object.keys(fields).length > 0) return yield* validationFailed(fields)
      })

      const verifyInstallation = Effect.fnUntraced(function*(row: ConnectionRow, installationId: string) {
        const found = yield* client.installation(installationId)
        const issuedAt = row.stateIssuedAt?.getTime() ?? 0
        // Provider timestamps have whole seconds: compare against the second the state was issued in.
        const fresh = (installation: Installation) =>
          Math.max(Date.parse(installation.created_at), Date.parse(installation.updated_at)) >=
            Math.floor(issuedAt / 1000) * 1000
        if (Option.isNone(found)) {
          return yield* wireError(PreconditionFailed, "The provider does not know this installation", {
            reason: "installation_not_found"
          })
        }
        if (!fresh(found.value)) {
          return yield* wireError(
            PreconditionFailed,
            "This installation was not created or updated during this setup; install the app again",
            { reason: "installation_not_recent" }
          )
        }
        return found.value
      })

      const recordGrant = (
        actor: Actor,
        type: "integration.grant.created" | "integration.grant.revoked",
        orgId: OrgId,
        row: GrantRow
      ) =>
        events.record({
          orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "integration_grant", id: `${row.connectionId}:${row.workspaceOrgId}`, name: null },
          data: { grant: apiJson(GrantSchema, row) },
          description: `Workspace ${row.workspaceOrgId} ${
            type === "integration.grant.created" ? "admitted to" : "removed from"
          } ${row.connectionId}`
        })

      const grantNotFound = (workspaceOrgId: string) =>
        wireError(NotFound, "Admission grant not found", { workspaceOrgId })

      /**
       * A further provider: with `parentToken`, the custody gate first, then the token checked with the provider and
       * an active connection for the first organization it sees (or the one `scope` names), the token in custody.
       */
      const connectGeneric = Effect.fnUntraced(function*(
        actor: Actor,
        workspace: ResolvedWorkspace,
        provider: string,
        input: ConnectInput
      ) {
        const configured = providers.find(provider)
        if (Option.isNone(configured)) return yield* wireError(NotFound, "Unknown integration provider", { provider })
        const token = input.parentToken
        if (token === undefined) {
          return yield* wireError(PreconditionFailed, `OAuth is not configured for ${provider}; paste a parentToken`, {
            gate: `${provider}_oauth`,
            reason: "not_configured"
          })
        }
        if (!configured.value.custody) {
          return yield* wireError(PreconditionFailed, `Custody of ${provider} tokens is not configured`, {
            gate: `${provider}_custody`,
            reason: "not_configured"
          })
        }
        const check = yield* providers.checkToken(configured.value, token)
        if (check._tag === "Rejected") {
          return yield* wireError(PreconditionFailed, `The ${provider} API rejected the token`, {
            reason: "token_rejected"
          })
        }
        if (check.organizations.length === 0) {
          return yield* wireError(PreconditionFailed, `The token sees no ${provider} organization`, {
            reason: "no_org_visible"
          })
        }
        const organization = input.scope === undefined
          ? check.organizations[0]
          : check.organizations.find((org) => org.id === input.scope || org.name === input.scope)
        if (organization === undefined) {
          return yield* wireError(PreconditionFailed, `The token does not see the organization named by scope`, {
            reason: "scope_not_visible"
          })
        }
        const at = yield* currentDate
        const custody = lock(keys.kek, token)
        const row: ConnectionRow = {
          id: mint.integrationConnection(at.getTime()),
          orgId: workspace.organization.id,
          provider,
          status: "active",
          scope: workspace.organization.isAccountRoot ? "account" : "workspace",
          shareMode: "auto",
          displayName: input.displayName ?? organization.name,
          externalAccountLogin: organization.name,
          externalAccountType: "Organization",
          externalAccountId: organization.id,
          installationId: null,
          repositorySelection: null,
          permissionsJson: "{}",
          stateId: null,
          stateIssuedAt: null,
          stateExpiresAt: null,
          stateConsumedAt: null,
          sealedToken: custody.sealedKey,
          wrappedDataKey: custody.wrappedDataKey,
          kekId: custody.kekId,
          createdBy: actorId(actor),
          connectedAt: at,
          revokedAt: null,
          suspendedAt: null,
          createdAt: at,
          updatedAt: at
        }
        return yield* tx.withTransaction(Effect.gen(function*() {
          yield* connections.insert(row).pipe(
            Effect.catchTag(
              "UniqueViolation",
              () =>
                Effect.fail(wireError(Conflict, "This provider account already backs a connection in this workspace", {
                  reason: "account_already_connected"
                }))
            )
          )
          yield* recordConnection(actor, "integration.connected", row)
          return { connection: toConnection(row) }
        }))
      })

      return IntegrationsService.of({
        listGrants: Effect.fn("IntegrationsService.listGrants")(function*(workspace, connectionId) {
          const row = yield* findOwn(workspace, connectionId)
          return { grants: yield* grants.list(row.id) }
        }),

        createGrant: Effect.fn("IntegrationsService.createGrant")(function*(actor, workspace, connectionId, input) {
          const connection = yield* findOwn(workspace, connectionId)
          const child = yield* organizations.findById(input.workspaceOrgId)
          if (
            Option.isNone(child) || child.value.id === workspace.organization.id ||
            child.value.accountId !== workspace.organization.workspaceRef
          ) {
            return yield* validationFailed({ workspaceOrgId: ["must be a child workspace of this account"] })
          }
          const row: GrantRow = {
            connectionId: connection.id,
            workspaceOrgId: input.workspaceOrgId,
            createdBy: actorId(actor),
            createdAt: yield* currentDate
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* grants.insert(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () =>
                  Effect.fail(wireError(Conflict, "The workspace already holds a grant", {
                    workspaceOrgId: input.workspaceOrgId
                  }))
              )
            )
            yield* recordGrant(actor, "integration.grant.created", connection.orgId, row)
            return { grant: row }
          }))
        }),

        revokeGrant: Effect.fn("IntegrationsService.revokeGrant")(
          function*(actor, workspace, connectionId, workspaceOrgId) {
            const connection = yield* findOwn(workspace, connectionId)
            return yield* tx.withTransaction(Effect.gen(function*() {
              const removed = yield* grants.remove({ connectionId: connection.id, workspaceOrgId }).pipe(
                orFail(() => grantNotFound(workspaceOrgId))
              )
              yield* recordGrant(actor, "integration.grant.revoked", connection.orgId, removed)
              return { grant: removed }
            }))
          }
        ),

        connect: Effect.fn("IntegrationsService.connect")(function*(actor, workspace, provider, input) {
          if (provider !== SCMHOST) return yield* connectGeneric(actor, workspace, provider, input)
          const orgId = workspace.organization.id
          if (!(yield* entitlements.isEnabled(orgId, "feature.integrations.scmhost"))) {
            return yield* wireError(Forbidden, "The workspace's plan does not include the scmhost integration", {
              entitlement: "feature.integrations.scmhost"
            })
          }
          if (!client.configured) {
            return yield* wireError(PreconditionFailed, "The source-control app is not configured", {
              gate: "scmhost_app",
              reason: "not_configured"
            })
          }
          const at = yield* currentDate
          const id = mint.integrationConnection(at.getTime())
          const stateId = randomBase64Url(16)
          const row: ConnectionRow = {
            id,
            orgId,
            provider,
            status: "pending",
            scope: workspace.organization.isAccountRoot ? "account" : "workspace",
            shareMode: "auto",
            displayName: input.displayName ?? "scmhost",
            externalAccountLogin: null,
            externalAccountType: null,
            externalAccountId: null,
            installationId: null,
            repositorySelection: null,
            permissionsJson: "{}",
            stateId,
            stateIssuedAt: at,
            stateExpiresAt: new Date(at.getTime() + STATE_LIFETIME_MS),
            stateConsumedAt: null,
            sealedToken: null,
            wrappedDataKey: null,
            kekId: null,
            createdBy: actorId(actor),
            connectedAt: null,
            revokedAt: null,
            suspendedAt: null,
            createdAt: at,
            updatedAt: at
          }
          yield* connections.insert(row).pipe(Effect.catchTag("UniqueViolation", Effect.die))
          const state = signToken(keys.signingKey, STATE_PURPOSE, { connectionId: id, stateId })
          return { connection: toConnection(row), installUrl: yield* client.installUrl(state) }
        }),

        setup: Effect.fn("IntegrationsService.setup")(function*({ installationId, state }) {
          // The state first: nothing is looked up or changed for a caller without a valid one.
          const claims = state === undefined
            ? Option.none()
            : Schema.decodeUnknownOption(StateClaims)(verifyToken(keys.signingKey, STATE_PURPOSE, state))
          if (Option.isNone(claims)) return yield* badState()
          const consumed = yield* connections.consumeState({
            connectionId: claims.value.connectionId as IntegrationConnectionId,
            stateId: claims.value.stateId,
            at: yield* currentDate
          })
          if (Option.isNone(consumed)) return yield* badState()
          if (installationId === undefined || !/^[0-9]{1,20}$/.test(installationId)) {
            return yield* wireError(PreconditionFailed, "The provider sent no installation id", {
              reason: "installation_not_found"
            })
          }
          const installation = yield* verifyInstallation(consumed.value, installationId)
          const at = yield* currentDate
          const next: ConnectionRow = {
            ...consumed.value,
            status: "active",
            installationId,
            externalAccountId: String(installation.account.id),
            externalAccountLogin: installation.account.login,
            externalAccountType: installation.account.type,
            repositorySelection: installation.repository_selection,
            permissionsJson: JSON.stringify(installation.permissions),
            connectedAt: at,
            updatedAt: at
          }
          const active = yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* connections.update(next).pipe(
              Effect.catchTag("UniqueViolation", (violation) =>
                Effect.fail(
                  violation.constraint === connectionAccountConstraint
                    ? wireError(Conflict, "This provider account already backs a connection in this workspace", {
                      reason: "account_already_connected"
                    })
                    : wireError(Conflict, "This installation is already bound to another connection", {
                      reason: "installation_already_bound"
                    })
                )),
              orFail(() => badState())
            )
            yield* recordConnection(undefined, "integration.connected", stored)
            return stored
          }))
          return {
            connection: toConnection(active),
            redirectUrl: `${urls.links}/integrations/connected?connectionId=${active.id}`
          }
        }),

        list: Effect.fn("IntegrationsService.list")(function*(workspace) {
          return { connections: (yield* visibleAll(workspace)).map((entry) => entry.view) }
        }),

        get: Effect.fn("IntegrationsService.get")(function*(workspace, connectionId) {
          return { connection: (yield* findVisible(workspace, connectionId)).view }
        }),

        visible: (workspace, connectionId) => Effect.map(findVisible(workspace, connectionId), (entry) => entry.row),

        update: Effect.fn("IntegrationsService.update")(function*(actor, workspace, connectionId, patch) {
          const current = yield* findOwn(workspace, connectionId)
          if (patch.shareMode === undefined || patch.shareMode === current.shareMode) {
            return { connection: toConnection(current) }
          }
          const next: ConnectionRow = { ...current, shareMode: patch.shareMode, updatedAt: yield* currentDate }
          return yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* connections.update(next).pipe(
              Effect.catchTag("UniqueViolation", Effect.die),
              orFail(() => connectionNotFound(connectionId))
            )
            yield* recordConnection(actor, "integration.updated", stored, current)
            return { connection: toConnection(stored) }
          }))
        }),

        revoke: Effect.fn("IntegrationsService.revoke")(function*(actor, workspace, connectionId) {
          const current = yield* findOwn(workspace, connectionId)
          if (current.status === "revoked") return { connection: toConnection(current) }
          const at = yield* currentDate
          const next: ConnectionRow = { ...current, status: "revoked", revokedAt: at, updatedAt: at }
          return yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* connections.update(next).pipe(
              Effect.catchTag("UniqueViolation", Effect.die),
              orFail(() => connectionNotFound(connectionId))
            )
            yield* recordConnection(actor, "integration.revoked", stored, current)
            return { connection: toConnection(stored) }
          }))
        }),

        repositories: Effect.fn("IntegrationsService.repositories")(function*(workspace, connectionId, q) {
          const { row } = yield* findVisible(workspace, connectionId)
          const all = yield* repositoriesOf(row)
          const needle = q?.trim().toLowerCase() ?? ""
          return { repositories: all.filter((repo) => repo.fullName.toLowerCase().includes(needle)) }
        }),

        deliveries: Effect.fn("IntegrationsService.deliveries")(function*(workspace, connectionId) {
          const { row } = yield* findVisible(workspace, connectionId)
          return { deliveries: (yield* deliveries.listForConnection(row.id)).map(toDelivery) }
        }),

        listRepoLinks: Effect.fn("IntegrationsService.listRepoLinks")(function*(workspace, projectId) {
          const orgId = workspace.organization.id
          yield* findProject(projects, orgId, projectId)
          return { repoLinks: (yield* links.listByProject({ orgId, projectId })).map(toRepoLink) }
        }),

        createRepoLink: Effect.fn("IntegrationsService.createRepoLink")(function*(actor, workspace, projectId, input) {
          const orgId = workspace.organization.id
          yield* findProject(projects, orgId, projectId)
          const connection = (yield* visibleAll(workspace)).find((entry) => entry.row.id === input.connectionId)
          if (connection === undefined) {
            return yield* validationFailed({ connectionId: ["names no connection visible to this workspace"] })
          }
          const branchEnvMap = input.branchEnvMap ?? {}
          yield* checkBranchMap(workspace, projectId, branchEnvMap)
          const limit = yield* entitlements.limitOf(orgId, "limit.repo_links")
          if (Option.isSome(limit) && (yield* links.countLive(orgId)) >= limit.value) {
            return yield* wireError(PreconditionFailed, "The workspace has reached its repo link limit", {
              reason: "limit_reached",
              entitlement: "limit.repo_links",
              limit: limit.value
            })
          }
          const repository = (yield* repositoriesOf(connection.row)).find((repo) =>
            repo.externalId === input.repoExternalId
          )
          if (repository === undefined) {
            return yield* validationFailed({ repoExternalId: ["is not a repository of this connection"] })
          }
          const at = yield* currentDate
          const row: RepoLinkRow = {
            id: mint.repoLink(at.getTime()),
            orgId,
            projectId,
            connectionId: connection.row.id,
            repoExternalId: repository.externalId,
            repoFullName: repository.fullName,
            defaultBranch: input.defaultBranch ?? repository.defaultBranch,
            branchEnvMapJson: JSON.stringify(branchEnvMap),
            createdBy: actorId(actor),
            createdAt: at,
            updatedAt: at,
            deletedAt: null
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* links.insert(row).pipe(
              Effect.catchTag("UniqueViolation", () =>
                Effect.fail(
                  wireError(Conflict, "This repository is already linked to the project", {
                    repoExternalId: row.repoExternalId,
                    projectId
                  })
                ))
            )
            yield* recordLink(actor, "repo_link.created", row)
            return { repoLink: toRepoLink(row) }
          }))
        }),

        updateRepoLink: Effect.fn("IntegrationsService.updateRepoLink")(
          function*(actor, workspace, projectId, repoLinkId, patch) {
            const orgId = workspace.organization.id
            const current = yield* links.find({ orgId, projectId, repoLinkId }).pipe(
              orFail(() => repoLinkNotFound(repoLinkId))
            )
            if (patch.branchEnvMap !== undefined) yield* checkBranchMap(workspace, projectId, patch.branchEnvMap)
            const next: RepoLinkRow = {
              ...current,
              defaultBranch: patch.defaultBranch ?? current.defaultBranch,
              branchEnvMapJson: patch.branchEnvMap === undefined
                ? current.branchEnvMapJson
                : JSON.stringify(patch.branchEnvMap),
              updatedAt: yield* currentDate
            }
            return yield* tx.withTransaction(Effect.gen(function*() {
              const stored = yield* links.update(next).pipe(orFail(() => repoLinkNotFound(repoLinkId)))
              yield* recordLink(actor, "repo_link.updated", stored, current)
              return { repoLink: toRepoLink(stored) }
            }))
          }
        ),

        deleteRepoLink: Effect.fn("IntegrationsService.deleteRepoLink")(
          function*(actor, workspace, projectId, repoLinkId) {
            const orgId = workspace.organization.id
            return yield* tx.withTransaction(Effect.gen(function*() {
              const removed = yield* links.remove({ orgId, projectId, repoLinkId, at: yield* currentDate }).pipe(
                orFail(() => repoLinkNotFound(repoLinkId))
              )
              yield* recordLink(actor, "repo_link.deleted", removed)
              return { repoLink: toRepoLink(removed) }
            }))
          }
        ),

        findRepository: Effect.fn("IntegrationsService.findRepository")(function*(workspace, fullName) {
          const wanted = fullName.toLowerCase()
          let failure: ProviderUnavailable | undefined
          for (const { row } of yield* visibleAll(workspace)) {
            if (row.provider !== SCMHOST || row.status !== "active" || row.installationId === null) continue
            const reached = yield* Effect.result(client.repositories(row.installationId))
            if (Result.isFailure(reached)) {
              failure = reached.failure
              continue
            }
            const found = reached.success.find((repo) => repo.full_name.toLowerCase() === wanted)
            if (found !== undefined) return Option.some(found)
          }
          return failure === undefined ? Option.none() : yield* Effect.fail(failure)
        }),

        issueToken: Effect.fn("IntegrationsService.issueToken")(function*(actor, workspace, request) {
          const orgId = workspace.organization.id
          const permissions = request.template !== undefined
            ? Option.getOrUndefined(yield* templates.usable(workspace, request.template))
            : request.permissions
          if (permissions === undefined || Object.keys(permissions).length === 0) {
            return yield* validationFailed(
              request.template !== undefined
                ? { template: ["names no active scope template"] }
                : { permissions: ["give permissions or a template"] }
            )
          }
          const visible = new Map((yield* visibleAll(workspace)).map((entry) => [entry.row.id, entry.row]))
          const workspaceLinks = yield* links.liveInWorkspace(orgId)
          // Deny by default: each repository needs a live link, in a project the caller can read, through an active
          // connection this workspace sees; all through one installation.
          let connection: ConnectionRow | undefined
          for (const repository of request.repositories) {
            const usable = workspaceLinks.filter((link) =>
              link.repoExternalId === repository &&
              visible.get(link.connectionId)?.status === "active" &&
              decide(workspace.grants, "project.read", link.projectId).allow
            )
            const first = usable[0]
            if (first === undefined) {
              return yield* wireError(Forbidden, "No repo link you can read names this repository", {
                repository,
                reason: "repository_not_linked"
              })
            }
            const through = visible.get(first.connectionId)
            if (through === undefined || (connection !== undefined && connection.id !== through.id)) {
              return yield* wireError(Forbidden, "The repositories belong to different installations", {
                repository,
                reason: "different_installations"
              })
            }
            connection = through
          }
          if (connection === undefined || connection.installationId === null) {
            return yield* wireError(Forbidden, "No repository was named", { reason: "repository_not_linked" })
          }
          const missing = missingPermission(permissionsOf(connection), permissions)
          if (missing !== undefined) {
            return yield* wireError(Forbidden, "The installation does not grant this permission at that level", {
              permission: missing,
              level: permissions[missing],
              reason: "permission_not_granted"
            })
          }
          const answer = yield* client.accessToken(connection.installationId, {
            repositoryIds: request.repositories.map(Number),
            permissions: { ...permissions }
          })
          if ("_tag" in answer) {
            return yield* wireError(Forbidden, "The provider refused to issue a token with this scope", {
              reason: "provider_refused"
            })
          }
          const repositories = (answer.repositories ?? []).map((repo) => ({
            externalId: String(repo.id),
            fullName: repo.full_name
          }))
          const through = connection
          // The audit entry names what was issued, never the token.
          yield* tx.withTransaction(events.record({
            orgId,
            type: "integration.token.issued",
            actor: eventActorOf(actor),
            subject: { kind: "integration_connection", id: through.id, name: through.displayName },
            data: { connectionId: through.id, repositories, permissions: answer.permissions },
            description: `Installation token issued for ${repositories.map((repo) => repo.fullName).join(", ")}`
          }))
          return {
            token: answer.token,
            expiresAt: new Date(answer.expires_at),
            repositories,
            permissions: answer.permissions
          }
        })
      })
    })
  )
}
