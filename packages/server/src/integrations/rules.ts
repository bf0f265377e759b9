/**
 * Pure rules of integrations: provider permission levels, the declared scope templates, and how a provider webhook
 * becomes `scm.*` event data (integrations-agents.md §2–3).
 */
import type { BranchEnvMap, PermissionLevel, ScmEventType } from "@cp/domain"

const LEVEL: Readonly<Record<string, number>> = { read: 1, write: 2, admin: 3 }

/** Whether `held` grants at least `wanted` (`write` covers `read`). */
export const levelCovers = (held: string | undefined, wanted: string): boolean =>
  held !== undefined && (LEVEL[held] ?? 0) >= (LEVEL[wanted] ?? Number.POSITIVE_INFINITY)

/** The first requested permission the installation does not grant at that level, if any. */
export const missingPermission = (
  held: Readonly<Record<string, string>>,
  wanted: Readonly<Record<string, string>>
): string | undefined => Object.entries(wanted).find(([name, level]) => !levelCovers(held[name], level))?.[0]

/** The permissions scmhost declares (GitHub's repository permissions), at the highest level each allows. */
export const SCMHOST_PERMISSIONS: Readonly<Record<string, PermissionLevel>> = {
  actions: "write",
  administration: "write",
  checks: "write",
  contents: "write",
  deployments: "write",
  issues: "write",
  metadata: "read",
  pull_requests: "write",
  statuses: "write",
  workflows: "write"
}

/** scmhost's declared scope templates (integrations-agents.md §2). */
export const declaredTemplates: Readonly<
  Record<string, {
    readonly displayName: string
    readonly description: string
    readonly permissions: Readonly<Record<string, PermissionLevel>>
  }>
> = {
  "repo-read": {
    displayName: "Repository read",
    description: "Read contents and metadata",
    permissions: { contents: "read", metadata: "read" }
  },
  "repo-write": {
    displayName: "Repository write",
    description: "Write contents, read metadata",
    permissions: { contents: "write", metadata: "read" }
  },
  "ci-status": {
    displayName: "CI status",
    description: "Write checks and commit statuses, read metadata",
    permissions: { checks: "write", statuses: "write", metadata: "read" }
  }
}

/** The `scm.*` data of one delivery for one linked project: the repository and commit it is about. */
export interface ScmFacts {
  readonly type: ScmEventType
  readonly repoExternalId: string
  readonly repoFullName: string
  readonly ref: string | null
  readonly sha: string | null
  readonly branch: string | null
  readonly sender: string | null
  readonly url: string | null
}

type Json = Readonly<Record<string, unknown>>
const obj = (value: unknown): Json =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Json : {}
const str = (value: unknown): string | null => typeof value === "string" ? value : null
const idOf = (value: unknown): string | null =>
  typeof value === "number" && Number.isSafeInteger(value) ? String(value) : typeof value === "string" ? value : null

const HEADS = "refs/heads/"
const branchOf = (ref: string | null) => ref !== null && ref.startsWith(HEADS) ? ref.slice(HEADS.length) : null

/** Why a verified delivery produces no `scm.*` event. */
export type Unsupported = { readonly skip: "unsupported_event" | "missing_repository" }

/**
 * What a provider webhook (`x-scmhost-event` and its parsed payload) says, as `scm.*` facts: `push`;
 * `pull_request` `opened`, or `closed` with `merged: true`; `check_run` `completed`; `release` `published`.
 */
export const scmFactsOf = (event: string, payload: Json): ScmFacts | Unsupported => {
  const repository = obj(payload["repository"])
  const repoExternalId = idOf(repository["id"])
  const repoFullName = str(repository["full_name"])
  if (repoExternalId === null || repoFullName === null) return { skip: "missing_repository" }
  const sender = str(obj(payload["sender"])["login"])
  const action = str(payload["action"])
  const base = { repoExternalId, repoFullName, sender }
  switch (event) {
    case "push": {
      const ref = str(payload["ref"])
      return {
        ...base,
        type: "scm.push",
        ref,
        sha: str(payload["after"]),
        branch: branchOf(ref),
        url: str(payload["compare"]) ?? str(repository["html_url"])
      }
    }
    case "pull_request": {
      const pull = obj(payload["pull_request"])
      const head = obj(pull["head"])
      if (action === "opened") {
        const branch = str(head["ref"])
        return {
          ...base,
          type: "scm.pull_request.opened",
          ref: branch === null ? null : `${HEADS}${branch}`,
          sha: str(head["sha"]),
          branch,
          url: str(pull["html_url"])
        }
      }
      if (action === "closed" && pull["merged"] === true) {
        // A merge lands on the base branch: that is the branch whose environment it concerns.
        const branch = str(obj(pull["base"])["ref"])
        return {
          ...base,
          type: "scm.pull_request.merged",
          ref: branch === null ? null : `${HEADS}${branch}`,
          sha: str(pull["merge_commit_sha"]) ?? str(head["sha"]),
          branch,
          url: str(pull["html_url"])
        }
      }
      return { skip: "unsupported_event" }
    }
    case "check_run": {
      if (action !== "completed") return { skip: "unsupported_event" }
      const run = obj(payload["check_run"])
      const branch = str(obj(run["check_suite"])["head_branch"])
      return {
        ...base,
        type: "scm.check.completed",
        ref: branch === null ? null : `${HEADS}${branch}`,
        sha: str(run["head_sha"]),
        branch,
        url: str(run["html_url"])
      }
    }
    case "release": {
      if (action !== "published") return { skip: "unsupported_event" }
      const release = obj(payload["release"])
      const tag = str(release["tag_name"])
      return {
        ...base,
        type: "scm.release.published",
        ref: tag === null ? null : `refs/tags/${tag}`,
        sha: str(release["target_commitish"]),
        branch: null,
        url: str(release["html_url"])
      }
    }
    default:
      return { skip: "unsupported_event" }
  }
}

/** The environment a branch maps to, or null. */
export const environmentFor = (map: BranchEnvMap, branch: string | null): string | null =>
  branch === null ? null : Object.hasOwn(map, branch) ? map[branch] ?? null : null

/** The installation id a payload names (`installation.id`), if any. */
export const installationIdOf = (payload: Json): string | null => idOf(obj(payload["installation"])["id"])

/** The connection status an `installation` webhook moves to, if it moves one. */
export const installationTransition = (action: string | null): "revoked" | "suspended" | "active" | undefined =>
  action === "deleted" ? "revoked" : action === "suspend" ? "suspended" : action === "unsuspend" ? "active" : undefined
