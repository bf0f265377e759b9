/**
 * Infrastructure state (run-state.md §6): Terraform's `http` backend at `…/state/tfstate/{component}/{environment}`,
 * raw wire and no envelope for its five methods. `LOCK` and `UNLOCK` are not methods an API description can carry:
 * the server takes them as `POST …:lock` and `POST …:unlock` (the routes below), which clients that can send only
 * standard methods may call directly. The routes also accept HTTP Basic credentials whose password is a bearer token
 * (contract §4), since Terraform can send only those. The versions list and the project's states are JSON as usual.
 */
import { Context, Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { NotFound, ValidationFailed } from "./errors.ts"
import { ProjectId } from "./ids.ts"
import { doc } from "./reference.ts"
import { ContractVersionGate, CreatedBy, StatePlaneRoute } from "./runs.ts"
import { requires, WorkspaceAuthentication, WorkspaceAuthorization } from "./security.ts"
import { Envelope, maxBodyBytes, Timestamp } from "./wire.ts"
import { OrgRef } from "./workspaces.ts"

/** A stored state: at most 32 MiB. */
export const MAX_TFSTATE_BYTES = 32 * 1024 * 1024
/** Versions of a deleted state are kept this long. */
export const TFSTATE_VERSION_RETENTION_DAYS = 30

/** Marks a route that also takes `Authorization: Basic` with a bearer token as the password (contract §4). */
export class AcceptsBasicCredentials extends Context.Service<AcceptsBasicCredentials, true>()(
  "@cp/domain/AcceptsBasicCredentials"
) {}

/** A state's component: 1–64 characters of `a-z 0-9 _ -`. */
export const TfComponent = Schema.String.annotate({ description: "The component: 1 to 64 of `a-z 0-9 _ -`" }).check(
  Schema.isPattern(/^[a-z0-9_-]{1,64}$/u, { message: "must be 1 to 64 characters of a-z, 0-9, _ and -" })
)

/** The slug of a live environment of the project. */
export const TfEnvironment = Schema.String.annotate({ description: "The slug of a live environment of the project" })
  .check(
    Schema.isPattern(/^[a-z0-9][a-z0-9-]{0,62}$/u, { message: "must be an environment slug" })
  )

export const TfStateVersion = Schema.Struct({
  version: Schema.Int,
  serial: Schema.NullOr(Schema.Int),
  lineage: Schema.NullOr(Schema.String),
  size: Schema.Int,
  createdAt: Timestamp,
  createdBy: CreatedBy
})
export type TfStateVersion = typeof TfStateVersion.Type

/** Terraform's LockInfo, as its `http` backend sends it (the server keeps the bytes it was sent). */
export const TfLockInfo = Schema.Struct({
  ID: Schema.String,
  Operation: Schema.optionalKey(Schema.String),
  Info: Schema.optionalKey(Schema.String),
  Who: Schema.optionalKey(Schema.String),
  Version: Schema.optionalKey(Schema.String),
  Created: Schema.optionalKey(Schema.String),
  Path: Schema.optionalKey(Schema.String)
})
export type TfLockInfo = typeof TfLockInfo.Type

/** One state of a project, for listings (`cpctl tfstate list`): where it is and who holds its lock. */
export const TfStateSummary = Schema.Struct({
  component: Schema.String,
  environment: Schema.String,
  environmentId: Schema.String,
  version: Schema.NullOr(Schema.Int),
  locked: Schema.Boolean,
  lock: Schema.NullOr(TfLockInfo),
  updatedAt: Timestamp
})
export type TfStateSummary = typeof TfStateSummary.Type

export const TfStateQuery = Schema.Struct({
  version: Schema.optionalKey(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(1)).pipe(
      Schema.annotateEncoded({ description: "An earlier version to read; the current state when absent" })
    )
  )
})

export const TfStateWriteQuery = Schema.Struct({
  ID: Schema.optionalKey(
    Schema.String.annotate({ description: "The lock ID Terraform holds, when it holds one" }).check(
      Schema.isMaxLength(256)
    )
  )
})

