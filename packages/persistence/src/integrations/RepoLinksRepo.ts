/**
 * Project repo links: one live link per (project, repository) (`integration_repo_links_project_repo_key`); unlinking
 * sets `deletedAt` and frees the pair. Ingress finds every live link of a repository through its connection.
 */
import type { RepoLinkId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { createdNewestFirst } from "../keyset.ts"
import { compositeKey, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { ProjectLinksQuery, RepoLinkDeletion, RepoLinkKey, RepoLinkRow, RepoLinksOfRepo } from "./rows.ts"

export const repoLinkProjectRepoConstraint = "integration_repo_links_project_repo_key"

const uniques: ReadonlyArray<UniqueKey<RepoLinkRow>> = [
  primaryKey("integration_repo_links_pkey"),
  {
    constraint: repoLinkProjectRepoConstraint,
    key: (row) => row.deletedAt === null ? compositeKey(row.projectId, row.repoExternalId) : `deleted ${row.id}`
  }
]

export class RepoLinksRepo extends Context.Service<RepoLinksRepo, {
  readonly insert: (row: RepoLinkRow) => Effect.Effect<void, UniqueViolation>
  /** The live link with this id in this project of this workspace. */
  readonly find: (key: RepoLinkKey) => Effect.Effect<Option.Option<RepoLinkRow>>
  /** The project's live links, newest first. */
  readonly listByProject: (query: ProjectLinksQuery) => Effect.Effect<ReadonlyArray<RepoLinkRow>>
  /** How many live links the workspace has (`limit.repo_links`). */
  readonly countLive: (orgId: RepoLinkRow["orgId"]) => Effect.Effect<number>
  /** Every live link of the workspace (bounded by `limit.repo_links`). */
  readonly liveInWorkspace: (orgId: RepoLinkRow["orgId"]) => Effect.Effect<ReadonlyArray<RepoLinkRow>>
  /** Every live link of this repository through this connection, in any workspace. */
  readonly liveForRepo: (query: RepoLinksOfRepo) => Effect.Effect<ReadonlyArray<RepoLinkRow>>
  /** Replaces a live link's `defaultBranch`, `branchEnvMapJson` and `updatedAt`; None unless it is live. */
  readonly update: (row: RepoLinkRow) => Effect.Effect<Option.Option<RepoLinkRow>>
  /** Unlinks: the final row with `deletedAt`, or None unless it was live. */
  readonly remove: (deletion: RepoLinkDeletion) => Effect.Effect<Option.Option<RepoLinkRow>>
}>()("@cp/persistence/integrations/RepoLinksRepo") {
  static readonly memory = Layer.sync(RepoLinksRepo, () => {
    const table = new Map<RepoLinkId, RepoLinkRow>()
    const live = () => Array.from(table.values()).filter((row) => row.deletedAt === null)
    const liveIn = (key: RepoLinkKey) =>
      Option.filter(
        Option.fromUndefinedOr(table.get(key.repoLinkId)),
        (row) => row.orgId === key.orgId && row.projectId === key.projectId && row.deletedAt === null
      )
    return RepoLinksRepo.of({
      insert: (row) => insertUnique(table, row.id, row, uniques),
      find: (key) => Effect.sync(() => liveIn(key)),
      listByProject: ({ orgId, projectId }) =>
        Effect.sync(() =>
          live().filter((row) => row.orgId === orgId && row.projectId === projectId).sort(createdNewestFirst)
        ),
      countLive: (orgId) => Effect.sync(() => live().filter((row) => row.orgId === orgId).length),
      liveInWorkspace: (orgId) =>
        Effect.sync(() => live().filter((row) => row.orgId === orgId).sort(createdNewestFirst)),
      liveForRepo: ({ connectionId, repoExternalId }) =>
        Effect.sync(() =>
          live().filter((row) => row.connectionId === connectionId && row.repoExternalId === repoExternalId)
            .sort(createdNewestFirst)
        ),
      update: (row) =>
        updateRow(
          table,
          row.id,
          (current) =>
            current.deletedAt === null && current.orgId === row.orgId && current.projectId === row.projectId
              ? Option.some({
                ...current,
                defaultBranch: row.defaultBranch,
                branchEnvMapJson: row.branchEnvMapJson,
                updatedAt: row.updatedAt
              })
              : Option.none()
        ),
      remove: ({ at, ...key }) =>
        updateRow(
          table,
          key.repoLinkId,
          (row) => Option.map(liveIn(key), () => ({ ...row, deletedAt: at, updatedAt: at }))
        )
    })
  })

  static readonly sql = Layer.effect(
    RepoLinksRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return RepoLinksRepo.of({
        insert: insertRow(sql, "integration_repo_links", RepoLinkRow),
        find: flow(
          SqlSchema.findOneOption({
            Request: RepoLinkKey,
            Result: RepoLinkRow,
            execute: ({ orgId, projectId, repoLinkId }) =>
              sql`
                select * from integration_repo_links
                where id = ${repoLinkId} and org_id = ${orgId} and project_id = ${projectId} and deleted_at is null`
          }),
          Effect.orDie
        ),
        listByProject: flow(
          SqlSchema.findAll({
            Request: ProjectLinksQuery,
            Result: RepoLinkRow,
            execute: ({ orgId, projectId }) =>
              sql`
                select * from integration_repo_links
                where org_id = ${orgId} and project_id = ${projectId} and deleted_at is null
                order by created_at desc, id desc`
          }),
          Effect.orDie
        ),
        countLive: (orgId) =>
          sql<{ n: number }>`
            select count(*)::int as n from integration_repo_links where org_id = ${orgId} and deleted_at is null`
            .pipe(Effect.map((rows) => rows[0]?.n ?? 0), Effect.orDie),
        liveInWorkspace: (orgId) =>
          SqlSchema.findAll({
            Request: ProjectLinksQuery.fields.orgId,
            Result: RepoLinkRow,
            execute: (id) =>
              sql`
                select * from integration_repo_links where org_id = ${id} and deleted_at is null
                order by created_at desc, id desc`
          })(orgId).pipe(Effect.orDie),
        liveForRepo: flow(
          SqlSchema.findAll({
            Request: RepoLinksOfRepo,
            Result: RepoLinkRow,
            execute: ({ connectionId, repoExternalId }) =>
              sql`
                select * from integration_repo_links
                where connection_id = ${connectionId} and repo_external_id = ${repoExternalId}
                  and deleted_at is null
                order by created_at desc, id desc`
          }),
          Effect.orDie
        ),
        update: flow(
          SqlSchema.findOneOption({
            Request: RepoLinkRow,
            Result: RepoLinkRow,
            execute: (row) =>
              sql`
                update integration_repo_links set
                  default_branch = ${row.defaultBranch},
                  branch_env_map_json = ${row.branchEnvMapJson},
                  updated_at = ${row.updatedAt}
                where id = ${row.id} and org_id = ${row.orgId} and project_id = ${row.projectId}
                  and deleted_at is null
                returning *`
          }),
          Effect.orDie
        ),
        remove: flow(
          SqlSchema.findOneOption({
            Request: RepoLinkDeletion,
            Result: RepoLinkRow,
            execute: ({ at, orgId, projectId, repoLinkId }) =>
              sql`
                update integration_repo_links set deleted_at = ${at}, updated_at = ${at}
                where id = ${repoLinkId} and org_id = ${orgId} and project_id = ${projectId} and deleted_at is null
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
