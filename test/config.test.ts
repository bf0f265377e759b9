/**
 * Configuration end to end over real HTTP and the typed client (spec: Configuration resource rows, "Configuration
 * (under {scope})", Events; contract §4 data shapes, validation errors, 405 for the missing DELETE): settings and
 * feature flags at workspace, project and environment scope, every error, the resolution order environment → project →
 * workspace → account → default, the account guardrail at every scope, masked values hidden from a viewer, and events
 * and audit entries that carry no values. Runs on PGlite, and on PostgreSQL too when `DATABASE_URL` is set.
 */
import { Conflict, NotFound } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type Backend, databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs as cpctl } from "./support/cli.ts"
import { failed, ok } from "./support/envelope.ts"
import { seedMember } from "./support/seed.ts"
import { call, clientFor, TestServer, testServerOver } from "./support/server.ts"
import { createProject, freshEmail, signIn } from "./support/session.ts"

const backends: ReadonlyArray<Exclude<Backend, "memory">> = process.env["DATABASE_URL"]
  ? ["pglite", "postgres"]
  : ["pglite"]

const ULID = "[0-9A-HJKMNP-TV-Z]{26}"
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
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
/** One client method of any of the three scope groups, called with that group's params. */
const loose = (method: unknown) => method as (request: object) => Effect.Effect<any>

const key = (prefix = "k") => `${prefix}.${randomUUID().slice(0, 8)}`

