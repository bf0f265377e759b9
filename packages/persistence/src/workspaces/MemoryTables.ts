/**
 * The in-memory tables of the workspaces area. Its repositories join each other's tables (memberships to
 * organizations, bindings to account roots), so their memory layers share one set of Maps: each provides this same
 * layer value, which a single layer build constructs once.
 */
import type { MemberId, OrgId } from "@cp/domain/ids"
import { Context, Layer } from "effect"
import { createdOldestFirst } from "../keyset.ts"
import type { MemberRow } from "../members/rows.ts"
import type { OrganizationRow, RoleBindingRow, SubjectInOrgs } from "./rows.ts"

/** The Maps behind the memory layers of `OrganizationsRepo`, `MembersRepo` and `RoleBindingsRepo`. */
export class WorkspaceTables extends Context.Service<WorkspaceTables, {
  readonly organizations: Map<OrgId, OrganizationRow>
  readonly members: Map<MemberId, MemberRow>
  readonly roleBindings: Map<string, RoleBindingRow>
}>()("@cp/persistence/workspaces/WorkspaceTables") {
  /** Empty tables, shared by every memory repository built in the same layer build. */
  static readonly layer = Layer.sync(
    WorkspaceTables,
    () => WorkspaceTables.of({ organizations: new Map(), members: new Map(), roleBindings: new Map() })
  )
}

/** The bindings one subject holds on any of `orgIds`, in the order they were granted. */
export const bindingsOfSubject = (
  roleBindings: Map<string, RoleBindingRow>,
  { orgIds, subjectType, subjectId }: SubjectInOrgs
): Array<RoleBindingRow> =>
  Array.from(roleBindings.values())
    .filter((binding) =>
      binding.subjectType === subjectType && binding.subjectId === subjectId && orgIds.includes(binding.orgId)
    )
    .sort(createdOldestFirst)
