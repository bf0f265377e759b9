/**
 * Configuration end to end over real HTTP and the typed client (spec: Configuration resource rows, "Configuration
 * (under {scope})", Events; contract §4 data shapes, validation errors, 405 for the missing DELETE): settings and
 * feature flags at workspace, project and environment scope, every error, the resolution order environment → project →
 * workspace → account → default, the account guardrail at every scope, masked values hidden from a viewer, and events
 * and audit entries that carry no values. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 */
import {
  AuditEntry,
  Conflict,
  Environment,
  EnvironmentId,
  FeatureFlag,
  type FeatureFlagId,
  NotFound,
  Organization,
  ProjectId,
  ResolvedSetting,
  Setting
} from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs as cpctl, printedAs } from "./support/cli.ts"
import { failed, invalidFields, ISO_MS, nextCursor, ok, type Res, ULID } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, freshEmail, signIn } from "./support/session.ts"

const SETTING_KEYS = [
  "createdAt",
  "description",
  "environmentId",
  "id",
  "key",
  "orgId",
  "projectId",
  "scopeKind",
  "updatedAt",
  "value"
]
const FLAG_KEYS = [
  "createdAt",
  "description",
  "enabled",
  "environmentId",
  "id",
  "key",
  "orgId",
  "projectId",
  "scopeKind",
  "updatedAt",
  "value"
]
const key = (prefix = "k") => `${prefix}.${randomUUID().slice(0, 8)}`

const settingOf = (res: Res) => ok(res, { setting: Setting }).setting
const settingsOf = (res: Res) => ok(res, { settings: Schema.Array(Setting) }).settings
const resolvedOf = (res: Res) => ok(res, { setting: ResolvedSetting }).setting
const flagOf = (res: Res) => ok(res, { featureFlag: FeatureFlag }).featureFlag
const printedSetting = (run: { readonly stdout: string }) => printedAs(run, ResolvedSetting)

/**
 * The flag routes of one of the three scope groups of the typed client, with that group's params: the three groups
 * have the same endpoints under different paths.
 */
interface FlagRoutes<P> {
  readonly createFeatureFlag: (
    request: { readonly params: P; readonly payload: { readonly key: string; readonly enabled: boolean } }
  ) => Effect.Effect<{ readonly featureFlag: FeatureFlag }, unknown>
  readonly updateFeatureFlag: (
    request: {
      readonly params: P & { readonly flagId: FeatureFlagId }
      readonly payload: { readonly enabled: boolean }
    }
  ) => Effect.Effect<{ readonly featureFlag: FeatureFlag }, unknown>
  readonly listFeatureFlags: (
    request: { readonly params: P; readonly query: {} }
  ) => Effect.Effect<{ readonly data: { readonly featureFlags: ReadonlyArray<FeatureFlag> } }, unknown>
}

/** Creates, disables and lists a flag through one scope group of the typed client. */
const flagRoundTrip = <P extends object>(group: FlagRoutes<P>, params: P, key: string) =>
  Effect.gen(function*() {
    const { featureFlag } = yield* group.createFeatureFlag({ params, payload: { key, enabled: true } })
    const patched = yield* group.updateFeatureFlag({
      params: { ...params, flagId: featureFlag.id },
      payload: { enabled: false }
    })
    assert.isFalse(patched.featureFlag.enabled)
    const flags = yield* group.listFeatureFlags({ params, query: {} })
    assert.deepStrictEqual(flags.data.featureFlags.map((f) => f.id), [featureFlag.id])
  })

