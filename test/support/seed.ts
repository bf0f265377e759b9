/**
 * Rows written straight into the database of a `testServerOver` server: what an accepted invitation (a membership and
 * a workspace-scoped role binding) or an API key (a service principal's binding) would write, for suites that must not
 * depend on those flows.
 */
import { newId } from "@cp/server/platform/ids"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"

/**
 * An active membership of `orgId` for the user (or, with `subjectType`, a service principal), with `role` at workspace
 * scope unless `role` is null.
 */
export const seedMember = (
  orgId: string,
  userId: string,
  role: string | null,
  subjectType: "user" | "service_principal" = "user"
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date()
    yield* sql`insert into members ${
      sql.insert({
        id: newId("mem_", now.getTime()),
        orgId,
        subjectType,
        subjectId: userId,
        status: "active",
        joinedAt: now
      })
    }`
    if (role !== null) yield* seedBinding(orgId, subjectType, userId, role)
  }).pipe(Effect.orDie)

/** A role binding on `orgId` (a project one when `projectId` is given). */
export const seedBinding = (
  orgId: string,
  subjectType: "user" | "service_principal",
  subjectId: string,
  role: string,
  projectId: string | null = null
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`insert into role_bindings ${
      sql.insert({
        id: randomUUID(),
        orgId,
        subjectType,
        subjectId,
        role,
        scopeKind: projectId === null ? "organization" : "project",
        scopeRef: projectId,
        createdAt: new Date()
      })
    }`
  }).pipe(Effect.orDie)

/**
 * An object of the project stored as the object store writes one (one blob of one chunk), straight into the database:
 * its digest. For suites of routes that name stored objects (refs, catalog heads).
 */
export const seedObject = (orgId: string, projectId: string, content: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bytes = Buffer.from(content, "utf8")
    const blobId = `blob-${randomUUID()}`
    const now = new Date()
    yield* sql`insert into object_chunks (blob_id, seq, data, created_at) values (${blobId}, 0, ${bytes}, ${now})`
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`
    yield* sql`
      insert into objects (project_id, digest, org_id, size, blobs, refers_to, created_at, last_accessed_at)
      values (${projectId}, ${digest}, ${orgId}, ${bytes.length},
        ${JSON.stringify([{ id: blobId, size: bytes.length }])}::jsonb, '[]'::jsonb, ${now}, ${now})
      on conflict do nothing`
    return digest
  }).pipe(Effect.orDie)
