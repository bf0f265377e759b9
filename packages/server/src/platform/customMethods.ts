/**
 * Methods an API description cannot carry (contract §4: Terraform's `http` backend sends `LOCK` and `UNLOCK`): the
 * server takes `LOCK <path>` as `POST <path>:lock` and `UNLOCK <path>` as `POST <path>:unlock` where the API has
 * that route, before anything else sees the request. Anywhere else they stay as sent and the edge answers 405.
 */
import { ControlPlaneApi } from "@cp/domain"
import { canonicalAliasPath } from "./alias.ts"
import { makeRouteTable } from "./routeTable.ts"

/** The custom methods and the verb of the route that serves each. */
const VERBS: Readonly<Record<string, string>> = { LOCK: "lock", UNLOCK: "unlock" }

/** Whether a method is one of the custom methods (405 where no route serves it). */
export const isCustomMethod = (method: string): boolean => Object.hasOwn(VERBS, method.toUpperCase())

const verbRoutes = makeRouteTable(
  ControlPlaneApi,
  [],
  (endpoint) => endpoint.method === "POST" && Object.values(VERBS).some((verb) => endpoint.path.endsWith(`:${verb}`))
)

/** The URL a custom-method request is served at (as a POST), or undefined when no route takes it. */
export const customMethodUrl = (method: string, url: string): string | undefined => {
  const verb = VERBS[method.toUpperCase()]
  if (verb === undefined) return undefined
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  const target = `${path}:${verb}`
  return verbRoutes.endpointAt("POST", canonicalAliasPath(target) ?? target) === undefined
    ? undefined
    : target + (q === -1 ? "" : url.slice(q))
}