for (const backend of sqlBackends) {
  layer(Layer.merge(testServerOver(databaseLayer(backend)), NodeServices.layer), { excludeTestServices: true })(
    `configuration [${backend}]`,
    (it) => {
      /** A fresh user with its account root, a child workspace under it, and a project + environment in each. */
      const world = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const email = freshEmail("cfg")
        const session = yield* signIn(baseUrl, { email })
        const token = session.token
        const as = (method: string, path: string, body?: unknown) =>
          call(baseUrl, method, path, body === undefined ? { token } : { token, body })
        const [root] = ok(yield* as("GET", "/v1/organizations"), { organizations: Schema.Array(Organization) })
          .organizations
        assert.isDefined(root)
        const child = ok(yield* as("POST", "/v1/organizations", { name: `Child ${randomUUID().slice(0, 8)}` }), {
          organization: Organization
        }).organization
        const scopesOf = Effect.fnUntraced(function*(orgId: string) {
          const ws = `/v1/organizations/${orgId}`
          const projectId = yield* createProject(baseUrl, token, orgId)
          const prj = `${ws}/projects/${projectId}`
          const environment = ok(yield* as("POST", `${prj}/environments`, { name: `E ${randomUUID().slice(0, 8)}` }), {
            environment: Environment
          }).environment
          return {
            orgId,
            projectId,
            environmentId: environment.id,
            ws,
            prj,
            env: `${prj}/environments/${environment.id}`
          }
        })
        return {
          baseUrl,
          session,
          token,
          as,
          root,
          rootScopes: yield* scopesOf(root.id),
          child: yield* scopesOf(child.id)
        }
      })

      /** The child workspace's three scopes: their path prefixes and scope kinds. */
      const childScopes = Effect.map(world, (w) => ({
        w,
        scopes: [[w.child.ws, "organization"], [w.child.prj, "project"], [w.child.env, "environment"]] as const
      }))

      it.effect("a created setting has the exact wire shape at every scope; the list shows exactly that scope", () =>
        Effect.gen(function*() {
          const { scopes, w } = yield* childScopes
          const { child } = w
          for (const [prefix, scopeKind] of scopes) {
            const created = settingOf(
              yield* w.as("POST", `${prefix}/config/settings`, { key: key(), value: { a: 1 }, description: "d" })
            )
            assert.deepStrictEqual(Object.keys(created).sort(), SETTING_KEYS)
            assert.match(created.id, new RegExp(`^stg_${ULID}$`))
            assert.strictEqual(created.orgId, child.orgId)
            assert.strictEqual(created.scopeKind, scopeKind)
            assert.strictEqual(created.projectId, scopeKind === "organization" ? null : child.projectId)
            assert.strictEqual(created.environmentId, scopeKind === "environment" ? child.environmentId : null)
            assert.deepStrictEqual(created.value, { a: 1 })
            assert.match(created.createdAt, ISO_MS)
            const settings = settingsOf(yield* w.as("GET", `${prefix}/config/settings`))
            assert.deepStrictEqual(settings.map((s) => s.id), [created.id])
          }
        }))

      it.effect("a duplicate setting key at the same scope is 409", () =>
        Effect.gen(function*() {
          const { scopes, w } = yield* childScopes
          for (const [prefix] of scopes) {
            const k = key()
            settingOf(yield* w.as("POST", `${prefix}/config/settings`, { key: k, value: { a: 1 } }))
            failed(yield* w.as("POST", `${prefix}/config/settings`, { key: k, value: 2 }), 409, "conflict")
          }
        }))

      it.effect("patching a setting replaces its value and description and keeps createdAt", () =>
        Effect.gen(function*() {
          const { scopes, w } = yield* childScopes
          for (const [prefix] of scopes) {
            const created = settingOf(
              yield* w.as("POST", `${prefix}/config/settings`, { key: key(), value: { a: 1 }, description: "d" })
            )
            const patched = settingOf(
              yield* w.as("PATCH", `${prefix}/config/settings/${created.id}`, { value: [1, 2], description: null })
            )
            assert.deepStrictEqual(patched.value, [1, 2])
            assert.isNull(patched.description)
            assert.strictEqual(patched.createdAt, created.createdAt)
          }
        }))

      it.effect("settings and flags have no DELETE: 405", () =>
        Effect.gen(function*() {
          const { scopes, w } = yield* childScopes
          for (const [prefix] of scopes) {
            const created = settingOf(yield* w.as("POST", `${prefix}/config/settings`, { key: key(), value: 1 }))
            failed(yield* w.as("DELETE", `${prefix}/config/settings/${created.id}`), 405, "unsupported")
            failed(yield* w.as("DELETE", `${prefix}/config/settings`), 405, "unsupported")
            failed(yield* w.as("DELETE", `${prefix}/config/feature-flags`), 405, "unsupported")
          }
        }))

      it.effect("settings: bad valueType and visibility, a value of another type, a bad or missing key: 422", () =>
        Effect.gen(function*() {
          const w = yield* world
          const path = `${w.child.ws}/config/settings`
          const bad = invalidFields(
            yield* w.as("POST", path, { key: key(), value: 1, valueType: "int", visibility: "secret" })
          )
          assert.hasAllKeys(bad, ["valueType", "visibility"])
          const mismatch = invalidFields(yield* w.as("POST", path, { key: key(), value: "x", valueType: "number" }))
          assert.hasAllKeys(mismatch, ["value"])
          failed(yield* w.as("POST", path, { key: "bad key!", value: 1 }), 422, "validation_failed")
          failed(yield* w.as("POST", path, { value: 1 }), 422, "validation_failed")
        }))

      it.effect("settings: valueType and visibility are enforced on every patch but never echoed", () =>
        Effect.gen(function*() {
          const w = yield* world
          const path = `${w.child.ws}/config/settings`
          const created = settingOf(
            yield* w.as("POST", path, { key: key(), value: 3, valueType: "number", visibility: "public" })
          )
          assert.notProperty(created, "valueType")
          assert.notProperty(created, "visibility")
          // An omitted valueType keeps the stored declaration: a string no longer fits.
          assert.hasAllKeys(invalidFields(yield* w.as("PATCH", `${path}/${created.id}`, { value: "three" })), ["value"])
          // Changing the type checks the stored value against it.
          failed(yield* w.as("PATCH", `${path}/${created.id}`, { valueType: "boolean" }), 422, "validation_failed")
          ok(yield* w.as("PATCH", `${path}/${created.id}`, { valueType: "string", value: "three" }))
          failed(yield* w.as("PATCH", `${path}/${created.id}`, { visibility: "nope" }), 422, "validation_failed")
        }))

      it.effect("settings: each valueType takes values of its type", () =>
        Effect.gen(function*() {
          const w = yield* world
          const path = `${w.child.ws}/config/settings`
          for (
            const [valueType, value] of [["string", "s"], ["boolean", true], ["json", null], ["json", {
              x: [1]
            }]] as const
          ) {
            ok(yield* w.as("POST", path, { key: key(), value, valueType }))
          }
        }))

      it.effect("settings: `overridable` is only for an account root's workspace scope (422 elsewhere)", () =>
        Effect.gen(function*() {
          const w = yield* world
          const path = `${w.child.ws}/config/settings`
          assert.hasAllKeys(invalidFields(yield* w.as("POST", path, { key: key(), value: 1, overridable: false })), [
            "overridable"
          ])
          failed(
            yield* w.as("POST", `${w.rootScopes.prj}/config/settings`, { key: key(), value: 1, overridable: false }),
            422,
            "validation_failed"
          )
        }))

      it.effect("a setting or flag of another scope is 404 at this one; a malformed setting id is 404", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child } = w
          const otherSetting = settingOf(yield* w.as("POST", `${child.prj}/config/settings`, { key: key(), value: 1 }))
          failed(yield* w.as("PATCH", `${child.ws}/config/settings/${otherSetting.id}`, { value: 2 }), 404, "not_found")
          failed(
            yield* w.as("PATCH", `${child.env}/config/settings/${otherSetting.id}`, { value: 2 }),
            404,
            "not_found"
          )
          const flag = flagOf(yield* w.as("POST", `${child.ws}/config/feature-flags`, { key: key(), enabled: true }))
          failed(
            yield* w.as("PATCH", `${child.prj}/config/feature-flags/${flag.id}`, { enabled: false }),
            404,
            "not_found"
          )
          failed(yield* w.as("PATCH", `${child.ws}/config/settings/stg_nope`, { value: 2 }), 404, "not_found")
        }))

      it.effect("a project or environment of another workspace is not there: 404 on every configuration route", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child, rootScopes } = w
          const foreignProject = `${child.ws}/projects/${rootScopes.projectId}`
          failed(yield* w.as("GET", `${foreignProject}/config/settings`), 404, "not_found")
          failed(
            yield* w.as("POST", `${foreignProject}/config/feature-flags`, { key: key(), enabled: true }),
            404,
            "not_found"
          )
          failed(
            yield* w.as("GET", `${child.prj}/environments/${rootScopes.environmentId}/config/settings`),
            404,
            "not_found"
          )
          failed(yield* w.as("GET", `${foreignProject}/config/settings/resolve?key=ui.theme`), 404, "not_found")
          ok(yield* w.as("GET", `${child.prj}/config/settings/resolve?key=ui.theme`))
        }))

      /** The world, a fresh key, and reads of `GET {prefix}/config/settings/resolve?key=…` (that key by default). */
      const resolving = Effect.gen(function*() {
        const w = yield* world
        const k = key("walk")
        const resolve = (prefix: string, which = k) =>
          w.as("GET", `${prefix}/config/settings/resolve?key=${encodeURIComponent(which)}`)
        const setAt = (prefix: string, value: number, extra: object = {}) =>
          Effect.map(w.as("POST", `${prefix}/config/settings`, { key: k, value, ...extra }), settingOf)
        return { w, k, resolve, setAt }
      })

      it.effect("resolve: no key is 422, a key set nowhere 404; a built-in key resolves to its default", () =>
        Effect.gen(function*() {
          const { resolve, w } = yield* resolving
          failed(yield* w.as("GET", `${w.child.ws}/config/settings/resolve`), 422, "validation_failed")
          failed(yield* resolve(w.child.env), 404, "not_found")
          const builtin = resolvedOf(yield* resolve(w.child.env, "ui.theme"))
          assert.deepInclude(builtin, {
            id: null,
            value: "system",
            overridable: true,
            inheritedFrom: { scopeKind: "default" }
          })
        }))

      it.effect("resolve walks environment, project, workspace, account: the nearest scope holding the key wins", () =>
        Effect.gen(function*() {
          const { resolve, setAt, w } = yield* resolving
          const { child, rootScopes } = w
          const account = yield* setAt(rootScopes.ws, 1)
          let got = resolvedOf(yield* resolve(child.env))
          assert.deepInclude(got, {
            id: account.id,
            value: 1,
            overridable: true,
            inheritedFrom: { scopeKind: "account" }
          })
          const workspace = yield* setAt(child.ws, 2)
          got = resolvedOf(yield* resolve(child.env))
          assert.deepInclude(got, { id: workspace.id, value: 2, inheritedFrom: { scopeKind: "organization" } })
          const project = yield* setAt(child.prj, 3)
          got = resolvedOf(yield* resolve(child.env))
          assert.deepInclude(got, { id: project.id, value: 3, inheritedFrom: { scopeKind: "project" } })
          assert.deepInclude(resolvedOf(yield* resolve(child.prj)), { value: 3 })
          assert.deepInclude(resolvedOf(yield* resolve(child.ws)), { value: 2 })
          const environment = yield* setAt(child.env, 4)
          got = resolvedOf(yield* resolve(child.env))
          assert.deepInclude(got, {
            id: environment.id,
            value: 4,
            overridable: true,
            inheritedFrom: { scopeKind: "environment" }
          })
          assert.deepStrictEqual(Object.keys(got).sort(), [...SETTING_KEYS, "inheritedFrom", "overridable"].sort())
        }))

      it.effect("a locked account setting wins at every scope of child and root; unlocked, the lower ones win", () =>
        Effect.gen(function*() {
          const { resolve, setAt, w } = yield* resolving
          const { child, rootScopes } = w
          const account = yield* setAt(rootScopes.ws, 1)
          yield* setAt(child.ws, 2)
          yield* setAt(child.prj, 3)
          yield* setAt(child.env, 4)
          ok(yield* w.as("PATCH", `${rootScopes.ws}/config/settings/${account.id}`, { overridable: false }))
          for (const prefix of [child.env, child.prj, child.ws]) {
            assert.deepInclude(resolvedOf(yield* resolve(prefix)), {
              id: account.id,
              value: 1,
              overridable: false,
              inheritedFrom: { scopeKind: "account" }
            })
          }
          yield* setAt(rootScopes.env, 9)
          yield* setAt(rootScopes.prj, 8)
          for (const prefix of [rootScopes.env, rootScopes.prj, rootScopes.ws]) {
            assert.deepInclude(resolvedOf(yield* resolve(prefix)), {
              id: account.id,
              value: 1,
              overridable: false,
              inheritedFrom: { scopeKind: "organization" }
            })
          }
          // Unlocked again, the lower scopes win.
          ok(yield* w.as("PATCH", `${rootScopes.ws}/config/settings/${account.id}`, { overridable: true }))
          assert.deepInclude(resolvedOf(yield* resolve(child.env)), { value: 4 })
          assert.deepInclude(resolvedOf(yield* resolve(rootScopes.env)), { value: 9 })
        }))

      it.effect("a guardrail created locked wins over a lower scope's value", () =>
        Effect.gen(function*() {
          const { resolve, w } = yield* resolving
          const locked = key("locked")
          ok(
            yield* w.as("POST", `${w.rootScopes.ws}/config/settings`, {
              key: locked,
              value: "root",
              overridable: false
            })
          )
          ok(yield* w.as("POST", `${w.child.env}/config/settings`, { key: locked, value: "env" }))
          assert.deepInclude(resolvedOf(yield* resolve(w.child.env, locked)), { value: "root", overridable: false })
        }))

      /** The child's three scopes, and a viewer of the child workspace reading with its own token. */
      const withViewer = Effect.gen(function*() {
        const { scopes, w } = yield* childScopes
        const viewer = yield* signIn(w.baseUrl, { email: freshEmail("viewer") })
        yield* seedMember(w.child.orgId, viewer.user.id, "viewer")
        const asViewer = (path: string) => call(w.baseUrl, "GET", path, { token: viewer.token })
        return { w, scopes, viewer, asViewer }
      })

      it.effect("a masked value is hidden from a viewer (value null, masked true) and shown to writers", () =>
        Effect.gen(function*() {
          const { asViewer, scopes, w } = yield* withViewer
          for (const [prefix] of scopes) {
            const k = key("masked")
            const created = settingOf(
              yield* w.as("POST", `${prefix}/config/settings`, { key: k, value: "hunter2", visibility: "masked" })
            )
            // Writers get the value, marked masked so a client can keep it hidden until asked.
            assert.deepInclude(created, { value: "hunter2", masked: true })
            const seen = settingsOf(yield* asViewer(`${prefix}/config/settings`)).find((s) => s.id === created.id)
            assert.deepInclude(seen, { value: null, masked: true })
            const resolved = resolvedOf(yield* asViewer(`${prefix}/config/settings/resolve?key=${k}`))
            assert.deepInclude(resolved, { value: null, masked: true })
            assert.notInclude(JSON.stringify(resolved), "hunter2")
            // The owner (write permission) sees it.
            assert.strictEqual(
              resolvedOf(yield* w.as("GET", `${prefix}/config/settings/resolve?key=${k}`)).value,
              "hunter2"
            )
          }
        }))

      it.effect("a viewer cannot write settings at any scope: 403", () =>
        Effect.gen(function*() {
          const { scopes, viewer, w } = yield* withViewer
          for (const [prefix] of scopes) {
            failed(
              yield* call(w.baseUrl, "POST", `${prefix}/config/settings`, {
                token: viewer.token,
                body: { key: key(), value: 1 }
              }),
              403,
              "forbidden"
            )
          }
        }))

      it.effect("internal (the default) values are readable by a viewer", () =>
        Effect.gen(function*() {
          const { asViewer, w } = yield* withViewer
          const plain = settingOf(yield* w.as("POST", `${w.child.ws}/config/settings`, { key: key(), value: 5 }))
          assert.strictEqual(
            settingsOf(yield* asViewer(`${w.child.ws}/config/settings`)).find((s) => s.id === plain.id)?.value,
            5
          )
        }))

      it.effect("feature flags: create, list, patch, 409, 422, 404 at every scope", () =>
        Effect.gen(function*() {
          const { scopes, w } = yield* childScopes
          for (const [prefix] of scopes) {
            const path = `${prefix}/config/feature-flags`
            const k = key("flag")
            const flag = flagOf(
              yield* w.as("POST", path, { key: k, enabled: true, value: { pct: 10 }, description: "rollout" })
            )
            assert.deepStrictEqual(Object.keys(flag).sort(), FLAG_KEYS)
            assert.match(flag.id, new RegExp(`^flg_${ULID}$`))
            assert.deepInclude(flag, { key: k, enabled: true, value: { pct: 10 }, description: "rollout" })
            const bare = flagOf(yield* w.as("POST", path, { key: key("flag"), enabled: false }))
            assert.deepInclude(bare, { value: null, description: null, enabled: false })
            failed(yield* w.as("POST", path, { key: k, enabled: false }), 409, "conflict")
            assert.hasAllKeys(invalidFields(yield* w.as("POST", path, { key: key(), enabled: "yes" })), ["enabled"])
            const { featureFlags } = ok(yield* w.as("GET", path), { featureFlags: Schema.Array(FeatureFlag) })
            assert.sameMembers(featureFlags.map((f) => f.id), [flag.id, bare.id])
            const patched = flagOf(yield* w.as("PATCH", `${path}/${flag.id}`, { enabled: false }))
            assert.deepInclude(patched, { enabled: false, value: { pct: 10 }, description: "rollout" })
            failed(yield* w.as("DELETE", `${path}/${flag.id}`), 405, "unsupported")
          }
        }))

      /** A masked project setting and an environment flag, each created and then changed, under one key. */
      const changedTwice = Effect.gen(function*() {
        const w = yield* world
        const { child } = w
        const k = key("evt")
        const setting = settingOf(
          yield* w.as("POST", `${child.prj}/config/settings`, {
            key: k,
            value: "sekrit-value-1",
            visibility: "masked"
          })
        )
        ok(yield* w.as("PATCH", `${child.prj}/config/settings/${setting.id}`, { value: "sekrit-value-2" }))
        const flag = flagOf(
          yield* w.as("POST", `${child.env}/config/feature-flags`, { key: k, enabled: true, value: "sekrit-flag" })
        )
        ok(yield* w.as("PATCH", `${child.env}/config/feature-flags/${flag.id}`, { value: "sekrit-flag-2" }))
        return { w, k, setting, flag }
      })

      it.effect("setting and flag events carry keys and ids, never values", () =>
        Effect.gen(function*() {
          const { flag, k, setting, w } = yield* changedTwice
          const { child } = w
          const sql = yield* SqlClient.SqlClient
          const events = yield* sql<{ type: string; subjectId: string; data: unknown; projectId: string | null }>`
            select type, subject_id, data, project_id from events
            where org_id = ${child.orgId} and (type = 'settings.updated' or type = 'feature.updated')
            order by occurred_at, id`.pipe(Effect.orDie)
          assert.deepStrictEqual(events.map((e) => e.type), [
            "settings.updated",
            "settings.updated",
            "feature.updated",
            "feature.updated"
          ])
          for (const event of events) {
            assert.notInclude(JSON.stringify(event.data), "sekrit")
            assert.strictEqual(event.projectId, child.projectId)
          }
          const data = (raw: unknown): unknown => (typeof raw === "string" ? JSON.parse(raw) : raw)
          // webhooks.md §1: the setting as the API returns it beside the summary, its value redacted.
          assert.deepInclude(data(events[1]!.data), {
            action: "updated",
            settingId: setting.id,
            key: k,
            scopeKind: "project",
            changed: ["value"]
          })
          assert.deepInclude(data(events[2]!.data), {
            action: "created",
            flagId: flag.id,
            key: k,
            scopeKind: "environment"
          })
        }))

      it.effect("configuration audit entries carry no values", () =>
        Effect.gen(function*() {
          const { w } = yield* changedTwice
          const audit = ok(yield* w.as("GET", `${w.child.ws}/audit?category=configuration`), {
            auditEntries: Schema.Array(AuditEntry)
          })
          assert.isAtLeast(audit.auditEntries.length, 4)
          assert.notInclude(JSON.stringify(audit), "sekrit")
        }))

      /** The world, its owner's typed client, and the child's three scopes as the client's params. */
      const typed = Effect.gen(function*() {
        const w = yield* world
        const client = yield* clientFor(w.baseUrl, w.token)
        const ws = { orgId: w.child.orgId }
        const prj = { ...ws, projectId: ProjectId.make(w.child.projectId) }
        const env = { ...prj, environmentId: EnvironmentId.make(w.child.environmentId) }
        return { client, ws, prj, env }
      })

      it.effect("typed client: settings at each scope, and resolve through them", () =>
        Effect.gen(function*() {
          const { client, env, prj, ws } = yield* typed
          const k = key("client")
          const { setting } = yield* client.configuration.createSetting({
            params: ws,
            payload: { key: k, value: 1, valueType: "number" }
          })
          assert.strictEqual(setting.value, 1)
          assert.instanceOf(setting.createdAt, Date)
          const updated = yield* client.configuration.updateSetting({
            params: { ...ws, settingId: setting.id },
            payload: { value: 2 }
          })
          assert.strictEqual(updated.setting.value, 2)
          const listed = yield* client.configuration.listSettings({ params: ws, query: {} })
          assert.deepStrictEqual(listed.data.settings.map((s) => s.id), [setting.id])
          const resolved = yield* client.environmentConfiguration.resolveSetting({ params: env, query: { key: k } })
          assert.deepStrictEqual(resolved.setting.inheritedFrom, { scopeKind: "organization" })
          yield* client.projectConfiguration.createSetting({ params: prj, payload: { key: k, value: 3 } })
          assert.strictEqual(
            (yield* client.environmentConfiguration.resolveSetting({ params: env, query: { key: k } })).setting.value,
            3
          )
          const envSetting = yield* client.environmentConfiguration.createSetting({
            params: env,
            payload: { key: k, value: 4 }
          })
          yield* client.environmentConfiguration.updateSetting({
            params: { ...env, settingId: envSetting.setting.id },
            payload: { value: 5 }
          })
          assert.strictEqual(
            (yield* client.projectConfiguration.listSettings({ params: prj, query: {} })).data.settings.length,
            1
          )
          assert.strictEqual(
            (yield* client.environmentConfiguration.listSettings({ params: env, query: {} })).data.settings[0]!.value,
            5
          )
        }))

      it.effect("typed client: feature flags at each scope", () =>
        Effect.gen(function*() {
          const { client, env, prj, ws } = yield* typed
          const k = key("client")
          yield* flagRoundTrip(client.configuration, ws, k)
          yield* flagRoundTrip(client.projectConfiguration, prj, k)
          yield* flagRoundTrip(client.environmentConfiguration, env, k)
        }))

      it.effect("typed client: a duplicate key fails with Conflict, a key resolving nowhere with NotFound", () =>
        Effect.gen(function*() {
          const { client, ws } = yield* typed
          const k = key("client")
          yield* client.configuration.createSetting({ params: ws, payload: { key: k, value: 1, valueType: "number" } })
          const conflict = yield* Effect.flip(
            client.configuration.createSetting({ params: ws, payload: { key: k, value: 1 } })
          )
          assert.instanceOf(conflict, Conflict)
          const missing = yield* Effect.flip(
            client.configuration.resolveSetting({ params: ws, query: { key: key("none") } })
          )
          assert.instanceOf(missing, NotFound)
        }))

      if (backend === "pglite") {
        /** The world, `cpctl` as its owner, and the flags naming the child's project. */
        const cli = Effect.map(world, (w) => ({
          w,
          scope: ["--workspace", w.child.orgId, "--project", w.child.projectId],
          run: (...args: ReadonlyArray<string>) => cpctl(w.baseUrl, w.token, ...args)
        }))

        it.effect("cpctl config set|get|resolve; a value not of the declared type fails validation", () =>
          Effect.gen(function*() {
            const { run, scope, w } = yield* cli
            const k = key("cli")
            let out = yield* run("config", "set", k, "42", "--type", "number", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.include(out.stdout, k)
            out = yield* run("config", "set", k, "43", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            out = yield* run("--json", "config", "get", k, ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.strictEqual(printedAs(out, Schema.Array(Setting))[0]?.value, 43)
            out = yield* run("--json", "config", "resolve", k, ...scope, "--environment", w.child.environmentId)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.deepInclude(printedSetting(out), { value: 43, inheritedFrom: { scopeKind: "project" } })
            out = yield* run("config", "set", k, "not-a-number", ...scope)
            assert.notStrictEqual(out.exitCode, 0)
            assert.include(out.stderr, "validation_failed")
          }))

        it.effect("cpctl flags create|set|list", () =>
          Effect.gen(function*() {
            const { run, scope } = yield* cli
            const k = key("cli")
            let out = yield* run("--json", "flags", "create", k, "--enabled", "--value", "{\"pct\":5}", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            const flag = printedAs(out, FeatureFlag)
            assert.deepInclude(flag, { enabled: true, value: { pct: 5 } })
            out = yield* run("--json", "flags", "set", flag.id, "--enabled", "false", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.isFalse(printedAs(out, FeatureFlag).enabled)
            out = yield* run("flags", "list", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.include(out.stdout, flag.id)
          }))
      }

      it.effect("lists page with limit and cursor", () =>
        Effect.gen(function*() {
          const w = yield* world
          const path = `${w.child.env}/config/settings`
          for (let i = 0; i < 3; i++) ok(yield* w.as("POST", path, { key: key("page"), value: i }))
          const first = yield* w.as("GET", `${path}?limit=2`)
          assert.strictEqual(settingsOf(first).length, 2)
          const cursor = nextCursor(first)
          const page2 = settingsOf(yield* w.as("GET", `${path}?limit=2&cursor=${encodeURIComponent(cursor)}`))
          assert.strictEqual(page2.length, 1)
          failed(
            yield* w.as("GET", `${w.child.prj}/config/settings?cursor=${encodeURIComponent(cursor)}`),
            422,
            "validation_failed"
          )
          failed(yield* w.as("GET", `${path}?limit=0`), 422, "validation_failed")
        }))
    }
  )
}
