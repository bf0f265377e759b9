/** Sessions: the server side of a session bearer token (its secret stored only as a hash), revocable at logout. */
import { SessionId, UserId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
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

const uniques: ReadonlyArray<UniqueKey<SessionRow>> = [primaryKey("sessions_pkey")]

const Revoke = Schema.Struct({ id: SessionId, now: Schema.Date })
const RevokedId = Schema.Struct({ id: SessionId })
const OnWorkspace = Schema.Struct({ id: SessionId, ref: Schema.String })
const SessionOnWorkspaceRow = Schema.Struct({ ...SessionRow.fields, workspace: Schema.NullOr(ResolvedWorkspaceJson) })

/** A session with the workspace a request names, resolved for the session's user (None: no such workspace). */
export interface SessionOnWorkspace {
  readonly session: SessionRow
  readonly workspace: Option.Option<ResolvedWorkspace>
}

/** Session records, read on every session-authenticated request (by primary key) and revoked at logout. */
export class SessionsRepo extends Context.Service<SessionsRepo, {
  readonly insert: (session: SessionRow) => Effect.Effect<void, UniqueViolation>
  readonly findById: (id: SessionId) => Effect.Effect<Option.Option<SessionRow>>
  /**
   * The session by id and, in the same database read, the workspace `ref` names as
   * `OrganizationsRepo.resolveForSubject` resolves it for the session's user: the one read a session-authenticated
   * workspace request needs. None when there is no such session.
   */
  readonly findWithWorkspace: (id: SessionId, ref: string) => Effect.Effect<Option.Option<SessionOnWorkspace>>
  /** Sets `revokedAt` to `now` if the session exists and is not revoked yet; true when this call revoked it. */
  readonly revoke: (id: SessionId, now: Date) => Effect.Effect<boolean>
}>()("@cp/persistence/identity/SessionsRepo") {
  /** Sessions in a Map, for fast deterministic tests. */
  static readonly memory = Layer.effect(
    SessionsRepo,
    Effect.gen(function*() {
      const organizations = yield* OrganizationsRepo
      const sessions = new Map<SessionId, SessionRow>()
      return SessionsRepo.of({
        insert: Effect.fn("SessionsRepo.insert")((session: SessionRow) =>
          insertUnique(sessions, session.id, session, uniques)
        ),
        findById: Effect.fn("SessionsRepo.findById")(function*(id: SessionId) {
          return Option.fromUndefinedOr(sessions.get(id))
        }),
        findWithWorkspace: Effect.fn("SessionsRepo.findWithWorkspace")(function*(id: SessionId, ref: string) {
          const session = sessions.get(id)
          if (session === undefined) return Option.none()
          const workspace = yield* organizations.resolveForSubject({
            ref,
            subjectType: "user",
            subjectId: session.userId
          })
          return Option.some({ session, workspace })
        }),
        revoke: Effect.fn("SessionsRepo.revoke")((id: SessionId, now: Date) =>
          updateRow(
            sessions,
            id,
            (current) => current.revokedAt === null ? Option.some({ ...current, revokedAt: now }) : Option.none()
          ).pipe(
            Effect.map(Option.isSome)
          )
        )
      })
    })
  ).pipe(Layer.provide(OrganizationsRepo.memory))

  /** Sessions in the `sessions` table. */
  static readonly sql = Layer.effect(
    SessionsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = SqlSchema.void({
        Request: SessionRow,
        execute: (session) => sql`insert into sessions ${sql.insert(session)}`
      })
      const findById = SqlSchema.findOneOption({
        Request: SessionId,
        Result: SessionRow,
        execute: (id) => sql`select * from sessions where id = ${id}`
      })
      const findWithWorkspace = SqlSchema.findOneOption({
        Request: OnWorkspace,
        Result: SessionOnWorkspaceRow,
        execute: ({ id, ref }) => sql.unsafe(sessionOnWorkspaceSql, [id, ref]).withoutTransform
      })
      const revoke = SqlSchema.findOneOption({
        Request: Revoke,
        Result: RevokedId,
        execute: ({ id, now }) =>
          sql`update sessions set revoked_at = ${now} where id = ${id} and revoked_at is null returning id`
      })
      return SessionsRepo.of({
        insert: Effect.fn("SessionsRepo.insert")((session: SessionRow) => uniqueViolationOrDie(insert(session))),
        findById: Effect.fn("SessionsRepo.findById")((id: SessionId) => Effect.orDie(findById(id))),
        // The one read of every session-authenticated workspace request: a plain function, since `Effect.fn`'s
        // call-site stack capture and span showed in the request profile; its SQL statement still has its span.
        findWithWorkspace: (id: SessionId, ref: string) =>
          findWithWorkspace({ id, ref }).pipe(
            Effect.map(
              Option.map(({ workspace, ...session }) => ({ session, workspace: Option.fromNullOr(workspace) }))
            ),
            Effect.orDie
          ),
        revoke: Effect.fn("SessionsRepo.revoke")((id: SessionId, now: Date) =>
          revoke({ id, now }).pipe(Effect.map(Option.isSome), Effect.orDie)
        )
      })
    })
  )
}