for (const backend of backends) {
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
        const { organizations } = ok(yield* as("GET", "/v1/organizations"))
        const root = organizations[0] as { id: string; isAccountRoot: boolean }
        const child = ok(yield* as("POST", "/v1/organizations", { name: `Child ${randomUUID().slice(0, 8)}` }))
          .organization as { id: string }
        const scopesOf = Effect.fnUntraced(function*(orgId: string) {
          const ws = `/v1/organizations/${orgId}`
          const projectId = yield* createProject(baseUrl, token, orgId)
          const prj = `${ws}/projects/${projectId}`
          const environment = ok(yield* as("POST", `${prj}/environments`, { name: `E ${randomUUID().slice(0, 8)}` }))
            .environment
          return {
            orgId,
            projectId,
            environmentId: environment.id as string,
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

      it.effect("settings: create, list, patch at every scope, with the exact wire shape", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child } = w
          for (
            const [prefix, scopeKind] of [[child.ws, "organization"], [child.prj, "project"], [
              child.env,
              "environment"
            ]] as const
          ) {
            const k = key()
            const created = ok(
              yield* w.as("POST", `${prefix}/config/settings`, { key: k, value: { a: 1 }, description: "d" })
            ).setting
            assert.deepStrictEqual(Object.keys(created).sort(), SETTING_KEYS)
            assert.match(created.id, new RegExp(`^stg_${ULID}$`))
            assert.strictEqual(created.orgId, child.orgId)
            assert.strictEqual(created.scopeKind, scopeKind)
            assert.strictEqual(created.projectId, scopeKind === "organization" ? null : child.projectId)
            assert.strictEqual(created.environmentId, scopeKind === "environment" ? child.environmentId : null)
            assert.deepStrictEqual(created.value, { a: 1 })
            assert.match(created.createdAt, ISO_MS)
            // The list shows exactly this scope.
            const { settings } = ok(yield* w.as("GET", `${prefix}/config/settings`))
            assert.deepStrictEqual(settings.map((s: any) => s.id), [created.id])
            // Duplicate key at the same scope: 409.
            failed(yield* w.as("POST", `${prefix}/config/settings`, { key: k, value: 2 }), 409, "conflict")
            const patched =
              ok(yield* w.as("PATCH", `${prefix}/config/settings/${created.id}`, { value: [1, 2], description: null }))
                .setting
            assert.deepStrictEqual(patched.value, [1, 2])
            assert.isNull(patched.description)
            assert.strictEqual(patched.createdAt, created.createdAt)
            // No DELETE on settings and flags.
            failed(yield* w.as("DELETE", `${prefix}/config/settings/${created.id}`), 405, "unsupported")
            failed(yield* w.as("DELETE", `${prefix}/config/settings`), 405, "unsupported")
            failed(yield* w.as("DELETE", `${prefix}/config/feature-flags`), 405, "unsupported")
          }
        }))

      it.effect("settings: valueType and visibility are enforced but never echoed; 422 on bad enums and values", () =>
        Effect.gen(function*() {
          const w = yield* world
          const path = `${w.child.ws}/config/settings`
          const bad = failed(
            yield* w.as("POST", path, { key: key(), value: 1, valueType: "int", visibility: "secret" }),
            422,
            "validation_failed"
          )
          assert.hasAllKeys(bad.details.fields, ["valueType", "visibility"])
          const mismatch = failed(
            yield* w.as("POST", path, { key: key(), value: "x", valueType: "number" }),
            422,
            "validation_failed"
          )
          assert.hasAllKeys(mismatch.details.fields, ["value"])
          failed(yield* w.as("POST", path, { key: "bad key!", value: 1 }), 422, "validation_failed")
          failed(yield* w.as("POST", path, { value: 1 }), 422, "validation_failed")
          const created =
            ok(yield* w.as("POST", path, { key: key(), value: 3, valueType: "number", visibility: "public" }))
              .setting
          assert.notProperty(created, "valueType")
          assert.notProperty(created, "visibility")
          // An omitted valueType keeps the stored declaration: a string no longer fits.
          const kept = failed(
            yield* w.as("PATCH", `${path}/${created.id}`, { value: "three" }),
            422,
            "validation_failed"
          )
          assert.hasAllKeys(kept.details.fields, ["value"])
          // Changing the type checks the stored value against it.
          failed(yield* w.as("PATCH", `${path}/${created.id}`, { valueType: "boolean" }), 422, "validation_failed")
          ok(yield* w.as("PATCH", `${path}/${created.id}`, { valueType: "string", value: "three" }))
          failed(yield* w.as("PATCH", `${path}/${created.id}`, { visibility: "nope" }), 422, "validation_failed")
          for (
            const [valueType, value] of [["string", "s"], ["boolean", true], ["json", null], ["json", {
              x: [1]
            }]] as const
          ) {
            ok(yield* w.as("POST", path, { key: key(), value, valueType }))
          }
          // `overridable` is only for an account root's workspace scope.
          const notRoot = failed(
            yield* w.as("POST", path, { key: key(), value: 1, overridable: false }),
            422,
            "validation_failed"
          )
          assert.hasAllKeys(notRoot.details.fields, ["overridable"])
          failed(
            yield* w.as("POST", `${w.rootScopes.prj}/config/settings`, { key: key(), value: 1, overridable: false }),
            422,
            "validation_failed"
          )
        }))

      it.effect("unknown setting, flag, project or environment: 404; malformed ids: 404", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child, rootScopes } = w
          const otherSetting = ok(yield* w.as("POST", `${child.prj}/config/settings`, { key: key(), value: 1 })).setting
          // A setting of another scope is not found at this one.
          failed(yield* w.as("PATCH", `${child.ws}/config/settings/${otherSetting.id}`, { value: 2 }), 404, "not_found")
          failed(
            yield* w.as("PATCH", `${child.env}/config/settings/${otherSetting.id}`, { value: 2 }),
            404,
            "not_found"
          )
          const flag =
            ok(yield* w.as("POST", `${child.ws}/config/feature-flags`, { key: key(), enabled: true })).featureFlag
          failed(
            yield* w.as("PATCH", `${child.prj}/config/feature-flags/${flag.id}`, { enabled: false }),
            404,
            "not_found"
          )
          failed(yield* w.as("PATCH", `${child.ws}/config/settings/stg_nope`, { value: 2 }), 404, "not_found")
          // A project or environment of another workspace (or none) is not there.
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

      it.effect("resolve walks environment, project, workspace, account, default; missing key 422; no match 404", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child, rootScopes } = w
          const k = key("walk")
          const resolve = (prefix: string, which = k) =>
            Effect.map(w.as("GET", `${prefix}/config/settings/resolve?key=${encodeURIComponent(which)}`), (res) => res)
          failed(yield* w.as("GET", `${child.ws}/config/settings/resolve`), 422, "validation_failed")
          failed(yield* resolve(child.env), 404, "not_found")

          // Built-in default.
          const builtin = ok(yield* resolve(child.env, "ui.theme")).setting
          assert.deepInclude(builtin, {
            id: null,
            value: "system",
            overridable: true,
            inheritedFrom: { scopeKind: "default" }
          })

          const setAt = (prefix: string, value: number, extra: object = {}) =>
            Effect.map(w.as("POST", `${prefix}/config/settings`, { key: k, value, ...extra }), (res) => ok(res).setting)
          const account = yield* setAt(rootScopes.ws, 1)
          let got = ok(yield* resolve(child.env)).setting
          assert.deepInclude(got, {
            id: account.id,
            value: 1,
            overridable: true,
            inheritedFrom: { scopeKind: "account" }
          })
          const workspace = yield* setAt(child.ws, 2)
          got = ok(yield* resolve(child.env)).setting
          assert.deepInclude(got, { id: workspace.id, value: 2, inheritedFrom: { scopeKind: "organization" } })
          const project = yield* setAt(child.prj, 3)
          got = ok(yield* resolve(child.env)).setting
          assert.deepInclude(got, { id: project.id, value: 3, inheritedFrom: { scopeKind: "project" } })
          assert.deepInclude(ok(yield* resolve(child.prj)).setting, { value: 3 })
          assert.deepInclude(ok(yield* resolve(child.ws)).setting, { value: 2 })
          const environment = yield* setAt(child.env, 4)
          got = ok(yield* resolve(child.env)).setting
          assert.deepInclude(got, {
            id: environment.id,
            value: 4,
            overridable: true,
            inheritedFrom: { scopeKind: "environment" }
          })
          assert.deepStrictEqual(Object.keys(got).sort(), [...SETTING_KEYS, "inheritedFrom", "overridable"].sort())

          // Lock the account setting: the guardrail wins at every scope of the child and of the root itself.
          ok(yield* w.as("PATCH", `${rootScopes.ws}/config/settings/${account.id}`, { overridable: false }))
          for (const prefix of [child.env, child.prj, child.ws]) {
            assert.deepInclude(ok(yield* resolve(prefix)).setting, {
              id: account.id,
              value: 1,
              overridable: false,
              inheritedFrom: { scopeKind: "account" }
            })
          }
          yield* setAt(rootScopes.env, 9)
          yield* setAt(rootScopes.prj, 8)
          for (const prefix of [rootScopes.env, rootScopes.prj, rootScopes.ws]) {
            assert.deepInclude(ok(yield* resolve(prefix)).setting, {
              id: account.id,
              value: 1,
              overridable: false,
              inheritedFrom: { scopeKind: "organization" }
            })
          }
          // Unlocked again, the lower scopes win.
          ok(yield* w.as("PATCH", `${rootScopes.ws}/config/settings/${account.id}`, { overridable: true }))
          assert.deepInclude(ok(yield* resolve(child.env)).setting, { value: 4 })
          assert.deepInclude(ok(yield* resolve(rootScopes.env)).setting, { value: 9 })

          // A guardrail created locked.
          const locked = key("locked")
          ok(
            yield* w.as("POST", `${rootScopes.ws}/config/settings`, { key: locked, value: "root", overridable: false })
          )
          ok(yield* w.as("POST", `${child.env}/config/settings`, { key: locked, value: "env" }))
          assert.deepInclude(ok(yield* resolve(child.env, locked)).setting, { value: "root", overridable: false })
        }))

      it.effect("masked values are hidden from a viewer, shown to writers", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child } = w
          const viewerEmail = freshEmail("viewer")
          const viewer = yield* signIn(w.baseUrl, { email: viewerEmail })
          yield* seedMember(child.orgId, viewer.user.id, "viewer")
          const asViewer = (path: string) => call(w.baseUrl, "GET", path, { token: viewer.token })
          for (const prefix of [child.ws, child.prj, child.env]) {
            const k = key("masked")
            const created =
              ok(yield* w.as("POST", `${prefix}/config/settings`, { key: k, value: "hunter2", visibility: "masked" }))
                .setting
            assert.strictEqual(created.value, "hunter2")
            assert.notProperty(created, "masked")
            const seen = ok(yield* asViewer(`${prefix}/config/settings`)).settings.find((s: any) => s.id === created.id)
            assert.deepInclude(seen, { value: null, masked: true })
            const resolved = ok(yield* asViewer(`${prefix}/config/settings/resolve?key=${k}`)).setting
            assert.deepInclude(resolved, { value: null, masked: true })
            assert.notInclude(JSON.stringify(resolved), "hunter2")
            // The owner (write permission) sees it.
            assert.strictEqual(
              ok(yield* w.as("GET", `${prefix}/config/settings/resolve?key=${k}`)).setting.value,
              "hunter2"
            )
            // A viewer cannot write.
            failed(
              yield* call(w.baseUrl, "POST", `${prefix}/config/settings`, {
                token: viewer.token,
                body: { key: key(), value: 1 }
              }),
              403,
              "forbidden"
            )
          }
          // Internal (the default) and public values are readable.
          const plain = ok(yield* w.as("POST", `${child.ws}/config/settings`, { key: key(), value: 5 })).setting
          assert.strictEqual(
            ok(yield* asViewer(`${child.ws}/config/settings`)).settings.find((s: any) => s.id === plain.id).value,
            5
          )
        }))

      it.effect("feature flags: create, list, patch, 409, 422, 404 at every scope", () =>
        Effect.gen(function*() {
          const w = yield* world
          for (const prefix of [w.child.ws, w.child.prj, w.child.env]) {
            const path = `${prefix}/config/feature-flags`
            const k = key("flag")
            const flag =
              ok(yield* w.as("POST", path, { key: k, enabled: true, value: { pct: 10 }, description: "rollout" }))
                .featureFlag
            assert.deepStrictEqual(Object.keys(flag).sort(), FLAG_KEYS)
            assert.match(flag.id, new RegExp(`^flg_${ULID}$`))
            assert.deepInclude(flag, { key: k, enabled: true, value: { pct: 10 }, description: "rollout" })
            const bare = ok(yield* w.as("POST", path, { key: key("flag"), enabled: false })).featureFlag
            assert.deepInclude(bare, { value: null, description: null, enabled: false })
            failed(yield* w.as("POST", path, { key: k, enabled: false }), 409, "conflict")
            const invalid = failed(yield* w.as("POST", path, { key: key(), enabled: "yes" }), 422, "validation_failed")
            assert.hasAllKeys(invalid.details.fields, ["enabled"])
            const { featureFlags } = ok(yield* w.as("GET", path))
            assert.sameMembers(featureFlags.map((f: any) => f.id), [flag.id, bare.id])
            const patched = ok(yield* w.as("PATCH", `${path}/${flag.id}`, { enabled: false })).featureFlag
            assert.deepInclude(patched, { enabled: false, value: { pct: 10 }, description: "rollout" })
            failed(yield* w.as("DELETE", `${path}/${flag.id}`), 405, "unsupported")
          }
        }))

      it.effect("events and audit entries carry keys and ids, never values", () =>
        Effect.gen(function*() {
          const w = yield* world
          const { child } = w
          const k = key("evt")
          const setting = ok(
            yield* w.as("POST", `${child.prj}/config/settings`, {
              key: k,
              value: "sekrit-value-1",
              visibility: "masked"
            })
          )
            .setting
          ok(yield* w.as("PATCH", `${child.prj}/config/settings/${setting.id}`, { value: "sekrit-value-2" }))
          const flag = ok(
            yield* w.as("POST", `${child.env}/config/feature-flags`, { key: k, enabled: true, value: "sekrit-flag" })
          )
            .featureFlag
          ok(yield* w.as("PATCH", `${child.env}/config/feature-flags/${flag.id}`, { value: "sekrit-flag-2" }))
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
          const data = (raw: unknown) => (typeof raw === "string" ? JSON.parse(raw) : raw) as any
          assert.deepStrictEqual(data(events[1]!.data), {
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
          const audit = ok(yield* w.as("GET", `${child.ws}/audit?category=configuration`))
          const entries = (audit.entries ?? audit.auditEntries ?? Object.values(audit).find(Array.isArray)) as Array<
            any
          >
          assert.isAtLeast(entries.length, 4)
          assert.notInclude(JSON.stringify(audit), "sekrit")
        }))

      it.effect("typed client: every configuration route", () =>
        Effect.gen(function*() {
          const w = yield* world
          const client = yield* clientFor(w.baseUrl, w.token)
          const ws = { orgId: w.child.orgId }
          const prj = { ...ws, projectId: w.child.projectId as any }
          const env = { ...prj, environmentId: w.child.environmentId as any }
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
          for (
            const group of [client.configuration, client.projectConfiguration, client.environmentConfiguration] as const
          ) {
            const params = group === client.configuration ? ws : group === client.projectConfiguration ? prj : env
            const { featureFlag } = yield* loose(group.createFeatureFlag)({
              params,
              payload: { key: k, enabled: true }
            })
            const patched = yield* loose(group.updateFeatureFlag)({
              params: { ...params, flagId: featureFlag.id },
              payload: { enabled: false }
            })
            assert.isFalse(patched.featureFlag.enabled)
            const flags = yield* loose(group.listFeatureFlags)({ params, query: {} })
            assert.deepStrictEqual(flags.data.featureFlags.map((f: any) => f.id), [featureFlag.id])
          }
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
        it.effect("cpctl config get|set|resolve and flags list|create|set", () =>
          Effect.gen(function*() {
            const w = yield* world
            const scope = ["--workspace", w.child.orgId, "--project", w.child.projectId]
            const run = (...args: ReadonlyArray<string>) => cpctl(w.baseUrl, w.token, ...args)
            const k = key("cli")
            let out = yield* run("config", "set", k, "42", "--type", "number", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.include(out.stdout, k)
            out = yield* run("config", "set", k, "43", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            out = yield* run("--json", "config", "get", k, ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.strictEqual(JSON.parse(out.stdout).settings[0].value, 43)
            out = yield* run("--json", "config", "resolve", k, ...scope, "--environment", w.child.environmentId)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.deepInclude(JSON.parse(out.stdout).setting, { value: 43, inheritedFrom: { scopeKind: "project" } })
            out = yield* run("config", "set", k, "not-a-number", ...scope)
            assert.notStrictEqual(out.exitCode, 0)
            assert.include(out.stderr, "validation_failed")
            out = yield* run("--json", "flags", "create", k, "--enabled", "--value", "{\"pct\":5}", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            const flag = JSON.parse(out.stdout).featureFlag
            assert.deepInclude(flag, { enabled: true, value: { pct: 5 } })
            out = yield* run("--json", "flags", "set", flag.id, "--enabled", "false", ...scope)
            assert.strictEqual(out.exitCode, 0, out.stderr)
            assert.isFalse(JSON.parse(out.stdout).featureFlag.enabled)
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
          const page1 = ok(first)
          assert.strictEqual(page1.settings.length, 2)
          const cursor = (first.json as any).meta.cursor as string
          assert.isString(cursor)
          const page2 = ok(yield* w.as("GET", `${path}?limit=2&cursor=${encodeURIComponent(cursor)}`))
          assert.strictEqual(page2.settings.length, 1)
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
