/** Workspaces' custom scope templates, per provider; never deleted (retired instead). */
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { compositeKey, insertUnique, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { ProviderTemplatesQuery, ScopeTemplateKey, ScopeTemplateRow } from "./rows.ts"

const keyOf = (row: ScopeTemplateKey) => compositeKey(row.orgId, row.provider, row.templateId)
const uniques: ReadonlyArray<UniqueKey<ScopeTemplateRow>> = [
  { constraint: "integration_scope_templates_pkey", key: keyOf }
]

export class ScopeTemplatesRepo extends Context.Service<ScopeTemplatesRepo, {
  /** `UniqueViolation` when the workspace has a template with this id for the provider. */
  readonly insert: (row: ScopeTemplateRow) => Effect.Effect<void, UniqueViolation>
  readonly find: (key: ScopeTemplateKey) => Effect.Effect<Option.Option<ScopeTemplateRow>>
  /** The workspace's templates of the provider, oldest first. */
  readonly list: (query: ProviderTemplatesQuery) => Effect.Effect<ReadonlyArray<ScopeTemplateRow>>
  /** Replaces display name, description, status and `updatedAt`; None when it is not there. */
  readonly update: (row: ScopeTemplateRow) => Effect.Effect<Option.Option<ScopeTemplateRow>>
}>()("@cp/persistence/integrations/ScopeTemplatesRepo") {
  static readonly memory = Layer.sync(ScopeTemplatesRepo, () => {
    const table = new Map<string, ScopeTemplateRow>()
    return ScopeTemplatesRepo.of({
      insert: (row) => insertUnique(table, keyOf(row), row, uniques),
      find: (key) => Effect.sync(() => Option.fromUndefinedOr(table.get(keyOf(key)))),
      list: ({ orgId, provider }) =>
        Effect.sync(() =>
          Array.from(table.values()).filter((row) => row.orgId === orgId && row.provider === provider).sort((a, b) =>
            a.createdAt.getTime() - b.createdAt.getTime()
          )
        ),
      update: (row) =>
        updateRow(table, keyOf(row), (current) =>
          Option.some({
            ...current,
            displayName: row.displayName,
            description: row.description,
            status: row.status,
            updatedAt: row.updatedAt
          }))
    })
  })

  static readonly sql = Layer.effect(
    ScopeTemplatesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return ScopeTemplatesRepo.of({
        insert: insertRow(sql, "integration_scope_templates", ScopeTemplateRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: ScopeTemplateKey,
            Result: ScopeTemplateRow,
            execute: ({ orgId, provider, templateId }) =>
              sql`
                select * from integration_scope_templates
                where org_id = ${orgId} and provider = ${provider} and template_id = ${templateId}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: ProviderTemplatesQuery,
            Result: ScopeTemplateRow,
            execute: ({ orgId, provider }) =>
              sql`
                select * from integration_scope_templates where org_id = ${orgId} and provider = ${provider}
                order by created_at, template_id`
          }),
          Effect.orDie
        ),
        update: flow(
          SqlSchema.findOneOption({
            Request: ScopeTemplateRow,
            Result: ScopeTemplateRow,
            execute: (row) =>
              sql`
                update integration_scope_templates set
                  display_name = ${row.displayName}, description = ${row.description}, status = ${row.status},
                  updated_at = ${row.updatedAt}
                where org_id = ${row.orgId} and provider = ${row.provider} and template_id = ${row.templateId}
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
