/** The API's route shapes, so the edge can tell "no such path" (404) from "path exists, wrong method" (405). */
import { HttpApi, type HttpApiGroup } from "effect/http-api"

export interface RouteTable {
  /** The methods served at this path, empty when no route matches it. */
  readonly methodsAt: (path: string) => ReadonlySet<string>
}

const toPattern = (path: string): RegExp =>
  new RegExp(`^${path.split("/").map((segment) => segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("/")}/?$`)

/** Builds the table once from the API definition (plus routes served beside it, such as the docs). */
export const makeRouteTable = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  extra: ReadonlyArray<readonly [method: string, path: string]> = []
): RouteTable => {
  const routes: Array<{ readonly pattern: RegExp; readonly method: string }> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => routes.push({ pattern: toPattern(endpoint.path), method: endpoint.method })
  })
  for (const [method, path] of extra) routes.push({ pattern: toPattern(path), method })
  return {
    methodsAt: (path) => new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))
  }
}
