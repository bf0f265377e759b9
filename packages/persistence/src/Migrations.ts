/** Forward-only numbered migrations, applied at start-up by whichever replica takes the advisory lock first. */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import platform from "./migrations/0001_platform.ts"
import identity from "./migrations/0002_identity.ts"
import workspaces from "./migrations/0003_workspaces.ts"
import apiKeys from "./migrations/0004_api_keys.ts"
import invitations from "./migrations/0005_invitations.ts"
import teams from "./migrations/0006_teams.ts"
import projects from "./migrations/0007_projects.ts"
import entitlements from "./migrations/0008_entitlements.ts"
import config from "./migrations/0009_config.ts"
import secrets from "./migrations/0010_secrets.ts"
import webhooks from "./migrations/0011_webhooks.ts"
import metering from "./migrations/0012_metering.ts"
import agents from "./migrations/0013_agents.ts"
import runState from "./migrations/0014_run_state.ts"
import objects from "./migrations/0017_objects.ts"
import refsCatalogTfstate from "./migrations/0018_refs_catalog_tfstate.ts"

/** Every migration keyed `NNNN_name`; an area adds its module here, with the next number. */
export const migrations = {
  "0001_platform": platform,
  "0002_identity": identity,
  "0003_workspaces": workspaces,
  "0004_api_keys": apiKeys,
  "0005_invitations": invitations,
  "0006_teams": teams,
  "0007_projects": projects,
  "0008_entitlements": entitlements,
  "0009_config": config,
  "0010_secrets": secrets,
  "0011_webhooks": webhooks,
  "0012_metering": metering,
  "0013_agents": agents,
  "0014_run_state": runState,
  "0017_objects": objects,
  "0018_refs_catalog_tfstate": refsCatalogTfstate
}

/** Arbitrary constant naming the migration lock among this database's advisory locks. */
const MIGRATION_LOCK_KEY = 4_214_330_001

/**
 * Applies pending migrations inside one transaction that first takes a transaction-scoped advisory lock, so
 * replicas starting together run them once, one after the other; returns the migrations this call applied.
 */
export const run = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(Effect.gen(function*() {
    // Waiting for another replica's migrations, and a migration itself, may outlast a request's statement timeout.
    yield* sql`set local statement_timeout = 0`
    yield* sql`select pg_advisory_xact_lock(${sql.literal(String(MIGRATION_LOCK_KEY))})`
    return yield* PgMigrator.run({ loader: PgMigrator.fromRecord(migrations) })
  }))
}).pipe(
  // PgMigrator asks for process and file-system services for its optional pg_dump schema dumps, which we never request.
  Effect.provide(NodeServices.layer)
)

/** Runs the migrations while the application layer is built, before anything serves requests. */
export const layer = Layer.effectDiscard(run)