const projectParams = { orgId: OrgRef, projectId: ProjectId }
const stateParams = { ...projectParams, component: TfComponent, environment: TfEnvironment }
const TFSTATE = "/v1/organizations/:orgId/projects/:projectId/state/tfstate"
const STATE_PATH = `${TFSTATE}/:component/:environment`

/** The raw state bytes Terraform reads and writes (documentation only: the handlers answer the bytes themselves). */
const RawState = Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/json" }))
const Empty = HttpApiSchema.Empty(200)

export class TfStateApi extends HttpApiGroup.make("tfstate")
  .add(
    HttpApiEndpoint.get("list", TFSTATE, {
      params: projectParams,
      success: Envelope({ states: Schema.Array(TfStateSummary) }),
      error: NotFound
    }).annotateMerge(doc("List a project's infrastructure states", "By component, then environment slug."))
      .annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.get("read", STATE_PATH, {
      params: stateParams,
      query: TfStateQuery,
      success: RawState,
      error: [NotFound, ValidationFailed]
    }).annotateMerge(
      doc(
        "Read an infrastructure state",
        "Terraform `http` backend: the stored bytes, or 404 with an empty body when there is none. `?version=N` reads" +
          " an earlier version."
      )
    ).annotateMerge(requires.permission("state.object.read")),
    HttpApiEndpoint.post("write", STATE_PATH, {
      params: stateParams,
      query: TfStateWriteQuery,
      success: Empty,
      error: [NotFound]
    }).annotateMerge(
      doc(
        "Store an infrastructure state",
        "The raw body (at most 32 MiB) becomes the next version. While a lock is held, `?ID=` must name it: otherwise" +
          " 423 with the holder's LockInfo."
      )
    ).annotateMerge(requires.permission("state.object.write")).annotateMerge(maxBodyBytes(MAX_TFSTATE_BYTES)),
    HttpApiEndpoint.delete("remove", STATE_PATH, {
      params: stateParams,
      query: TfStateWriteQuery,
      success: Empty,
      error: [NotFound]
    }).annotateMerge(
      doc(
        "Delete an infrastructure state",
        "Its versions are kept 30 days. While a lock is held, `?ID=` must name it (423 with the holder's LockInfo)."
      )
    ).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.post("lock", `${STATE_PATH}:lock`, {
      params: stateParams,
      success: Empty,
      error: [NotFound, ValidationFailed]
    }).annotateMerge(
      doc(
        "Lock an infrastructure state (LOCK)",
        "The `LOCK` method Terraform sends, with its LockInfo as the body: 200 when acquired or already held by the" +
          " same `ID`, otherwise 423 with the holder's LockInfo as the raw body."
      )
    ).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.post("unlock", `${STATE_PATH}:unlock`, {
      params: stateParams,
      success: Empty,
      error: [NotFound, ValidationFailed]
    }).annotateMerge(
      doc(
        "Unlock an infrastructure state (UNLOCK)",
        "The `UNLOCK` method: 200 when the body's `ID` holds the lock, 409 with the holder's LockInfo otherwise; an" +
          " empty body (`terraform force-unlock`) releases any lock."
      )
    ).annotateMerge(requires.permission("state.object.write")),
    HttpApiEndpoint.get("versions", `${STATE_PATH}/versions`, {
      params: stateParams,
      success: Envelope({ versions: Schema.Array(TfStateVersion) }),
      error: NotFound
    }).annotateMerge(doc("List an infrastructure state's versions", "Newest first, with serial and lineage."))
      .annotateMerge(requires.permission("state.object.read"))
  )
  .annotateEndpointsMerge(Context.make(AcceptsBasicCredentials, true))
  .annotateMerge(Context.make(StatePlaneRoute, true))
  .middleware(WorkspaceAuthorization)
  .middleware(ContractVersionGate)
  .middleware(WorkspaceAuthentication)
  .annotateMerge(
    OpenApi.annotations({
      title: "Infrastructure state",
      description: "Terraform `http` backend: raw state bytes, LOCK and UNLOCK, versions"
    })
  )
{}
