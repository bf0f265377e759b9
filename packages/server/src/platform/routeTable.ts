/** The API's route shapes, so the edge can tell "no such path" (404) from "path exists, wrong method" (405). */
import { HttpApi, type HttpApiEndpoint, type HttpApiGroup } from "effect/http-api"

export interface RouteTable {
  /** The methods served at this path, empty when no route matches it. */
  readonly methodsAt: (path: string) => ReadonlySet<string>
  /** The API endpoint that serves this method and path (a literal segment wins over a parameter), if any. */
  readonly endpointAt: (method: string, path: string) => HttpApiEndpoint.Top | undefined
}

/** One served route; the docs and other routes beside the API have no endpoint. */
interface Route {
  readonly pattern: RegExp
  readonly method: string
  readonly endpoint?: HttpApiEndpoint.Top
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** `:param`, or `:param:verb` (a custom method such as `:jobId:claim`): the parameter, then the literal verb. */
const paramSegment = (segment: string): string => {
  const verb = segment.indexOf(":", 1)
  return verb === -1 ? "[^/]+" : `[^/]+${escapeRegExp(segment.slice(verb))}`
}

const toPattern = (path: string): RegExp =>
  new RegExp(
    `^${
      path.split("/").map((segment) => segment.startsWith(":") ? paramSegment(segment) : escapeRegExp(segment)).join(
        "/"
      )
    }/?$`
  )

/**
 * Builds the table once from the API definition (plus routes served beside it, such as the docs); `where`
 * keeps only some endpoints, so a per-request question about a few routes tests only their patterns.
 */
export const makeRouteTable = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  extra: ReadonlyArray<readonly [method: string, path: string]> = [],
  where: (endpoint: HttpApiEndpoint.Top) => boolean = () => true
): RouteTable => {
  const routes: Array<Route> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (where(endpoint)) routes.push({ pattern: toPattern(endpoint.path), method: endpoint.method, endpoint })
    }
  })
  for (const [method, path] of extra) routes.push({ pattern: toPattern(path), method })
  const parameters = (path: string) => path.split("/").filter((segment) => segment.startsWith(":")).length
  return {
    methodsAt: (path) => new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method)),
    endpointAt: (method, path) =>
      routes
        .flatMap(({ endpoint, ...route }) =>
          endpoint !== undefined && route.method === method && route.pattern.test(path) ? [endpoint] : []
        )
        .sort((a, b) => parameters(a.path) - parameters(b.path))[0]
  }
}
