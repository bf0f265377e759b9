/** Sessions: the server side of a session bearer token (its secret stored only as a hash), revocable at logout. */
import { SessionId, UserId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"
import { OrganizationsRepo, type ResolvedWorkspace, ResolvedWorkspaceJson } from "../workspaces/OrganizationsRepo.ts"
import { sessionOnWorkspaceSql } from "../workspaces/resolution.ts"

/** A row of `sessions`: what the edge needs to accept or reject a session token. */
export const SessionRow = Schema.Struct({
  id: SessionId,
  userId: UserId,
  /** SHA-256 of the token's secret part; the raw token is never stored. */
  secretHash: Schema.String,
  expiresAt: Schema.Date,
  revokedAt: Schema.NullOr(Schema.Date),
  createdAt: Schema.Date
})
export type SessionRow = typeof SessionRow.Type

/** A session and the workspace reference (`org_…`, `ws_…` or a slug) a request names. */
export const SessionWorkspaceRef = Schema.Struct({ id: SessionId, ref: Schema.String })
export type SessionWorkspaceRef = typeof SessionWorkspaceRef.Type

/** Revoking a session at `now`. */
export const SessionRevocation = Schema.Struct({ id: SessionId, now: Schema.Date })
export type SessionRevocation = typeof SessionRevocation.Type

/** A session with the workspace a request names, resolved for the session's user (None: no such workspace). */
export interface SessionOnWorkspace {
  readonly session: SessionRow
  readonly workspace: Option.Option<ResolvedWorkspace>
}

const uniques: ReadonlyArray<UniqueKey<SessionRow>> = [primaryKey("sessions_pkey")]

const RevokedRow = Schema.Struct({ id: SessionId })
const SessionOnWorkspaceRow = Schema.Struct({ ...SessionRow.fields, workspace: Schema.NullOr(ResolvedWorkspaceJson) })

/** Session records, read on every session-authenticated request (by primary key) and revoked at logout. */
export class SessionsRepo extends Context.Service<SessionsRepo, {
  readonly insert: (session: SessionRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: SessionId) => Effect.Effect<Option.Option<SessionRow>>
  /**
   * The session by id and, in the same database read, the workspace `ref` names as
   * `OrganizationsRepo.resolveForSubject` resolves it for the session's user: the one read a session-authenticated
   * workspace request needs. None when there is no such session.
   */
  readonly findWithWorkspace: (request: SessionWorkspaceRef) => Effect.Effect<Option.Option<SessionOnWorkspace>>
  /** Sets `revokedAt` to `now` if the session exists and is not revoked yet; true when this call revoked it. */
  readonly revoke: (revocation: SessionRevocation) => Effect.Effect<boolean>
}>()("@cp/persistence/identity/SessionsRepo") {
  /** Sessions in a Map, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    SessionsRepo,
    Effect.gen(function*() {
      const organizations = yield* OrganizationsRepo
      const sessions = new Map<SessionId, SessionRow>()
      return SessionsRepo.of({
        insert: (session) => insertUnique(sessions, session.id, session, uniques),
        findById: (id) => Effect.sync(() => Option.fromUndefinedOr(sessions.get(id))),
        findWithWorkspace: ({ id, ref }) =>
          Effect.suspend(() => {
            const session = sessions.get(id)
            if (session === undefined) return Effect.succeedNone
            return organizations.resolveForSubject({ ref, subjectType: "user", subjectId: session.userId }).pipe(
              Effect.map((workspace) => Option.some({ session, workspace }))
            )
          }),
        revoke: ({ id, now }) =>
          updateRow(
            sessions,
            id,
            (current) => current.revokedAt === null ? Option.some({ ...current, revokedAt: now }) : Option.none()
          ).pipe(Effect.map(Option.isSome))
      })
    })
  ).pipe(Layer.provide(OrganizationsRepo.memory))

  /** Sessions in the `sessions` table. */
  static readonly sql = Layer.effect(
    SessionsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return SessionsRepo.of({
        insert: insertRow(sql, "sessions", SessionRow),
        findById: flow(
          SqlSchema.findOneOption({
            Request: SessionId,
            Result: SessionRow,
            execute: (id) => sql`select * from sessions where id = ${id}`
          }),
          Effect.orDie
        ),
        // The one read of every session-authenticated workspace request: plain functions (no `Effect.fn` call-site
        // capture or span, which showed in the request profile), constant statement text and no per-row name
        // transform; the SQL statement still has its span.
        findWithWorkspace: flow(
          SqlSchema.findOneOption({
            Request: SessionWorkspaceRef,
            Result: SessionOnWorkspaceRow,
            execute: ({ id, ref }) => sql.unsafe(sessionOnWorkspaceSql, [id, ref]).withoutTransform
          }),
          Effect.map(Option.map(({ workspace, ...session }) => ({ session, workspace: Option.fromNullOr(workspace) }))),
          Effect.orDie
        ),
        revoke: flow(
          SqlSchema.findOneOption({
            Request: SessionRevocation,
            Result: RevokedRow,
            execute: ({ id, now }) =>
              sql`update sessions set revoked_at = ${now} where id = ${id} and revoked_at is null returning id`
          }),
          Effect.map(Option.isSome),
          Effect.orDie
        )
      })
    })
  )
}
