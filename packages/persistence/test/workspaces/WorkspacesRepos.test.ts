import { IdPrefix, OrgId, ProjectId, WorkspaceRef } from "@cp/domain/ids"
import { assert } from "@effect/vitest"
import { Data, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { UniqueViolation } from "../../src/errors.ts"
import { idPosition } from "../../src/keyset.ts"
import { MembersRepo } from "../../src/members/MembersRepo.ts"
import { Transactor } from "../../src/Transactor.ts"
import { OrganizationsRepo } from "../../src/workspaces/OrganizationsRepo.ts"
import { RoleBindingsRepo } from "../../src/workspaces/RoleBindingsRepo.ts"
import type { OrganizationRow, RoleBindingRow, ScopeKind } from "../../src/workspaces/rows.ts"
import { accountRootRow, at, bindingRow, memberRow, newId, newUserId } from "../fixtures.ts"
import { describeContract } from "../harness.ts"

/** A slug no other test uses. */
const freshSlug = () => `ws-${randomUUID()}`

const rootRow = (minutes: number, overrides: Partial<OrganizationRow> = {}): OrganizationRow =>
  accountRootRow("Personal", minutes, overrides)

const childRow = (root: OrganizationRow, minutes: number): OrganizationRow => ({
  ...rootRow(minutes),
  name: "Child",
  kind: "workspace",
  accountId: root.publicId,
  isAccountRoot: false
})

/** The three repositories read each other's tables, so every suite runs them together. */
const repositories = {
  memory: Layer.mergeAll(OrganizationsRepo.memory, MembersRepo.memory, RoleBindingsRepo.memory),
  sql: Layer.mergeAll(OrganizationsRepo.sql, MembersRepo.sql, RoleBindingsRepo.sql)
}

const insertOrgs = Effect.fnUntraced(function*(rows: ReadonlyArray<OrganizationRow>) {
  const repo = yield* OrganizationsRepo
  yield* Effect.forEach(rows, repo.insert, { discard: true })
})

const insertBindings = Effect.fnUntraced(function*(rows: ReadonlyArray<RoleBindingRow>) {
  const repo = yield* RoleBindingsRepo
  yield* Effect.forEach(rows, repo.insert, { discard: true })
})

describeContract("OrganizationsRepo", repositories, (it) => {
  it.effect("finds a workspace by id, public id and slug", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const root = rootRow(0)
      yield* repo.insert(root)
      assert.deepStrictEqual(yield* repo.findById(root.id), Option.some(root))
      assert.deepStrictEqual(yield* repo.findByPublicId(root.publicId), Option.some(root))
      assert.deepStrictEqual(yield* repo.findBySlug(root.slug), Option.some(root))
      assert.isTrue(Option.isNone(yield* repo.findBySlug(freshSlug())))
    }))

  it.effect("findByIds reads the known workspaces among many ids in one call", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const [first, second] = [rootRow(0), rootRow(1)]
      yield* insertOrgs([first, second, rootRow(2)])
      const found = yield* repo.findByIds([second.id, first.id, newId(OrgId, IdPrefix.org), first.id])
      assert.deepStrictEqual(
        [...found].sort((a, b) => (a.id < b.id ? -1 : 1)),
        [first, second].sort((a, b) => (a.id < b.id ? -1 : 1))
      )
      assert.deepStrictEqual(yield* repo.findByIds([]), [])
    }))

  it.effect("a taken slug is a UniqueViolation on organizations_slug_key", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const root = rootRow(0)
      yield* repo.insert(root)
      const error = yield* Effect.flip(repo.insert(rootRow(1, { slug: root.slug })))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "organizations_slug_key")
    }))

  it.effect("slugsStartingWith lists the base and its numeric suffixes only", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const base = freshSlug()
      const slugs = [base, `${base}-2`, `${base}-10`, `${base}-x`, `${base}2`, `${base}-2-3`, `${base}-`]
      yield* insertOrgs(slugs.map((slug, i) => rootRow(i, { slug })))
      const family = yield* repo.slugsStartingWith(base)
      assert.deepStrictEqual([...family].sort(), [base, `${base}-10`, `${base}-2`])
      assert.deepStrictEqual([...yield* repo.slugsStartingWith(`${base}-2`)].sort(), [`${base}-2`, `${base}-2-3`])
      assert.deepStrictEqual(yield* repo.slugsStartingWith(freshSlug()), [])
    }))

  it.effect("pageChildren pages an account's child workspaces newest first, without the root", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const root = rootRow(0)
      const [first, second, third] = [childRow(root, 1), childRow(root, 2), childRow(root, 2)]
      const otherRoot = rootRow(0)
      yield* insertOrgs([root, first, second, third, otherRoot, childRow(otherRoot, 3)])
      const tied = [second, third].sort((a, b) => (a.id < b.id ? 1 : -1))
      assert.deepStrictEqual(yield* repo.pageChildren({ account: root.publicId, limit: 10 }), [...tied, first])
      // A page is cut in the statement: `limit` rows strictly after `after`.
      const ordered = [...tied, first]
      assert.deepStrictEqual(yield* repo.pageChildren({ account: root.publicId, limit: 1 }), ordered.slice(0, 1))
      assert.deepStrictEqual(
        yield* repo.pageChildren({ account: root.publicId, limit: 1, after: idPosition(ordered[0] ?? first) }),
        ordered.slice(1, 2)
      )
      assert.deepStrictEqual(yield* repo.pageChildren({ account: first.publicId, limit: 10 }), [])
    }))

  it.effect("findEarliestOwnedAccountRoot picks the earliest root the user owns, ignoring shared ones", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const user = newUserId()
      const someoneElse = newUserId()
      const sharedRoot = rootRow(0)
      const ownedChild = childRow(sharedRoot, 1)
      const sharedAsViewer = rootRow(2)
      const earliestOwned = rootRow(3)
      const laterOwned = rootRow(5)
      yield* insertOrgs([sharedRoot, ownedChild, sharedAsViewer, laterOwned, earliestOwned])
      yield* insertBindings([
        bindingRow(sharedRoot, someoneElse, "owner"),
        bindingRow(sharedRoot, user, "admin"),
        bindingRow(ownedChild, user, "owner"),
        bindingRow(sharedAsViewer, someoneElse, "owner"),
        bindingRow(sharedAsViewer, user, "viewer"),
        bindingRow(laterOwned, user, "owner"),
        bindingRow(earliestOwned, user, "owner")
      ])
      assert.deepStrictEqual(yield* repo.findEarliestOwnedAccountRoot(user), Option.some(earliestOwned))
      assert.deepStrictEqual(yield* repo.findEarliestOwnedAccountRoot(someoneElse), Option.some(sharedRoot))
      assert.isTrue(Option.isNone(yield* repo.findEarliestOwnedAccountRoot(newUserId())))
    }))

  it.effect("resolveForSubject resolves all three spellings with the subject's bindings there and on its root", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const { child, user, onChild } = yield* accountWithBindings
      for (const ref of [child.id, child.publicId, child.slug]) {
        const resolved = yield* repo.resolveForSubject({ ref, subjectType: "user", subjectId: user })
        assert.deepStrictEqual(resolved, Option.some({ organization: child, bindings: onChild }))
      }
    }))

  it.effect("resolveForSubject on the root sees the root's bindings only", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const { root, user, onRoot } = yield* accountWithBindings
      assert.deepStrictEqual(
        yield* repo.resolveForSubject({ ref: root.slug, subjectType: "user", subjectId: user }),
        Option.some({ organization: root, bindings: onRoot })
      )
    }))

  it.effect("resolveForSubject finds the workspace for a subject with no role there; an unknown ref is None", () =>
    Effect.gen(function*() {
      const repo = yield* OrganizationsRepo
      const { child, user } = yield* accountWithBindings
      assert.deepStrictEqual(
        yield* repo.resolveForSubject({ ref: child.publicId, subjectType: "user", subjectId: newUserId() }),
        Option.some({ organization: child, bindings: [] })
      )
      for (const ref of [newId(OrgId, IdPrefix.org), newId(WorkspaceRef, IdPrefix.workspace), freshSlug()]) {
        assert.isTrue(Option.isNone(yield* repo.resolveForSubject({ ref, subjectType: "user", subjectId: user })))
      }
    }))
})

