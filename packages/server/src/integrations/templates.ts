/**
 * Scope templates (integrations-agents.md §2): the provider's declared templates (in code) and each workspace's
 * custom ones, whose permissions must be a subset of what the provider declares. Templates are never deleted:
 * retired ones stay listed and can no longer be used.
 */
import {
  type Actor,
  actorId,
  Conflict,
  NotFound,
  type ResolvedWorkspace,
  SCMHOST,
  type ScopeTemplate,
  ScopeTemplate as ScopeTemplateSchema,
  type ScopeTemplateInput,
  type ScopeTemplatePatch,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import { type ScopeTemplateRow, ScopeTemplatesRepo, Transactor } from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { apiJson, eventActorOf, EventLog, previousJson } from "../platform/events.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { declaredTemplates, levelCovers, SCMHOST_PERMISSIONS } from "./rules.ts"

const PermissionsJson = Schema.fromJsonString(Schema.Record(Schema.String, Schema.String))
const EPOCH_NONE = null

const declared = (): ReadonlyArray<ScopeTemplate> =>
  Object.entries(declaredTemplates).map(([templateId, template]) => ({
    templateId,
    provider: SCMHOST,
    displayName: template.displayName,
    description: template.description,
    status: "active",
    permissions: { ...template.permissions },
    source: "declared",
    createdAt: EPOCH_NONE,
    updatedAt: EPOCH_NONE
  }))

const toTemplate = (row: ScopeTemplateRow): ScopeTemplate => ({
  templateId: row.templateId,
  provider: row.provider,
  displayName: row.displayName,
  description: row.description,
  status: row.status,
  permissions: Schema.decodeUnknownSync(PermissionsJson)(row.permissionsJson),
  source: "custom",
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

const unknownProvider = (provider: string) => wireError(NotFound, "Unknown integration provider", { provider })
const templateNotFound = (templateId: string) => wireError(NotFound, "Scope template not found", { templateId })

export class ScopeTemplatesService extends Context.Service<ScopeTemplatesService, {
  readonly list: (
    workspace: ResolvedWorkspace,
    provider: string
  ) => Effect.Effect<{ readonly scopeTemplates: ReadonlyArray<ScopeTemplate> }, NotFound>
  readonly create: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    provider: string,
    input: ScopeTemplateInput
  ) => Effect.Effect<{ readonly scopeTemplate: ScopeTemplate }, NotFound | Conflict | ValidationFailed>
  readonly update: (
    actor: Actor,
    workspace: ResolvedWorkspace,
    provider: string,
    templateId: string,
    patch: ScopeTemplatePatch
  ) => Effect.Effect<{ readonly scopeTemplate: ScopeTemplate }, NotFound | Conflict>
  /** The permissions of an active template the workspace may use, or None. */
  readonly usable: (
    workspace: ResolvedWorkspace,
    templateId: string
  ) => Effect.Effect<Option.Option<Readonly<Record<string, string>>>>
}>()("@cp/server/integrations/ScopeTemplatesService") {
  static readonly layer = Layer.effect(
    ScopeTemplatesService,
    Effect.gen(function*() {
      const templates = yield* ScopeTemplatesRepo
      const tx = yield* Transactor
      const events = yield* EventLog
      const known = (provider: string) => provider === SCMHOST ? Effect.void : Effect.fail(unknownProvider(provider))
      const record = (
        actor: Actor,
        type: "integration.scope_template.created" | "integration.scope_template.updated",
        row: ScopeTemplateRow,
        before?: ScopeTemplateRow
      ) =>
        events.record({
          orgId: row.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "scope_template", id: row.templateId, name: row.displayName },
          data: {
            scopeTemplate: apiJson(ScopeTemplateSchema, toTemplate(row)),
            ...(before === undefined
              ? {}
              : { previous: previousJson(ScopeTemplateSchema, toTemplate(before), toTemplate(row)) })
          },
          description: `Scope template ${row.templateId} ${type.slice("integration.scope_template.".length)}`
        })

      return ScopeTemplatesService.of({
        list: Effect.fn("ScopeTemplatesService.list")(function*(workspace, provider) {
          yield* known(provider)
          const custom = yield* templates.list({ orgId: workspace.organization.id, provider })
          return { scopeTemplates: [...declared(), ...custom.map(toTemplate)] }
        }),

        create: Effect.fn("ScopeTemplatesService.create")(function*(actor, workspace, provider, input) {
          yield* known(provider)
          if (Object.hasOwn(declaredTemplates, input.templateId)) {
            return yield* wireError(Conflict, "A declared template has this id", { templateId: input.templateId })
          }
          const outside = Object.entries(input.permissions).filter(([name, level]) =>
            !levelCovers(SCMHOST_PERMISSIONS[name], level)
          )
          if (outside.length > 0) {
            return yield* validationFailed(Object.fromEntries(outside.map(([name]) => [
              `permissions.${name}`,
              ["is not a permission the provider declares at that level"]
            ])))
          }
          const at = yield* currentDate
          const row: ScopeTemplateRow = {
            orgId: workspace.organization.id,
            provider,
            templateId: input.templateId,
            displayName: input.displayName,
            description: input.description ?? "",
            permissionsJson: JSON.stringify(input.permissions),
            status: "active",
            createdBy: actorId(actor),
            createdAt: at,
            updatedAt: at
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            yield* templates.insert(row).pipe(
              Effect.catchTag(
                "UniqueViolation",
                () => Effect.fail(wireError(Conflict, "A template with this id exists", { templateId: row.templateId }))
              )
            )
            yield* record(actor, "integration.scope_template.created", row)
            return { scopeTemplate: toTemplate(row) }
          }))
        }),

        update: Effect.fn("ScopeTemplatesService.update")(function*(actor, workspace, provider, templateId, patch) {
          yield* known(provider)
          if (Object.hasOwn(declaredTemplates, templateId)) {
            return yield* wireError(Conflict, "Declared templates are read-only", {
              templateId,
              reason: "declared_template"
            })
          }
          const key = { orgId: workspace.organization.id, provider, templateId }
          const current = yield* templates.find(key).pipe(orFail(() => templateNotFound(templateId)))
          const next: ScopeTemplateRow = {
            ...current,
            displayName: patch.displayName ?? current.displayName,
            description: patch.description ?? current.description,
            status: patch.status ?? current.status,
            updatedAt: yield* currentDate
          }
          return yield* tx.withTransaction(Effect.gen(function*() {
            const stored = yield* templates.update(next).pipe(orFail(() => templateNotFound(templateId)))
            yield* record(actor, "integration.scope_template.updated", stored, current)
            return { scopeTemplate: toTemplate(stored) }
          }))
        }),

        usable: Effect.fn("ScopeTemplatesService.usable")(function*(workspace, templateId) {
          const builtIn = declaredTemplates[templateId]
          if (builtIn !== undefined) return Option.some(builtIn.permissions)
          const custom = yield* templates.find({ orgId: workspace.organization.id, provider: SCMHOST, templateId })
          return Option.flatMap(
            custom,
            (row) => row.status === "active" ? Option.some(toTemplate(row).permissions) : Option.none()
          )
        })
      })
    })
  )
}
