/**
 * Infrastructure state (run-state.md §6), Terraform's `http` backend: a state per (project, component, live
 * environment), its lock as the LockInfo bytes the holder sent, and every version it ever stored. Every change runs in
 * one transaction that first locks the state's row, so two clients locking (or writing) one state from any replica
 * see exactly one winner. Lock and state changes go to the event log and so to the audit trail.
 */
import {
  type Actor,
  NotFound,
  type OrgId,
  type ProjectId,
  TfLockInfo,
  TFSTATE_VERSION_RETENTION_DAYS,
  type TfStateSummary,
  type TfStateVersion,
  type ValidationFailed,
  validationFailed,
  wireError
} from "@cp/domain"
import {
  EnvironmentsRepo,
  ProjectsRepo,
  type TfStateKey,
  TfStateRepo,
  type TfStateRow,
  Transactor
} from "@cp/persistence"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { actorRefOf, eventActorOf, EventLog } from "../platform/events.ts"
import { currentDate, orFail } from "../platform/serviceKit.ts"
import { findProject } from "../projects/scope.ts"

/** The state a route names: the workspace, the project, the component and the environment's slug. */
export interface StateAddress {
  readonly orgId: OrgId
  readonly projectId: ProjectId
  readonly component: string
  readonly environment: string
}

/**
 * What a Terraform method answers besides the JSON errors: done (200), or the lock's holder as raw LockInfo with
 * 423 (a lock or write that meets another's lock) or 409 (an unlock by another ID).
 */
export type TfAnswer =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Locked"; readonly holder: string }
  | { readonly _tag: "HeldByAnother"; readonly holder: string }

const done: TfAnswer = { _tag: "Done" }

const decodeLockInfo = Schema.decodeUnknownOption(Schema.fromJsonString(TfLockInfo))

const DAY_MS = 86_400_000

/** `serial` and `lineage` of a Terraform state document, when the bytes are one. */
export const stateMetadata = (
  content: Uint8Array
): { readonly serial: number | null; readonly lineage: string | null } => {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(content).toString("utf8"))
    if (typeof parsed !== "object" || parsed === null) return { serial: null, lineage: null }
    const serial = "serial" in parsed && Number.isSafeInteger(parsed.serial) ? Number(parsed.serial) : null
    const lineage = "lineage" in parsed && typeof parsed.lineage === "string" ? parsed.lineage : null
    return { serial, lineage }
  } catch {
    return { serial: null, lineage: null }
  }
}

const keyOfRow = (row: TfStateRow): TfStateKey => ({
  orgId: row.orgId,
  projectId: row.projectId,
  component: row.component,
  environmentId: row.environmentId
})

