/**
 * Refs and catalog heads (run-state.md §5). Every compare-and-swap is one statement (`update … where version = $n`,
 * `insert … on conflict do nothing`, `delete … where version = $n`), so of two clients swapping one ref from any
 * replica exactly one wins; the loser reads the current row for its 409. The catalog head keeps every publish in its
 * history and the entities its document listed.
 */
import { OrgId, ProjectId } from "@cp/domain/ids"
import { Digest } from "@cp/domain/objects"
import { CatalogHead, Ref } from "@cp/domain/refs"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { keysetQuery, type PagePosition, type PageWindow, windowOf } from "../keyset.ts"
import { atomically } from "../Memory.ts"
import { storedFields } from "../stored.ts"

export const RefRow = Schema.Struct({ ...storedFields(Ref.fields), orgId: OrgId, projectId: ProjectId })
export type RefRow = typeof RefRow.Type

/** A ref write: unconditional, or a swap from `expectedVersion` (0: the ref must not exist). */
export interface RefWrite {
  readonly row: RefRow
  readonly expectedVersion: number | undefined
}

export const CatalogHeadRow = Schema.Struct({ ...storedFields(CatalogHead.fields), orgId: OrgId, projectId: ProjectId })
export type CatalogHeadRow = typeof CatalogHeadRow.Type

/** The keyset position of a history entry: its publish time, then its zero-padded version. */
export const headPosition = (row: CatalogHeadRow): PagePosition => ({
  at: row.publishedAt,
  key: String(row.version).padStart(10, "0")
})

export const CatalogEntityRow = Schema.Struct({
  orgId: OrgId,
  projectId: ProjectId,
  position: Schema.Int,
  kind: Schema.String,
  name: Schema.String,
  owner: Schema.NullOr(Schema.String),
  environment: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  metadata: Schema.Record(Schema.String, Schema.Json)
})
export type CatalogEntityRow = typeof CatalogEntityRow.Type

/** Entities of a workspace, every given filter matching (`projectId` exact, `q` a substring of name or description). */
export interface EntityFilters {
  readonly orgId: OrgId
  readonly projectId?: ProjectId | undefined
  readonly environment?: string | undefined
  readonly kind?: string | undefined
  readonly owner?: string | undefined
  readonly q?: string | undefined
}

const refKey = (projectId: string, name: string) => JSON.stringify([projectId, name])

