/**
 * Secrets at workspace, project and environment scope. The value is sealed (AES-256-GCM under the KEK, key id kept)
 * before it reaches a repository, and nothing here ever returns, records or logs it: responses, the event
 * (`secrets.updated`) and its audit entry carry metadata only.
 */
import {
  type Actor,
  actorId,
  Conflict,
  type EnvironmentId,
  NotFound,
  type Paged,
  type ProjectId,
  type ResolvedWorkspace,
  Secret,
  type SecretId,
  type SecretInput,
  type SecretRotation,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  EnvironmentsRepo,
  idPosition,
  ProjectsRepo,
  type SecretRow,
  type SecretScopeFilter,
  SecretsRepo,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option } from "effect"
import { apiJson, eventActorOf, EventLog } from "../platform/events.ts"
import { mint } from "../platform/ids.ts"
import { ServerKeys } from "../platform/keys.ts"
import { Cursors, keysetPage, type PageRequest } from "../platform/pagination.ts"
import { seal } from "../platform/secretBox.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { findEnvironment, findProject } from "../projects/scope.ts"

/** The `{scope}` prefix a request came in under. */
export type SecretScope =
  | { readonly kind: "organization" }
  | { readonly kind: "project"; readonly projectId: ProjectId }
  | { readonly kind: "environment"; readonly projectId: ProjectId; readonly environmentId: EnvironmentId }

export type SecretListQuery = PageRequest & { readonly scope?: string }