export class TfStateService extends Context.Service<TfStateService, {
  readonly read: (at: StateAddress, version: number | undefined) => Effect.Effect<Option.Option<Uint8Array>, NotFound>
  readonly write: (
    actor: Actor,
    at: StateAddress,
    lockId: string | undefined,
    content: Uint8Array
  ) => Effect.Effect<TfAnswer, NotFound>
  readonly remove: (actor: Actor, at: StateAddress, lockId: string | undefined) => Effect.Effect<TfAnswer, NotFound>
  /** `LOCK` with the LockInfo bytes Terraform sent. */
  readonly lock: (actor: Actor, at: StateAddress, body: string) => Effect.Effect<TfAnswer, NotFound | ValidationFailed>
  /** `UNLOCK` with a LockInfo, or an empty body to release any lock. */
  readonly unlock: (
    actor: Actor,
    at: StateAddress,
    body: string
  ) => Effect.Effect<TfAnswer, NotFound | ValidationFailed>
  readonly versions: (at: StateAddress) => Effect.Effect<ReadonlyArray<TfStateVersion>, NotFound>
  readonly list: (orgId: OrgId, projectId: ProjectId) => Effect.Effect<ReadonlyArray<TfStateSummary>, NotFound>
}>()("@cp/server/TfStateService") {
  static readonly layer = Layer.effect(
    TfStateService,
    Effect.gen(function*() {
      const states = yield* TfStateRepo
      const projects = yield* ProjectsRepo
      const environments = yield* EnvironmentsRepo
      const tx = yield* Transactor
      const events = yield* EventLog

      /** The state's key: the project in the workspace and a live environment of it by slug, else 404. */
      const keyOf = Effect.fnUntraced(function*(at: StateAddress) {
        yield* findProject(projects, at.orgId, at.projectId)
        const environment = yield* environments.findBySlug({
          orgId: at.orgId,
          projectId: at.projectId,
          slug: at.environment
        }).pipe(
          Effect.map(Option.filter((row) => row.status === "active")),
          orFail(() =>
            wireError(NotFound, "Environment not found", { projectId: at.projectId, environment: at.environment })
          )
        )
        const key: TfStateKey = {
          orgId: at.orgId,
          projectId: at.projectId,
          component: at.component,
          environmentId: environment.id
        }
        return key
      })

      const describe = (at: StateAddress, row: TfStateRow) => ({
        component: at.component,
        environment: at.environment,
        environmentId: row.environmentId,
        version: row.currentVersion
      })

      const record = (
        actor: Actor,
        at: StateAddress,
        row: TfStateRow,
        type: string,
        extra: Record<string, string | boolean | null> = {}
      ) =>
        events.record({
          orgId: at.orgId,
          type,
          actor: eventActorOf(actor),
          subject: { kind: "tfstate", id: `${at.component}/${at.environment}`, name: at.component },
          data: { tfstate: describe(at, row), ...extra },
          projectId: at.projectId,
          environmentId: row.environmentId,
          description: `Infrastructure state ${at.component}/${at.environment}: ${type.slice("state.tfstate.".length)}`
        })

      /** Runs `change` on the state's row locked for this transaction. */
      const withState = <A, E>(at: StateAddress, change: (row: TfStateRow, now: Date) => Effect.Effect<A, E>) =>
        Effect.flatMap(
          keyOf(at),
          (key) =>
            Effect.flatMap(
              currentDate,
              (now) => tx.withTransaction(Effect.flatMap(states.lockForUpdate(key, now), (row) => change(row, now)))
            )
        )

      /** 423 with the holder's LockInfo unless the state is unlocked or `lockId` holds it. */
      const lockedAgainst = (row: TfStateRow, lockId: string | undefined): Option.Option<TfAnswer> =>
        row.lockId === null || row.lockId === lockId
          ? Option.none()
          : Option.some({ _tag: "Locked", holder: row.lockInfo ?? "{}" })

      const parseLock = (body: string) =>
        Option.match(decodeLockInfo(body), {
          onNone: () =>
            Effect.fail(validationFailed({ body: ["must be a Terraform LockInfo JSON document with an ID"] })),
          onSome: Effect.succeed
        })

      return TfStateService.of({
        read: Effect.fn("TfState.read")(function*(at, version) {
          const key = yield* keyOf(at)
          if (version !== undefined) return yield* states.content(key, version)
          const row = yield* states.find(key)
          const current = Option.flatMap(row, (found) => Option.fromNullishOr(found.currentVersion))
          return Option.isNone(current) ? Option.none() : yield* states.content(key, current.value)
        }),
        write: (actor, at, lockId, content) =>
          withState(at, (row, now) =>
            Option.match(lockedAgainst(row, lockId), {
              onSome: Effect.succeed,
              onNone: () =>
                Effect.gen(function*() {
                  const version = row.lastVersion + 1
                  yield* states.insertVersion({
                    key: keyOfRow(row),
                    version,
                    ...stateMetadata(content),
                    size: content.byteLength,
                    content,
                    createdAt: now,
                    createdBy: actorRefOf(actor),
                    purgeAfter: null
                  })
                  const next = { ...row, currentVersion: version, lastVersion: version, updatedAt: now }
                  yield* states.save(next)
                  yield* states.purgeExpired(now)
                  yield* record(actor, at, next, "state.tfstate.written")
                  return done
                })
            })).pipe(Effect.withSpan("TfState.write")),
        remove: (actor, at, lockId) =>
          withState(at, (row, now) =>
            Option.match(lockedAgainst(row, lockId), {
              onSome: Effect.succeed,
              onNone: () =>
                Effect.gen(function*() {
                  yield* states.markForPurge(row, new Date(now.getTime() + TFSTATE_VERSION_RETENTION_DAYS * DAY_MS))
                  const next = { ...row, currentVersion: null, updatedAt: now }
                  yield* states.save(next)
                  yield* record(actor, at, next, "state.tfstate.deleted")
                  return done
                })
            })).pipe(Effect.withSpan("TfState.remove")),
        lock: (actor, at, body) =>
          Effect.flatMap(parseLock(body), (info) =>
            withState(at, (row, now) => {
              if (row.lockId === info.ID) return Effect.succeed(done)
              if (row.lockId !== null) return Effect.succeed<TfAnswer>({ _tag: "Locked", holder: row.lockInfo ?? "{}" })
              const next = { ...row, lockId: info.ID, lockInfo: body, lockedAt: now, updatedAt: now }
              return Effect.as(
                Effect.andThen(states.save(next), record(actor, at, next, "state.tfstate.locked", { lock: info.ID })),
                done
              )
            })).pipe(Effect.withSpan("TfState.lock")),
        unlock: (actor, at, body) =>
          Effect.flatMap(
            body.trim() === "" ? Effect.succeed(Option.none<TfLockInfo>()) : Effect.map(parseLock(body), Option.some),
            (info) =>
              withState(at, (row, now) => {
                const force = Option.isNone(info)
                if (row.lockId === null) return Effect.succeed(done)
                if (Option.isSome(info) && info.value.ID !== row.lockId) {
                  return Effect.succeed<TfAnswer>({ _tag: "HeldByAnother", holder: row.lockInfo ?? "{}" })
                }
                const next = { ...row, lockId: null, lockInfo: null, lockedAt: null, updatedAt: now }
                return Effect.as(
                  Effect.andThen(
                    states.save(next),
                    record(actor, at, next, "state.tfstate.unlocked", { lock: row.lockId, force })
                  ),
                  done
                )
              })
          ).pipe(Effect.withSpan("TfState.unlock")),
        versions: Effect.fn("TfState.versions")(function*(at) {
          const key = yield* keyOf(at)
          return yield* states.versions(key)
        }),
        list: Effect.fn("TfState.list")(function*(orgId, projectId) {
          yield* findProject(projects, orgId, projectId)
          const rows = yield* states.list({ orgId, projectId })
          return yield* Effect.forEach(rows, (row) =>
            Effect.map(
              environments.findById({ orgId, projectId, environmentId: row.environmentId }),
              (environment): TfStateSummary => ({
                component: row.component,
                environment: Option.match(environment, { onNone: () => row.environmentId, onSome: (env) => env.slug }),
                environmentId: row.environmentId,
                version: row.currentVersion,
                locked: row.lockId !== null,
                lock: row.lockInfo === null ? null : Option.getOrNull(decodeLockInfo(row.lockInfo)),
                updatedAt: row.updatedAt
              })
            ))
        })
      })
    })
  )
}
