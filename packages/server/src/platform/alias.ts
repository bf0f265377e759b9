/** The `/v1/workspaces` alias (contract §4): same routes, plus `workspaceId` next to every `orgId` in JSON. */
import { OrgId } from "@cp/domain"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import type { WorkspaceResolver } from "./workspaceResolver.ts"

const ALIAS = /^\/v1\/workspaces(?=\/|$)/

/** The canonical path of an aliased one, or undefined when the path is not on the alias. */
export const canonicalAliasPath = (path: string): string | undefined =>
  ALIAS.test(path) ? path.replace(ALIAS, "/v1/organizations") : undefined

const isOrgId = Schema.is(OrgId)

const collectOrgIds = (value: unknown, into: Set<OrgId>): void => {
  if (Array.isArray(value)) {
    for (const item of value) collectOrgIds(item, into)
  } else if (value !== null && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) {
      if (key === "orgId" && isOrgId(inner)) into.add(inner)
      else collectOrgIds(inner, into)
    }
  }
}

const withWorkspaceIds = (value: unknown, publicIds: ReadonlyMap<string, string>): unknown => {
  if (Array.isArray(value)) return value.map((item) => withWorkspaceIds(item, publicIds))
  if (value === null || typeof value !== "object") return value
  const out: Record<string, unknown> = {}
  for (const [key, inner] of Object.entries(value)) {
    out[key] = withWorkspaceIds(inner, publicIds)
    if (key === "orgId" && typeof inner === "string") out.workspaceId = publicIds.get(inner) ?? null
  }
  return out
}

/** The response as the alias answers it: every `orgId` in the JSON body gains its `workspaceId`. */
export const aliasResponse = Effect.fnUntraced(function*(
  workspaces: WorkspaceResolver["Service"],
  response: HttpServerResponse.HttpServerResponse,
  text: string | undefined
) {
  if (text === undefined || !text.includes("\"orgId\"")) return response
  const json: unknown = JSON.parse(text)
  const orgIds = new Set<OrgId>()
  collectOrgIds(json, orgIds)
  const publicIds = yield* workspaces.publicIds([...orgIds])
  return HttpServerResponse.jsonUnsafe(withWorkspaceIds(json, publicIds), {
    status: response.status,
    headers: response.headers
  })
})
