/**
 * The SQL text of the read behind every workspace-scoped request, built once when the module loads: a constant text
 * is compiled by nothing per call (building this 2 kB statement per request showed in the request profile). Every
 * column is already named in camelCase, so the statements run without the client's per-row name transform. Import-free
 * on purpose: `bench/baseline.ts` sends these exact statements.
 */

/**
 * A timestamp inside the JSON as epoch milliseconds: `new Date(number)` is cheap, where the ISO text PostgreSQL writes
 * (microseconds and an offset) sends V8 down its slow date parser.
 */
const epochMillis = (column: string): string => `floor(extract(epoch from ${column}) * 1000)`

/** One line: the statement text is hashed on every call by the client's prepared-statement cache. */
const oneLine = (sql: string): string => sql.replace(/\s+/g, " ").trim()

/**
 * The workspace `ref` names (by any of its three references) as a JSON object with camelCase keys: its `organization`
 * row and, as `bindings`, the roles the subject holds on it and on its account root, its own bindings and its teams'
 * grants in grant order (createdAt, id); null when no workspace has that reference. A team grant counts only while
 * the subject belongs to the team's workspace. Each argument is SQL: a placeholder, or a column of the enclosing
 * statement's row (the session's user). Decode it with `ResolvedWorkspaceJson`.
 */
const resolvedWorkspaceSql = (ref: string, subjectType: string, subjectId: string): string =>
  `(
    select jsonb_build_object(
      'organization', jsonb_build_object(
        'id', o.id, 'publicId', o.public_id, 'name', o.name, 'slug', o.slug, 'kind', o.kind,
        'accountId', o.account_id, 'isAccountRoot', o.is_account_root,
        'createdAt', ${epochMillis("o.created_at")}, 'updatedAt', ${epochMillis("o.updated_at")}),
      'bindings', coalesce((
        select jsonb_agg(held.binding order by held.created_at, held.id)
        from (
          select jsonb_build_object(
            'id', b.id, 'orgId', b.org_id, 'subjectType', b.subject_type, 'subjectId', b.subject_id,
            'role', b.role, 'scopeKind', b.scope_kind, 'scopeRef', b.scope_ref,
            'createdAt', ${epochMillis("b.created_at")}
          ) as binding, b.created_at, b.id
          from role_bindings b
          where b.subject_type = ${subjectType} and b.subject_id = ${subjectId} and b.org_id in (o.id, root.id)
          union all
          select jsonb_build_object(
            'id', g.id, 'orgId', t.org_id, 'subjectType', tm.subject_type, 'subjectId', tm.subject_id,
            'role', g.role, 'scopeKind', g.scope_kind, 'scopeRef', g.scope_ref,
            'createdAt', ${epochMillis("g.created_at")}, 'teamId', t.id
          ), g.created_at, g.id
          from team_members tm
          join teams t on t.id = tm.team_id
          join team_role_grants g on g.team_id = tm.team_id
          where tm.subject_type = ${subjectType} and tm.subject_id = ${subjectId} and tm.status = 'active'
            and t.org_id in (o.id, root.id)
            and (
              exists (
                select 1 from members m
                where m.org_id = t.org_id and m.subject_type = tm.subject_type and m.subject_id = tm.subject_id
                  and m.status = 'active')
              or exists (
                select 1 from role_bindings rb
                where rb.org_id = t.org_id and rb.subject_type = tm.subject_type and rb.subject_id = tm.subject_id))
        ) held
      ), '[]'::jsonb))
    from organizations o
    join organizations root on root.public_id = o.account_id
    where o.id = ${ref} or o.public_id = ${ref} or o.slug = ${ref}
    limit 1)`

/** `OrganizationsRepo.resolveForSubject`: $1 the workspace reference, $2 the subject type, $3 the subject id. */
export const subjectOnWorkspaceSql = oneLine(`select ${resolvedWorkspaceSql("$1", "$2", "$3")} as workspace`)

/** `SessionsRepo.findWithWorkspace`: the session $1 and the workspace reference $2 resolved for its user. */
export const sessionOnWorkspaceSql = oneLine(`
  select s.id, s.user_id as "userId", s.secret_hash as "secretHash", s.expires_at as "expiresAt",
    s.revoked_at as "revokedAt", s.created_at as "createdAt",
    ${resolvedWorkspaceSql("$2", "'user'", "s.user_id")} as workspace
  from sessions s where s.id = $1`)
