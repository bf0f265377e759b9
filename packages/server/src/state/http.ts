/**
 * Handlers of the run-state plane part II. The Terraform methods speak the raw wire: the state's bytes, an empty 200,
 * or the lock holder's LockInfo as the body of a 423 or 409; their other errors (401, 403, 404, 422) are enveloped.
 */
import { actorInWorkspace, ControlPlaneApi, CurrentWorkspace, type ProjectId } from "@cp/domain"
import { Effect, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { RefsService } from "./refs.ts"
import { type StateAddress, type TfAnswer, TfStateService } from "./tfstate.ts"

const addressOf = (params: {
  readonly projectId: ProjectId
  readonly component: string
  readonly environment: string
}) =>
  Effect.map(actorInWorkspace, ({ actor, workspace }) => ({
    actor,
    at: {
      orgId: workspace.organization.id,
      projectId: params.projectId,
      component: params.component,
      environment: params.environment
    } satisfies StateAddress
  }))

/** The raw answer of a Terraform method. */
const rawAnswer = (answer: TfAnswer): HttpServerResponse.HttpServerResponse => {
  switch (answer._tag) {
    case "Done":
      return HttpServerResponse.empty({ status: 200 })
    case "Locked":
      return HttpServerResponse.text(answer.holder, { status: 423, contentType: "application/json" })
    case "HeldByAnother":
      return HttpServerResponse.text(answer.holder, { status: 409, contentType: "application/json" })
  }
}

// The edge refuses an oversized body as it streams in (the route's own cap), which arrives here as a defect.
const bodyBytes = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.map(Effect.orDie(request.arrayBuffer), (buffer) => new Uint8Array(buffer))
const bodyText = (request: HttpServerRequest.HttpServerRequest) => Effect.orDie(request.text)

export const TfStateHttp = HttpApiBuilder.group(ControlPlaneApi, "tfstate", (handlers) =>
  Effect.gen(function*() {
    const tfstate = yield* TfStateService
    return handlers
      .handle("list", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          Effect.map(tfstate.list(workspace.organization.id, params.projectId), (states) => ({ states }))))
      .handle("read", ({ params, query }) =>
        Effect.flatMap(addressOf(params), ({ at }) =>
          Effect.map(
            tfstate.read(at, query.version),
            Option.match({
              onNone: () =>
                HttpServerResponse.empty({ status: 404 }),
              onSome: (bytes) =>
                HttpServerResponse.uint8Array(bytes, { contentType: "application/json" })
            })
          )))
      .handle("write", ({ params, query, request }) =>
        Effect.flatMap(addressOf(params), ({ actor, at }) =>
          Effect.flatMap(bodyBytes(request), (content) =>
            Effect.map(tfstate.write(actor, at, query.ID, content), rawAnswer))))
      .handle("remove", ({ params, query }) =>
        Effect.flatMap(addressOf(params), ({ actor, at }) =>
          Effect.map(tfstate.remove(actor, at, query.ID), rawAnswer)))
      .handle("lock", ({ params, request }) =>
        Effect.flatMap(addressOf(params), ({ actor, at }) =>
          Effect.flatMap(bodyText(request), (body) =>
            Effect.map(tfstate.lock(actor, at, body), rawAnswer))))
      .handle("unlock", ({ params, request }) =>
        Effect.flatMap(addressOf(params), ({ actor, at }) =>
          Effect.flatMap(bodyText(request), (body) =>
            Effect.map(tfstate.unlock(actor, at, body), rawAnswer))))
      .handle("versions", ({ params }) =>
        Effect.flatMap(addressOf(params), ({ at }) =>
          Effect.map(tfstate.versions(at), (versions) => ({ versions }))))
  }))

const projectOf = (params: { readonly projectId: ProjectId }) =>
  Effect.map(actorInWorkspace, ({ actor, workspace }) => ({
    actor,
    at: { orgId: workspace.organization.id, projectId: params.projectId }
  }))

/** Refs and the catalog head. */
export const RefsHttp = HttpApiBuilder.group(ControlPlaneApi, "refs", (handlers) =>
  Effect.gen(function*() {
    const refs = yield* RefsService
    return handlers
      .handle("list", ({ params, query }) =>
        Effect.flatMap(projectOf(params), ({ at }) =>
          Effect.map(refs.list(at, query.prefix ?? ""), (list) => ({ refs: list }))))
      .handle("get", ({ params }) =>
        Effect.flatMap(projectOf(params), ({ at }) =>
          Effect.map(refs.get(at, params.name), (ref) => ({ ref }))))
      .handle("set", ({ params, payload }) =>
        Effect.flatMap(projectOf(params), ({ actor, at }) =>
          Effect.map(refs.set(actor, at, params.name, payload), (ref) => ({ ref }))))
      .handle("delete", ({ params, query }) =>
        Effect.flatMap(projectOf(params), ({ actor, at }) =>
          Effect.as(refs.remove(actor, at, params.name, query.expectedVersion), { deleted: true })))
      .handle("publish", ({ params, payload }) =>
        Effect.flatMap(projectOf(params), ({ actor, at }) =>
          Effect.map(refs.publish(actor, at, payload), (head) => ({ head }))))
      .handle("head", ({ params }) =>
        Effect.flatMap(projectOf(params), ({ at }) =>
          Effect.map(refs.head(at), (head) => ({ head }))))
      .handle("history", ({ params, query }) =>
        Effect.flatMap(projectOf(params), ({ at }) =>
          refs.history(at, query)))
  }))

/** The workspace catalog read model; the project-scoped route answers 501 as the spec says. */
export const CatalogHttp = HttpApiBuilder.group(ControlPlaneApi, "catalog", (handlers) =>
  Effect.gen(function*() {
    const refs = yield* RefsService
    return handlers
      .handle("entities", ({ query }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          Effect.map(refs.entities(workspace.organization.id, query), (entities) => ({ entities }))))
      .handle("projectEntities", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          refs.projectEntities(workspace.organization.id, params.projectId)))
  }))

/** The project's inbound `scm.*` activity. */
export const TriggersHttp = HttpApiBuilder.group(ControlPlaneApi, "triggers", (handlers) =>
  Effect.gen(function*() {
    const refs = yield* RefsService
    return handlers.handle("list", ({ params, query }) =>
      Effect.flatMap(projectOf(params), ({ at }) => refs.triggers(at, query)))
  }))

/** Each project's repository at a glance. */
export const RepoFacetsHttp = HttpApiBuilder.group(ControlPlaneApi, "repoFacets", (handlers) =>
  Effect.gen(function*() {
    const refs = yield* RefsService
    return handlers
      .handle("list", () =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          Effect.map(refs.repoFacets(workspace.organization.id), (repoFacets) => ({ repoFacets }))))
      .handle("get", ({ params }) =>
        Effect.flatMap(CurrentWorkspace, (workspace) =>
          Effect.flatMap(refs.repoFacets(workspace.organization.id, params.projectId), ([repoFacet]) =>
            repoFacet === undefined
              ? Effect.die(new Error("a project's facet is always there once the project is found"))
              : Effect.succeed({ repoFacet }))))
  }))