/** Metadata only: the sealed value and its key id never leave the server. */
export const toSecret = (row: SecretRow): Secret => ({
  id: row.id,
  orgId: row.orgId,
  projectId: row.projectId,
  environmentId: row.environmentId,
  scopeKind: row.scopeKind,
  secretKey: row.secretKey,
  displayName: row.displayName,
  status: row.status,
  version: row.version,
  rotationPolicy: row.rotationPolicy,
  lastRotatedAt: row.lastRotatedAt,
  expiresAt: row.expiresAt,
  createdBy: row.createdBy,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

/** Contract §4: the two phrases of the `scope` query rule. */
export const SCOPE_MUST_BE_ALL = "must be 'all' when present"
export const SCOPE_ALL_ORG_ONLY = "'all' is valid only on the organization scope"

const secretNotFound = (secretId: string) => wireError(NotFound, "Secret not found", { secretId })

const sameScope = (row: SecretRow, scope: SecretScope): boolean => {
  switch (scope.kind) {
    case "organization":
      return row.scopeKind === "organization"
    case "project":
      return row.scopeKind === "project" && row.projectId === scope.projectId
    case "environment":
      return row.scopeKind === "environment" && row.projectId === scope.projectId &&
        row.environmentId === scope.environmentId
  }
}

/** The list filter a `scope` query asks for on this route, or the 422 the spec words. */
export const listFilterOf = (
  scope: SecretScope,
  query: string | undefined
): Effect.Effect<SecretScopeFilter, ValidationFailed> => {
  if (query === undefined) return Effect.succeed(scope)
  if (query !== "all") return Effect.fail(validationFailed({ scope: [SCOPE_MUST_BE_ALL] }))
  if (scope.kind !== "organization") return Effect.fail(validationFailed({ scope: [SCOPE_ALL_ORG_ONLY] }))
  return Effect.succeed({ kind: "all" })
}

export class SecretsService extends Context.Service<SecretsService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    scope: SecretScope,
    query: SecretListQuery
  ) => Effect.Effect<Paged<{ readonly secrets: ReadonlyArray<Secret> }>, NotFound | ValidationFailed>
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    scope: SecretScope,
    input: SecretInput
  ) => Effect.Effect<{ readonly secret: Secret }, NotFound | Conflict>
  readonly rotate: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    scope: SecretScope,
    secretId: SecretId,
    input: SecretRotation
  ) => Effect.Effect<{ readonly secret: Secret }, NotFound | Conflict>
  readonly revoke: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    scope: SecretScope,
    secretId: SecretId
  ) => Effect.Effect<{ readonly secret: Secret }, NotFound | Conflict>
}>()("@cp/server/SecretsService") {
  static readonly layer = Layer.effect(
    SecretsService,
    Effect.gen(function*() {
      const secrets = yield* SecretsRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const cursors = yield* Cursors
      const { kek } = yield* ServerKeys

      /** The project or environment the route names must exist in the workspace (archived ones still do). */
      const requireScope = Effect.fnUntraced(function*(workspace: ResolvedWorkspace, scope: SecretScope) {
        const orgId = workspace.organization.id
        if (scope.kind === "organization") return
        if (scope.kind === "project") {
          yield* findProject(projects, orgId, scope.projectId)
          return
        }
        const { projectId, environmentId } = scope
        yield* findEnvironment(environments, { orgId, projectId, environmentId }, { projectId, environmentId })
      })

      /** The secret, if it is defined at exactly this scope of this workspace. */
      const findInScope = (workspace: ResolvedWorkspace, scope: SecretScope, secretId: SecretId) =>
        secrets.find({ orgId: workspace.organization.id, secretId }).pipe(
          Effect.map(Option.filter((row) => sameScope(row, scope))),
          orFail(() => secretNotFound(secretId))
        )

      const record = (actor: Actor, row: SecretRow, change: "created" | "rotated" | "revoked") =>
        events.record({
          orgId: row.orgId,
          type: "secrets.updated",
          actor: eventActorOf(actor),
          subject: { kind: "secret", id: row.id, name: row.secretKey },
          // Metadata only; the redaction of event data is a second line of defence, not the first.
          // webhooks.md §1: the secret's API metadata (never a value) beside the summary; a rotation bumped `version`.
          data: {
            secret: apiJson(Secret, toSecret(row)),
            ...(change === "rotated" ? { previous: { version: row.version - 1 } } : {}),
            id: row.id,
            key: row.secretKey,
            scopeKind: row.scopeKind,
            version: row.version,
            change
          },
          projectId: row.projectId,
          environmentId: row.environmentId,
          description: `Secret ${row.secretKey} ${change}`
        })

      return SecretsService.of({
        list: Effect.fn("SecretsService.list")(function*(workspace, scope, query) {
          const filter = yield* listFilterOf(scope, query.scope)
          yield* requireScope(workspace, scope)
          const orgId = workspace.organization.id
          const { items, cursor } = yield* keysetPage(
            cursors,
            { endpoint: "secrets.list", scope: orgId, filters: { ...filter } },
            query,
            (window) => secrets.list({ orgId, filter, ...window }),
            idPosition
          )
          return { data: { secrets: items.map(toSecret) }, cursor }
        }),

        create: Effect.fn("SecretsService.create")(function*(actor, workspace, scope, input) {
          yield* requireScope(workspace, scope)
          const at = yield* currentDate
          const row: SecretRow = {
            id: mint.secret(at.getTime()),
            orgId: workspace.organization.id,
            projectId: scope.kind === "organization" ? null : scope.projectId,
            environmentId: scope.kind === "environment" ? scope.environmentId : null,
            scopeKind: scope.kind,
            secretKey: input.secretKey,
            displayName: input.displayName,
            status: "active",
            version: 1,
            sealedValue: seal(kek, input.value),
            kekId: kek.id,
            rotationPolicy: null,
            lastRotatedAt: null,
            expiresAt: null,
            createdBy: actorId(actor),
            createdAt: at,
            updatedAt: at,
            revokedAt: null
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* secrets.insert(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () =>
                  Effect.fail(
                    wireError(Conflict, `An active secret with key ${input.secretKey} already exists in this scope`, {
                      secretKey: input.secretKey
                    })
                  )
              )
            )
            yield* record(actor, row, "created")
            return { secret: toSecret(row) }
          }))
        }),

        rotate: Effect.fn("SecretsService.rotate")(function*(actor, workspace, scope, secretId, input) {
          yield* requireScope(workspace, scope)
          return yield* tx.withTransaction(Effect.gen(function*() {
            const current = yield* findInScope(workspace, scope, secretId)
            if (current.status !== "active") {
              return yield* wireError(Conflict, "Secret is revoked and cannot be rotated", {
                secretId,
                status: current.status
              })
            }
            const rotated = yield* secrets.rotate({
              orgId: workspace.organization.id,
              secretId,
              sealedValue: seal(kek, input.value),
              kekId: kek.id,
              at: yield* currentDate
            })
            if (Option.isNone(rotated)) {
              return yield* wireError(Conflict, "Secret is revoked and cannot be rotated", {
                secretId,
                status: "revoked"
              })
            }
            yield* record(actor, rotated.value, "rotated")
            return { secret: toSecret(rotated.value) }
          }))
        }),

        revoke: Effect.fn("SecretsService.revoke")(function*(actor, workspace, scope, secretId) {
          yield* requireScope(workspace, scope)
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* findInScope(workspace, scope, secretId)
            const revoked = yield* secrets.revoke({
              orgId: workspace.organization.id,
              secretId,
              at: yield* currentDate
            })
            // Already revoked (or revoked by a concurrent request): DELETE is idempotent, answering the final state.
            if (Option.isNone(revoked)) return { secret: toSecret(yield* findInScope(workspace, scope, secretId)) }
            yield* record(actor, revoked.value, "revoked")
            return { secret: toSecret(revoked.value) }
          }))
        })
      })
    })
  )
}