export class RefsRepo extends Context.Service<RefsRepo, {
  readonly find: (projectId: ProjectId, name: string) => Effect.Effect<Option.Option<RefRow>>
  /** The project's refs whose name starts with `prefix`, in name order. */
  readonly list: (projectId: ProjectId, prefix: string) => Effect.Effect<ReadonlyArray<RefRow>>
  /** The written row (its version the next one), or None when the swap lost. */
  readonly write: (write: RefWrite) => Effect.Effect<Option.Option<RefRow>>
  /** The deleted row, or None when there was none (or the swap lost). */
  readonly delete: (
    projectId: ProjectId,
    name: string,
    expectedVersion: number | undefined
  ) => Effect.Effect<Option.Option<RefRow>>
  readonly head: (projectId: ProjectId) => Effect.Effect<Option.Option<CatalogHeadRow>>
  /** The published head (version the next one), or None when `expectedDigest` was not the head's digest. */
  readonly publish: (
    row: CatalogHeadRow,
    expectedDigest: Digest | undefined
  ) => Effect.Effect<Option.Option<CatalogHeadRow>>
  readonly history: (projectId: ProjectId, window: PageWindow) => Effect.Effect<ReadonlyArray<CatalogHeadRow>>
  /** Replaces the project's entities. */
  readonly replaceEntities: (
    project: { readonly orgId: OrgId; readonly projectId: ProjectId },
    rows: ReadonlyArray<CatalogEntityRow>
  ) => Effect.Effect<void>
  /** The workspace's entities matching the filters, by kind then name. */
  readonly entities: (filters: EntityFilters) => Effect.Effect<ReadonlyArray<CatalogEntityRow>>
}>()("@cp/persistence/state/RefsRepo") {
  static readonly memory = Layer.sync(RefsRepo, () => {
    const refs = new Map<string, RefRow>()
    const heads = new Map<string, CatalogHeadRow>()
    const history = new Map<string, CatalogHeadRow>()
    const entities = new Map<string, ReadonlyArray<CatalogEntityRow>>()
    const contains = (value: string | null, part: string) => value !== null && value.includes(part)
    return RefsRepo.of({
      find: (projectId, name) => Effect.sync(() => Option.fromUndefinedOr(refs.get(refKey(projectId, name)))),
      list: (projectId, prefix) =>
        Effect.sync(() =>
          Array.from(refs.values()).filter((row) => row.projectId === projectId && row.name.startsWith(prefix))
            .sort((a, b) => (a.name < b.name ? -1 : 1))
        ),
      write: ({ expectedVersion, row }) =>
        atomically((changes) => {
          const current = refs.get(refKey(row.projectId, row.name))
          if (expectedVersion !== undefined && (current?.version ?? 0) !== expectedVersion) {
            return Effect.succeed(Option.none())
          }
          const next = { ...row, version: (current?.version ?? 0) + 1 }
          changes.set(refs, refKey(row.projectId, row.name), next)
          return Effect.succeed(Option.some(next))
        }),
      delete: (projectId, name, expectedVersion) =>
        atomically((changes) => {
          const current = refs.get(refKey(projectId, name))
          if (current === undefined || (expectedVersion !== undefined && current.version !== expectedVersion)) {
            return Effect.succeed(Option.none())
          }
          changes.delete(refs, refKey(projectId, name))
          return Effect.succeed(Option.some(current))
        }),
      head: (projectId) => Effect.sync(() => Option.fromUndefinedOr(heads.get(projectId))),
      publish: (row, expectedDigest) =>
        atomically((changes) => {
          const current = heads.get(row.projectId)
          if (expectedDigest !== undefined && current?.digest !== expectedDigest) return Effect.succeed(Option.none())
          const next = { ...row, version: (current?.version ?? 0) + 1 }
          changes.set(heads, row.projectId, next)
          changes.set(history, `${row.projectId}#${next.version}`, next)
          return Effect.succeed(Option.some(next))
        }),
      history: (projectId, window) =>
        Effect.sync(() =>
          windowOf(Array.from(history.values()).filter((row) => row.projectId === projectId), headPosition, window)
        ),
      replaceEntities: ({ projectId }, rows) =>
        atomically((changes) => Effect.sync(() => changes.set(entities, projectId, rows))),
      entities: (filters) =>
        Effect.sync(() =>
          Array.from(entities.values()).flat().filter((row) =>
            row.orgId === filters.orgId &&
            (filters.projectId === undefined || row.projectId === filters.projectId) &&
            (filters.environment === undefined || row.environment === filters.environment) &&
            (filters.kind === undefined || row.kind === filters.kind) &&
            (filters.owner === undefined || row.owner === filters.owner) &&
            (filters.q === undefined || contains(row.name, filters.q) || contains(row.description, filters.q))
          ).sort((a, b) => a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
        )
    })
  })

  static readonly sql = Layer.effect(
    RefsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const decodeRefs = Schema.decodeUnknownEffect(Schema.Array(RefRow))
      const decodeHeads = Schema.decodeUnknownEffect(Schema.Array(CatalogHeadRow))
      const decodeEntities = Schema.decodeUnknownEffect(Schema.Array(CatalogEntityRow))
      const refRows = (statement: Effect.Effect<unknown, unknown>) =>
        Effect.orDie(Effect.flatMap(statement, decodeRefs))
      const headRows = (statement: Effect.Effect<unknown, unknown>) =>
        Effect.orDie(Effect.flatMap(statement, decodeHeads))
      const first = <A>(rows: ReadonlyArray<A>) => Option.fromUndefinedOr(rows[0])
      const headColumns = sql`digest, version, published_at, published_by, org_id, project_id`
      return RefsRepo.of({
        find: (projectId, name) =>
          Effect.map(refRows(sql`select * from state_refs where project_id = ${projectId} and name = ${name}`), first),
        list: (projectId, prefix) =>
          refRows(sql`
            select * from state_refs
            where project_id = ${projectId} and starts_with(name, ${prefix})
            order by name`),
        write: ({ expectedVersion, row }) => {
          const updatedBy = sql.json(row.updatedBy)
          if (expectedVersion === undefined) {
            return Effect.map(
              refRows(sql`
                insert into state_refs (org_id, project_id, name, digest, version, updated_at, updated_by)
                values (${row.orgId}, ${row.projectId}, ${row.name}, ${row.digest}, 1, ${row.updatedAt}, ${updatedBy})
                on conflict (project_id, name) do update set digest = excluded.digest,
                  version = state_refs.version + 1, updated_at = excluded.updated_at, updated_by = excluded.updated_by
                returning *`),
              first
            )
          }
          if (expectedVersion === 0) {
            return Effect.map(
              refRows(sql`
                insert into state_refs (org_id, project_id, name, digest, version, updated_at, updated_by)
                values (${row.orgId}, ${row.projectId}, ${row.name}, ${row.digest}, 1, ${row.updatedAt}, ${updatedBy})
                on conflict (project_id, name) do nothing
                returning *`),
              first
            )
          }
          return Effect.map(
            refRows(sql`
              update state_refs set digest = ${row.digest}, version = version + 1, updated_at = ${row.updatedAt},
                updated_by = ${updatedBy}
              where project_id = ${row.projectId} and name = ${row.name} and version = ${expectedVersion}
              returning *`),
            first
          )
        },
        delete: (projectId, name, expectedVersion) =>
          Effect.map(
            refRows(sql`
              delete from state_refs where project_id = ${projectId} and name = ${name}
                ${expectedVersion === undefined ? sql`` : sql`and version = ${expectedVersion}`}
              returning *`),
            first
          ),
        head: (projectId) =>
          Effect.map(headRows(sql`select ${headColumns} from catalog_heads where project_id = ${projectId}`), first),
        publish: (row, expectedDigest) =>
          Effect.flatMap(
            headRows(
              expectedDigest === undefined
                ? sql`
                  insert into catalog_heads (project_id, org_id, digest, version, published_at, published_by)
                  values (${row.projectId}, ${row.orgId}, ${row.digest}, 1, ${row.publishedAt},
                    ${sql.json(row.publishedBy)})
                  on conflict (project_id) do update set digest = excluded.digest,
                    version = catalog_heads.version + 1, published_at = excluded.published_at,
                    published_by = excluded.published_by
                  returning ${headColumns}`
                : sql`
                  update catalog_heads set digest = ${row.digest}, version = version + 1,
                    published_at = ${row.publishedAt}, published_by = ${sql.json(row.publishedBy)}
                  where project_id = ${row.projectId} and digest = ${expectedDigest}
                  returning ${headColumns}`
            ),
            (rows) =>
              Option.match(first(rows), {
                onNone: () => Effect.succeed(Option.none()),
                onSome: (head) =>
                  Effect.as(
                    Effect.orDie(sql`
                      insert into catalog_head_history (project_id, org_id, version, id, digest, published_at,
                        published_by)
                      values (${head.projectId}, ${head.orgId}, ${head.version}, ${headPosition(head).key},
                        ${head.digest}, ${head.publishedAt}, ${sql.json(head.publishedBy)})`),
                    Option.some(head)
                  )
              })
          ),
        history: (projectId, window) =>
          headRows(keysetQuery(
            sql,
            sql`select ${headColumns}, id from catalog_head_history`,
            [sql`project_id = ${projectId}`],
            window,
            { at: "published_at" }
          )),
        replaceEntities: ({ projectId }, rows) => {
          const stored = (row: CatalogEntityRow) => ({ ...row, metadata: sql.json(row.metadata) })
          const [firstRow, ...rest] = rows
          return Effect.orDie(Effect.andThen(
            sql`delete from catalog_entities where project_id = ${projectId}`,
            firstRow === undefined
              ? Effect.void
              : Effect.asVoid(sql`insert into catalog_entities ${sql.insert([stored(firstRow), ...rest.map(stored)])}`)
          ))
        },
        entities: (filters) =>
          Effect.orDie(Effect.flatMap(
            sql`
              select * from catalog_entities where ${
              sql.and([
                sql`org_id = ${filters.orgId}`,
                ...(filters.projectId === undefined ? [] : [sql`project_id = ${filters.projectId}`]),
                ...(filters.environment === undefined ? [] : [sql`environment = ${filters.environment}`]),
                ...(filters.kind === undefined ? [] : [sql`kind = ${filters.kind}`]),
                ...(filters.owner === undefined ? [] : [sql`owner = ${filters.owner}`]),
                ...(filters.q === undefined ? [] : [
                  sql`(strpos(name, ${filters.q}) > 0 or strpos(coalesce(description, ''), ${filters.q}) > 0)`
                ])
              ])
            }
              order by kind collate "C", name collate "C", project_id, position`,
            decodeEntities
          ))
      })
    })
  )
}
