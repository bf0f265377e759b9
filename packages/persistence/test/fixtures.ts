/**
 * Row builders and id minting shared by the repository contract suites: a fixed clock (`at`), valid prefixed ids
 * (`newId`) and the workspace, member and role-binding rows most suites start from.
 */
import type { Role } from "@cp/domain/access"
import {
  ApiKeyId,
  IdPrefix,
  MemberId,
  OrgId,
  ProjectId,
  ServicePrincipalId,
  UserId,
  WorkspaceRef
} from "@cp/domain/ids"
import { Effect, Schema } from "effect"
import { createHash, randomUUID } from "node:crypto"
import type { ApiKeyRow } from "../src/apiKeys/ApiKeysRepo.ts"
import type { MemberRow } from "../src/members/rows.ts"
import { ProjectsRepo } from "../src/projects/ProjectsRepo.ts"
import { OrganizationsRepo } from "../src/workspaces/OrganizationsRepo.ts"
import type { OrganizationRow, RoleBindingRow } from "../src/workspaces/rows.ts"

/** The suites' epoch, in milliseconds. */
export const t0 = new Date("2030-01-01T00:00:00.000Z").getTime()

/** The instant `minutes` minutes after `t0`. */
export const at = (minutes: number): Date => new Date(t0 + minutes * 60_000)

/** A valid prefixed id: 26 upper-case hex digits are a ULID-shaped body. */
export const newId = <A>(schema: Schema.Codec<A, string>, prefix: string): A =>
  Schema.decodeSync(schema)(`${prefix}${randomUUID().replaceAll("-", "").slice(0, 26).toUpperCase()}`)

/** A fresh user id. */
export const newUserId = (): UserId => newId(UserId, IdPrefix.user)

/** An account-root workspace named `name`, created `minutes` after `t0`, with a slug no other test uses. */
export const accountRootRow = (
  name: string,
  minutes = 0,
  overrides: Partial<OrganizationRow> = {}
): OrganizationRow => {
  const publicId = newId(WorkspaceRef, IdPrefix.workspace)
  return {
    id: newId(OrgId, IdPrefix.org),
    publicId,
    name,
    slug: `ws-${randomUUID()}`,
    kind: "account",
    accountId: publicId,
    isAccountRoot: true,
    createdAt: at(minutes),
    updatedAt: at(minutes),
    ...overrides
  }
}

/** An active user membership of `org`, joined `minutes` after `t0`. */
export const memberRow = (
  org: OrganizationRow,
  subjectId: string,
  minutes: number,
  overrides: Partial<MemberRow> = {}
): MemberRow => ({
  id: newId(MemberId, IdPrefix.member),
  orgId: org.id,
  subjectType: "user",
  subjectId,
  status: "active",
  joinedAt: at(minutes),
  ...overrides
})

/** A workspace-wide `role` binding of the user `subjectId` in `org`, created at `t0`. */
export const bindingRow = (
  org: OrganizationRow,
  subjectId: string,
  role: Role,
  overrides: Partial<RoleBindingRow> = {}
): RoleBindingRow => ({
  id: randomUUID(),
  orgId: org.id,
  subjectType: "user",
  subjectId,
  role,
  scopeKind: "organization",
  scopeRef: null,
  createdAt: at(0),
  ...overrides
})

/** A workspace's live API key (label `deploy`, role viewer) with its service principal, created at `minutes`. */
export const apiKeyRow = (org: OrganizationRow, minutes: number, overrides: Partial<ApiKeyRow> = {}): ApiKeyRow => {
  const secret = `sk_${randomUUID().replaceAll("-", "")}${randomUUID().replaceAll("-", "")}`
  return {
    id: Schema.decodeSync(ApiKeyId)(randomUUID()),
    orgId: org.id,
    servicePrincipalId: newId(ServicePrincipalId, IdPrefix.servicePrincipal),
    servicePrincipalName: "API Key: deploy",
    label: "deploy",
    prefix: secret.slice(0, 12),
    secretHash: createHash("sha256").update(secret).digest("hex"),
    role: "viewer",
    projectId: null,
    createdAt: at(minutes),
    expiresAt: null,
    lastUsedAt: null,
    revokedAt: null,
    ...overrides
  }
}

/** An account root named `name` and one active project of it, stored: the scope most area suites record under. */
export const storedProjectScope = (name: string) =>
  Effect.gen(function*() {
    const org = accountRootRow(name)
    yield* (yield* OrganizationsRepo).insert(org).pipe(Effect.orDie)
    const projectId = newId(ProjectId, IdPrefix.project)
    yield* (yield* ProjectsRepo).insert({
      id: projectId,
      orgId: org.id,
      name: "P",
      slug: `p-${randomUUID()}`,
      status: "active",
      createdAt: at(0),
      updatedAt: at(0),
      archivedAt: null
    }).pipe(Effect.orDie)
    return { org, projectId }
  })