/**
 * A user's bindings on an account root (one project-scoped) and its child, beside bindings of others, of another
 * subject type with the same id, and on an unrelated workspace; what it holds on the child and on the root.
 */
const accountWithBindings = Effect.gen(function*() {
  const user = newUserId()
  const root = rootRow(0)
  const child = childRow(root, 1)
  const unrelated = rootRow(2)
  yield* insertOrgs([root, child, unrelated])
  const onChild = bindingRow(child, user, "builder", { createdAt: at(3) })
  const onRoot = bindingRow(root, user, "admin", { createdAt: at(1) })
  const projectOnRoot = bindingRow(root, user, "project_viewer", {
    scopeKind: "project",
    scopeRef: newId(ProjectId, IdPrefix.project),
    createdAt: at(2)
  })
  yield* insertBindings([
    onChild,
    onRoot,
    projectOnRoot,
    bindingRow(child, newUserId(), "owner"),
    bindingRow(child, user, "viewer", { subjectType: "service_principal" }),
    bindingRow(unrelated, user, "owner")
  ])
  return { root, child, user, onChild: [onRoot, projectOnRoot, onChild], onRoot: [onRoot, projectOnRoot] }
})

class Abort extends Data.TaggedError("Abort")<{}> {}

describeContract("MembersRepo", repositories, (it) => {
  it.effect("a failed transaction leaves neither the workspace nor its membership and binding behind", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const members = yield* MembersRepo
      const user = newUserId()
      const root = rootRow(0)
      const error = yield* Effect.flip(withTransaction(Effect.gen(function*() {
        yield* insertOrgs([root])
        yield* members.insert(memberRow(root, user, 0))
        yield* insertBindings([bindingRow(root, user, "owner")])
        return yield* new Abort()
      })))
      assert.instanceOf(error, Abort)
      assert.isTrue(Option.isNone(yield* (yield* OrganizationsRepo).findById(root.id)))
      assert.deepStrictEqual(
        yield* members.pageOrgsForSubject({ subjectType: "user", subjectId: user, limit: 10 }),
        []
      )
      assert.deepStrictEqual(
        yield* (yield* RoleBindingsRepo).listForSubject({ orgId: root.id, subjectType: "user", subjectId: user }),
        []
      )
    }))

  it.effect("a subject joins a workspace once; a second time is a UniqueViolation on members_org_subject_key", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const root = rootRow(0)
      yield* insertOrgs([root])
      const user = newUserId()
      const member = memberRow(root, user, 1)
      yield* repo.insert(member)
      assert.deepStrictEqual(
        yield* repo.find({ orgId: root.id, subjectType: "user", subjectId: user }),
        Option.some(member)
      )
      assert.isTrue(
        Option.isNone(yield* repo.find({ orgId: root.id, subjectType: "service_principal", subjectId: user }))
      )
      const error = yield* Effect.flip(repo.insert(memberRow(root, user, 2)))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "members_org_subject_key")
    }))

  it.effect("listByOrg lists a workspace's members newest first", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const root = rootRow(0)
      yield* insertOrgs([root])
      const members = [
        memberRow(root, newUserId(), 1),
        memberRow(root, newUserId(), 3),
        memberRow(root, newUserId(), 2)
      ]
      yield* Effect.forEach(members, repo.insert)
      const byJoinedDesc = [...members].sort((a, b) => b.joinedAt.getTime() - a.joinedAt.getTime())
      assert.deepStrictEqual(yield* repo.listByOrg(root.id), byJoinedDesc)
    }))

  it.effect("pageOrgsForSubject pages the subject's workspaces newest first", () =>
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const user = newUserId()
      const [older, newer, notMine] = [rootRow(1), rootRow(2), rootRow(3)]
      const child = childRow(older, 4)
      yield* insertOrgs([older, newer, notMine, child])
      yield* Effect.forEach(
        [
          memberRow(newer, user, 5),
          memberRow(older, user, 6),
          memberRow(child, user, 7),
          memberRow(notMine, newUserId(), 8)
        ],
        repo.insert
      )
      const mine = { subjectType: "user", subjectId: user } as const
      assert.deepStrictEqual(yield* repo.pageOrgsForSubject({ ...mine, limit: 10 }), [child, newer, older])
      assert.deepStrictEqual(yield* repo.pageOrgsForSubject({ ...mine, limit: 2, after: idPosition(child) }), [
        newer,
        older
      ])
      assert.deepStrictEqual(
        yield* repo.pageOrgsForSubject({ subjectType: "service_principal", subjectId: user, limit: 10 }),
        []
      )
    }))
})

