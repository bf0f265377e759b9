/**
 * Who the subject of a membership is (a user's email and display name, a service principal's display name), read in
 * the same statement as the memberships that name it: a left join in SQL, a lookup in the shared tables in memory.
 */
import { SubjectProfile as SubjectProfileFields } from "@cp/domain/members"
import { Context, Layer, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { ApiKeyRow } from "./apiKeys/ApiKeysRepo.ts"
import type { UserRow } from "./identity/UsersRepo.ts"
import type { SubjectType } from "./workspaces/rows.ts"

/** The subject's email and display name; null where there is none (a service principal's email, an unknown id). */
export const SubjectProfile = Schema.Struct(SubjectProfileFields)
export type SubjectProfile = typeof SubjectProfile.Type

/**
 * The Maps behind `UsersRepo.memory` and `ApiKeysRepo.memory` (a key row carries its service principal), shared with
 * the memory repositories that join them, as `WorkspaceTables` is: one layer value, built once per layer build.
 */
export class SubjectTables extends Context.Service<SubjectTables, {
  readonly users: Map<string, UserRow>
  readonly apiKeys: Map<string, ApiKeyRow>
}>()("@cp/persistence/SubjectTables") {
  static readonly layer = Layer.sync(SubjectTables, () => SubjectTables.of({ users: new Map(), apiKeys: new Map() }))
}

/** The memory twin of `withSubjectProfile`'s joins. */
export const profileOf = (
  tables: Context.Service.Shape<typeof SubjectTables>,
  subject: { readonly subjectType: SubjectType; readonly subjectId: string }
): SubjectProfile => {
  if (subject.subjectType === "user") {
    const user = tables.users.get(subject.subjectId)
    return { email: user?.email ?? null, displayName: user?.displayName ?? null }
  }
  const key = Array.from(tables.apiKeys.values()).find((row) => row.servicePrincipalId === subject.subjectId)
  return { email: null, displayName: key?.servicePrincipalName ?? null }
}

/** A row with its subject's profile, as the memory repositories answer it. */
export const withProfile = <Row extends { readonly subjectType: SubjectType; readonly subjectId: string }>(
  tables: Context.Service.Shape<typeof SubjectTables>,
  row: Row
): Row & SubjectProfile => ({ ...row, ...profileOf(tables, row) })

/**
 * `select s.*, <email>, <display_name> from <source> s left join users … left join service_principals …`: the rows of
 * `source` (a table, or a CTE such as an `insert … returning *`), aliased `s` (qualify conditions and keyset columns
 * with it), each with its subject's profile. Both joins are on primary keys.
 */
export const withSubjectProfile = (sql: SqlClient.SqlClient, source: Statement.Fragment): Statement.Fragment =>
  sql`
    select s.*, u.email as email, coalesce(u.display_name, p.display_name) as display_name
    from ${source} s
    left join users u on s.subject_type = 'user' and u.id = s.subject_id
    left join service_principals p on s.subject_type = 'service_principal' and p.id = s.subject_id`
