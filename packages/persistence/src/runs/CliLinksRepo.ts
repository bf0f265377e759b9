/**
 * Command-line links: one active link per (workspace, project, canonical remote URL), a unique partial index; an
 * unlinked row keeps its `deletedAt` and is never listed again.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { atomically } from "../Memory.ts"
import { CliLinkRow, type LinkKey, type LinksOf } from "./rows.ts"

export const cliLinksActiveConstraint = "cli_links_active_key"

export class CliLinksRepo extends Context.Service<CliLinksRepo, {
  /** `UniqueViolation` on `cli_links_active_key` when that project already has an active link for the URL. */
  readonly insert: (row: CliLinkRow) => Effect.Effect<void, UniqueViolation>
  /** The link of this project (active or unlinked). */
  readonly find: (key: LinkKey) => Effect.Effect<Option.Option<CliLinkRow>>
  /** Active links of the workspace (of one project when given, of one URL when given), newest first. */
  readonly listActive: (query: LinksOf) => Effect.Effect<ReadonlyArray<CliLinkRow>>
  /** Active links for a canonical URL in every workspace, newest first. */
  readonly listByUrl: (remoteUrl: string) => Effect.Effect<ReadonlyArray<CliLinkRow>>
  /** Stores the link's settings, `lastSeenAt` and `deletedAt`. */
  readonly save: (row: CliLinkRow) => Effect.Effect<void>
}>()("@cp/persistence/runs/CliLinksRepo") {
  static readonly memory = Layer.sync(CliLinksRepo, () => {
    const links = new Map<string, CliLinkRow>()
    const newestFirst = (rows: ReadonlyArray<CliLinkRow>) =>
      [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1))
    return CliLinksRepo.of({
      insert: (row) =>
        atomically((changes) => {
          for (const stored of links.values()) {
            if (
              stored.deletedAt === null && stored.orgId === row.orgId && stored.projectId === row.projectId &&
              stored.remoteUrl === row.remoteUrl
            ) return Effect.fail(new UniqueViolation({ constraint: cliLinksActiveConstraint }))
          }
          changes.set(links, row.id, row)
          return Effect.void
        }),
      find: ({ linkId, orgId, projectId }) =>
        Effect.sync(() =>
          Option.filter(
            Option.fromUndefinedOr(links.get(linkId)),
            (row) => row.orgId === orgId && row.projectId === projectId
          )
        ),
      listActive: (query) =>
        Effect.sync(() =>
          newestFirst(
            Array.from(links.values()).filter((row) =>
              row.deletedAt === null && row.orgId === query.orgId &&
              (query.projectId === undefined || row.projectId === query.projectId) &&
              (query.remoteUrl === undefined || row.remoteUrl === query.remoteUrl)
            )
          )
        ),
      listByUrl: (remoteUrl) =>
        Effect.sync(() =>
          newestFirst(Array.from(links.values()).filter((row) => row.deletedAt === null && row.remoteUrl === remoteUrl))
        ),
      save: (row) => atomically((changes) => Effect.sync(() => changes.set(links, row.id, row)))
    })
  })

  static readonly sql = Layer.effect(
    CliLinksRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const decode = Schema.decodeUnknownEffect(Schema.Array(CliLinkRow))
      const rows = (statement: Effect.Effect<unknown, unknown>) => Effect.orDie(Effect.flatMap(statement, decode))
      return CliLinksRepo.of({
        insert: (row) =>
          sql`insert into cli_links ${
            sql.insert({ ...row, ciSettings: sql.json(row.ciSettings), createdBy: sql.json(row.createdBy) })
          }`.pipe(Effect.asVoid, uniqueViolationOrDie),
        find: ({ linkId, orgId, projectId }) =>
          Effect.map(
            rows(sql`select * from cli_links where id = ${linkId} and org_id = ${orgId} and project_id = ${projectId}`),
            (found) => Option.fromUndefinedOr(found[0])
          ),
        listActive: ({ orgId, projectId, remoteUrl }) =>
          rows(sql`
            select * from cli_links where ${
            sql.and([
              sql`deleted_at is null`,
              sql`org_id = ${orgId}`,
              ...(projectId === undefined ? [] : [sql`project_id = ${projectId}`]),
              ...(remoteUrl === undefined ? [] : [sql`remote_url = ${remoteUrl}`])
            ])
          }
            order by created_at desc, id desc`),
        listByUrl: (remoteUrl) =>
          rows(sql`
            select * from cli_links where remote_url = ${remoteUrl} and deleted_at is null
            order by created_at desc, id desc`),
        save: (row) =>
          Effect.orDie(sql`
            update cli_links set ci_settings = ${sql.json(row.ciSettings)}, last_seen_at = ${row.lastSeenAt},
              deleted_at = ${row.deletedAt}
            where id = ${row.id}`.pipe(Effect.asVoid))
      })
    })
  )
}