describeContract("RoleBindingsRepo", repositories, (it) => {
  it.effect("the same role on the same scope twice is a UniqueViolation on role_bindings_grant_key", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const root = rootRow(0)
      yield* insertOrgs([root])
      const user = newUserId()
      const project = (scopeRef: string, scopeKind: ScopeKind = "project") => ({ scopeKind, scopeRef })
      const [projectA, projectB] = [newId(ProjectId, IdPrefix.project), newId(ProjectId, IdPrefix.project)]
      yield* insertBindings([
        bindingRow(root, user, "admin"),
        bindingRow(root, user, "project_admin", project(projectA)),
        bindingRow(root, user, "project_admin", project(projectB))
      ])
      for (
        const duplicate of [bindingRow(root, user, "admin"), bindingRow(root, user, "project_admin", project(projectA))]
      ) {
        const error = yield* Effect.flip(repo.insert(duplicate))
        assert.instanceOf(error, UniqueViolation)
        assert.strictEqual(error.constraint, "role_bindings_grant_key")
      }
    }))

  it.effect("lists a subject's bindings on one workspace, or on several in one call, in grant order", () =>
    Effect.gen(function*() {
      const repo = yield* RoleBindingsRepo
      const root = rootRow(0)
      const child = childRow(root, 1)
      yield* insertOrgs([root, child])
      const user = newUserId()
      const onChild = bindingRow(child, user, "viewer", { createdAt: at(2) })
      const onRoot = bindingRow(root, user, "owner", { createdAt: at(1) })
      const accountWide = bindingRow(root, user, "billing_admin", { scopeKind: "account", createdAt: at(3) })
      yield* insertBindings([onChild, onRoot, accountWide, bindingRow(child, newUserId(), "owner")])
      assert.deepStrictEqual(yield* repo.listForSubject({ orgId: child.id, subjectType: "user", subjectId: user }), [
        onChild
      ])
      assert.deepStrictEqual(yield* repo.listForSubject({ orgId: root.id, subjectType: "user", subjectId: user }), [
        onRoot,
        accountWide
      ])
      assert.deepStrictEqual(
        yield* repo.listForSubjectInOrgs({ orgIds: [child.id, root.id], subjectType: "user", subjectId: user }),
        [
          onRoot,
          onChild,
          accountWide
        ]
      )
      assert.deepStrictEqual(yield* repo.listForSubjectInOrgs({ orgIds: [], subjectType: "user", subjectId: user }), [])
      assert.deepStrictEqual(
        yield* repo.listForSubject({ orgId: child.id, subjectType: "service_principal", subjectId: user }),
        []
      )
    }))
})
