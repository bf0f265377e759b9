/**
 * The environments of projects. An environment is never deleted: archiving sets `status` and `archivedAt`. The idle
 * sweep claims environments with `for update skip locked`, so replicas sweeping together never archive one twice.
 */
import { Context, Effect, flow, Layer, Option } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { idPosition, isSlugOfFamily, keysetQuery, slugFamilyQuery, SlugRow, slugsOf, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { insertUnique, primaryKey, type UniqueKey } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { ProjectTables } from "./ProjectTables.ts"
import {
  EnvironmentKey,
  EnvironmentRow,
  EnvironmentSlugFamily,
  EnvironmentSlugKey,
  EnvironmentsPage,
  EnvironmentTransition,
  IdleEnvironments
} from "./rows.ts"

/** The constraint behind the `UniqueViolation` of an environment slug already taken in the project. */
export const environmentsSlugConstraint = "environments_project_slug_key"

const uniques: ReadonlyArray<UniqueKey<EnvironmentRow>> = [
  primaryKey("environments_pkey"),
  { constraint: environmentsSlugConstraint, key: (row) => `${row.projectId} ${row.slug}` }
]

/** When an environment was last used for the idle sweep: its last push, or its creation when never used. */
export const idleSince = (row: EnvironmentRow): Date => row.lastActiveAt ?? row.createdAt

export class EnvironmentsRepo extends Context.Service<EnvironmentsRepo, {
  /** `UniqueViolation` on `environments_project_slug_key` when the project has an environment with that slug. */
  readonly insert: (environment: EnvironmentRow) => Effect.Effect<void, UniqueViolation>
  /** The environment with this id in this project of this workspace, active or archived; None otherwise. */
  readonly findById: (key: EnvironmentKey) => Effect.Effect<Option.Option<EnvironmentRow>>
  /** The environment with this slug in this project of this workspace, active or archived; None otherwise. */
  readonly findBySlug: (key: EnvironmentSlugKey) => Effect.Effect<Option.Option<EnvironmentRow>>
  /** Up to `limit` of the project's environments strictly after `after`, newest first. */
  readonly list: (page: EnvironmentsPage) => Effect.Effect<ReadonlyArray<EnvironmentRow>>
  /** The project's taken slugs among `base` and `base-<n>`. */
  readonly slugsStartingWith: (family: EnvironmentSlugFamily) => Effect.Effect<ReadonlyArray<string>>
  /** Archives the environment if active; the archived row, or None when it is not active (or not there). */
  readonly archive: (change: EnvironmentTransition) => Effect.Effect<Option.Option<EnvironmentRow>>
  /** Records a push referencing the environment (run, plan, catalog push); None when it is not there. */
  readonly markActive: (change: EnvironmentTransition) => Effect.Effect<Option.Option<EnvironmentRow>>
  /**
   * Archives up to `limit` active environments idle since before `cutoff` and returns them. SQL claims them with
   * `for update skip locked`: rows another transaction holds are skipped, so concurrent sweeps never share one.
   */
  readonly archiveIdle: (claim: IdleEnvironments) => Effect.Effect<ReadonlyArray<EnvironmentRow>>
}>()("@cp/persistence/projects/EnvironmentsRepo") {
  static readonly memory = Layer.effect(
    EnvironmentsRepo,
    Effect.gen(function*() {
      const { environments } = yield* ProjectTables
      const environmentIn = ({ orgId, projectId, environmentId }: EnvironmentKey) =>
        Option.filter(
          Option.fromUndefinedOr(environments.get(environmentId)),
          (row) => row.orgId === orgId && row.projectId === projectId
        )
      /** The conditional `update … returning *` of one environment: `next` declines with None. */
      const change = (key: EnvironmentKey, next: (row: EnvironmentRow) => Option.Option<EnvironmentRow>) =>
        atomically((changes) => {
          const current = Option.flatMap(environmentIn(key), next)
          if (Option.isSome(current)) changes.set(environments, key.environmentId, current.value)
          return Effect.succeed(current)
        })
      return EnvironmentsRepo.of({
        insert: (row) => insertUnique(environments, row.id, row, uniques),
        findById: (key) => Effect.sync(() => environmentIn(key)),
        findBySlug: ({ orgId, projectId, slug }) =>
          Effect.sync(() =>
            Option.fromUndefinedOr(
              Array.from(environments.values()).find((row) =>
                row.orgId === orgId && row.projectId === projectId && row.slug === slug
              )
            )
          ),
        list: (page) =>
          Effect.sync(() =>
            windowOf(
              Array.from(environments.values()).filter((row) =>
                row.orgId === page.orgId && row.projectId === page.projectId
              ),
              idPosition,
              page
            )
          ),
        slugsStartingWith: ({ projectId, base }) =>
          Effect.sync(() =>
            Array.from(environments.values())
              .filter((row) => row.projectId === projectId && isSlugOfFamily(base)(row.slug))
              .map((row) => row.slug)
          ),
        archive: ({ at, ...key }) =>
          change(key, (row) =>
            row.status === "active"
              ? Option.some({ ...row, status: "archived", archivedAt: at, updatedAt: at })
              : Option.none()),
        markActive: ({ at, ...key }) => change(key, (row) => Option.some({ ...row, lastActiveAt: at })),
        archiveIdle: ({ cutoff, now, limit }) =>
          atomically((changes) => {
            const claimed = Array.from(environments.values())
              .filter((row) => row.status === "active" && idleSince(row) < cutoff)
              .sort((a, b) => idleSince(a).getTime() - idleSince(b).getTime() || (a.id < b.id ? -1 : 1))
              .slice(0, limit)
              .map((row): EnvironmentRow => ({ ...row, status: "archived", archivedAt: now, updatedAt: now }))
            for (const row of claimed) changes.set(environments, row.id, row)
            return Effect.succeed(claimed)
          })
      })
    })
  ).pipe(Layer.provide(ProjectTables.layer))

  static readonly sql = Layer.effect(
    EnvironmentsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return EnvironmentsRepo.of({
        insert: insertRow(sql, "environments", EnvironmentRow),
        findById: flow(
          SqlSchema.findOneOption({
            Request: EnvironmentKey,
            Result: EnvironmentRow,
            execute: ({ orgId, projectId, environmentId }) =>
              sql`
                select * from environments
                where id = ${environmentId} and project_id = ${projectId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        findBySlug: flow(
          SqlSchema.findOneOption({
            Request: EnvironmentSlugKey,
            Result: EnvironmentRow,
            execute: ({ orgId, projectId, slug }) =>
              sql`
                select * from environments
                where slug = ${slug} and project_id = ${projectId} and org_id = ${orgId}`
          }),
          Effect.orDie
        ),
        list: flow(
          SqlSchema.findAll({
            Request: EnvironmentsPage,
            Result: EnvironmentRow,
            execute: ({ orgId, projectId, ...window }) =>
              keysetQuery(
                sql,
                sql`select * from environments`,
                [sql`project_id = ${projectId}`, sql`org_id = ${orgId}`],
                window
              )
          }),
          Effect.orDie
        ),
        slugsStartingWith: flow(
          SqlSchema.findAll({
            Request: EnvironmentSlugFamily,
            Result: SlugRow,
            execute: ({ projectId, base }) =>
              slugFamilyQuery(sql, "environments", [sql`project_id = ${projectId}`], base)
          }),
          slugsOf,
          Effect.orDie
        ),
        archive: flow(
          SqlSchema.findOneOption({
            Request: EnvironmentTransition,
            Result: EnvironmentRow,
            execute: ({ orgId, projectId, environmentId, at }) =>
              sql`
                update environments set status = 'archived', archived_at = ${at}, updated_at = ${at}
                where id = ${environmentId} and project_id = ${projectId} and org_id = ${orgId} and status = 'active'
                returning *`
          }),
          Effect.orDie
        ),
        markActive: flow(
          SqlSchema.findOneOption({
            Request: EnvironmentTransition,
            Result: EnvironmentRow,
            execute: ({ orgId, projectId, environmentId, at }) =>
              sql`
                update environments set last_active_at = greatest(last_active_at, ${at})
                where id = ${environmentId} and project_id = ${projectId} and org_id = ${orgId}
                returning *`
          }),
          Effect.orDie
        ),
        archiveIdle: flow(
          SqlSchema.findAll({
            Request: IdleEnvironments,
            Result: EnvironmentRow,
            execute: ({ cutoff, now, limit }) =>
              sql`
                update environments set status = 'archived', archived_at = ${now}, updated_at = ${now}
                where id in (
                  select id from environments
                  where status = 'active' and coalesce(last_active_at, created_at) < ${cutoff}
                  order by coalesce(last_active_at, created_at), id
                  limit ${limit}
                  for update skip locked)
                and status = 'active'
                returning *`
          }),
          Effect.orDie
        )
      })
    })
  )
}
