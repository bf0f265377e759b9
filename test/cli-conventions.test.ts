/**
 * cpctl's conventions (issue 11), the real executable against the real server: optional switches are optional on
 * every command, a default workspace, names for ids, one `--json` shape, `--all`, hints and empty lists on stderr,
 * confirmation of destructive commands, exit codes, flag names in validation errors, the User-Agent, no
 * `traceparent`, and the installed bin on the machine's own Node.
 */
import { Environment, FeatureFlag, Organization, Project, ResolvedSetting, Setting, Team } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, FileSystem, Layer, Schema } from "effect"
import { CliError, type Command } from "effect/cli"
import { execFileSync } from "node:child_process"
import { readFileSync, symlinkSync } from "node:fs"
import { mkdtempSync } from "node:fs"
import { createServer, type IncomingHttpHeaders } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { CliFailure, exitCodeOf } from "../packages/cli/src/errors.ts"
import { cpctl as tree, run } from "../packages/cli/src/main.ts"
import { VERSION } from "../packages/cli/src/version.ts"
import { cpctlRun } from "./support/cli.ts"
import { TestServer, testServer } from "./support/server.ts"
import { freshEmail, signIn } from "./support/session.ts"

const parse = <S extends Schema.Codec<unknown, unknown>>(schema: S, json: string): S["Type"] =>
  Schema.decodeUnknownSync(Schema.fromJsonString(schema))(json)

/** Every leaf command of the tree, as the words that name it. */
const leaves = (command: Command.Command.Any, path: ReadonlyArray<string> = []): Array<ReadonlyArray<string>> => {
  const children = command.subcommands.flatMap((group) => group.commands)
  return children.length === 0
    ? [path]
    : children.flatMap((child) => leaves(child, [...path, child.name]))
}

/** The required positional arguments of each command (the workspace comes from CP_WORKSPACE). */
const required: Readonly<Record<string, ReadonlyArray<string>>> = {
  "login": [],
  "logout": [],
  "whoami": [],
  "workspaces list": [],
  "workspaces create": ["Acme"],
  "workspaces get": [],
  "workspaces use": ["acme"],
  "api-keys create": ["ci", "--role", "viewer"],
  "api-keys list": [],
  "api-keys revoke": ["00000000-0000-4000-8000-000000000000"],
  "audit list": [],
  "members list": [],
  "members set-role": ["mem_01ARZ3NDEKTSV4RRFFQ69G5FAV", "viewer"],
  "members remove": ["mem_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "invitations create": ["a@example.com", "--role", "viewer"],
  "invitations list": [],
  "invitations revoke": ["inv_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "invitations mine": [],
  "invitations accept": ["inv_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "teams list": [],
  "teams create": ["Ops"],
  "teams get": ["ops"],
  "teams update": ["ops"],
  "teams delete": ["ops"],
  "teams members": ["ops"],
  "teams add-member": ["ops", "usr_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "teams remove-member": ["ops", "usr_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "teams grants": [],
  "teams grant": ["ops", "viewer"],
  "teams revoke": ["ops", "viewer"],
  "projects list": [],
  "projects create": ["Web"],
  "projects archive": ["web"],
  "projects restore": ["web"],
  "envs list": ["web"],
  "envs create": ["web", "Staging"],
  "envs archive": ["web", "staging"],
  "access explain": [],
  "secrets list": [],
  "secrets set": ["API_KEY"],
  "secrets rotate": ["sec_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "secrets delete": ["sec_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "config get": [],
  "config set": ["region", "eu"],
  "config resolve": ["region"],
  "flags list": [],
  "flags create": ["beta"],
  "flags set": ["beta"],
  "agents providers list": [],
  "agents providers connect": ["openai"],
  "agents providers update": ["apc_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "agents providers verify": ["apc_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "agents providers disconnect": ["apc_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "admin rotate-kek": [],
  "integrations list": [],
  "integrations get": ["int_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "integrations connect": ["scmhost"],
  "integrations share": ["int_01ARZ3NDEKTSV4RRFFQ69G5FAV", "granted"],
  "integrations revoke": ["int_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "integrations repositories": ["int_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "integrations deliveries": ["int_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "integrations replay": ["int_01ARZ3NDEKTSV4RRFFQ69G5FAV", "igd_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "integrations token": ["--repo", "1001", "--permission", "contents=read"],
  "repo-links list": ["web"],
  "repo-links create": ["web", "int_01ARZ3NDEKTSV4RRFFQ69G5FAV", "1001"],
  "repo-links update": ["web", "repl_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "repo-links delete": ["web", "repl_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "link": [],
  "runs list": ["web"],
  "runs get": ["web", "01JD0000000000000000000000"],
  "runs cancel": ["web", "01JD0000000000000000000000"],
  "runs log": ["web", "01JD0000000000000000000000"],
  "jobs list": ["web", "01JD0000000000000000000000"],
  "logs tail": ["web", "01JD0000000000000000000000", "build"],
  "runner": ["web", "01JD0000000000000000000000", "--command", "true"],
  "objects put": ["web", "/dev/null"],
  "objects get": ["web", `sha256:${"0".repeat(64)}`],
  "objects missing": ["web", `sha256:${"0".repeat(64)}`],
  "gc report": ["web"],
  "gc collect": ["web"],
  "refs list": ["web"],
  "refs get": ["web", "refs/heads/main"],
  "refs set": ["web", "refs/heads/main", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
  "refs delete": ["web", "refs/heads/main"],
  "catalog publish": ["web", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
  "catalog head": ["web"],
  "catalog history": ["web"],
  "catalog entities": [],
  "tfstate list": ["web"],
  "tfstate pull": ["web", "network", "staging"],
  "tfstate unlock": ["web", "network", "staging"],
  "webhooks endpoints list": [],
  "webhooks endpoints create": ["https://example.com/hook"],
  "webhooks endpoints get": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks endpoints update": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks endpoints disable": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks endpoints enable": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks endpoints rotate-secret": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks endpoints delete": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks endpoints stats": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks subscriptions list": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks subscriptions create": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV", "project.created"],
  "webhooks subscriptions get": ["whs_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks subscriptions enable": ["whs_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks subscriptions disable": ["whs_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks subscriptions delete": ["whs_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks attempts list": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks attempts get": ["whd_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks attempts replay": ["whd_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "webhooks recover": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV", "--since", "2026-01-01T00:00:00.000Z"],
  "webhooks test": ["whe_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "usage record": ["api.requests", "--key", "k1"],
  "usage batch": [],
  "usage summary": ["api.requests"],
  "quotas list": [],
  "quotas set": ["api.requests", "--limit", "10", "--period", "day", "--enforcement", "soft"],
  "quotas delete": ["quo_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
  "quotas check": ["api.requests"],
  "quotas violations": [],
  "billing plans": [],
  "billing summary": [],
  "billing invoices": [],
  "billing payment-methods": [],
  "billing checkout": ["team"],
  "billing portal": [],
  "billing change": ["business"],
  "billing cancel": [],
  "billing reconcile": []
}

describe("cpctl command tree", () => {
  it.effect("every command parses with only its required arguments: no optional switch is required", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // credentials.json is a directory: building the client fails after the command line parsed, before any request.
      const dir = yield* fs.makeTempDirectoryScoped()
      yield* fs.makeDirectory(`${dir}/credentials.json`)
      const env = ConfigProvider.layer(ConfigProvider.fromEnv({ env: { CP_CONFIG_DIR: dir, CP_WORKSPACE: "acme" } }))
      const paths = leaves(tree)
      assert.sameMembers(paths.map((path) => path.join(" ")), Object.keys(required))
      for (const path of paths) {
        const args = [...path, ...(required[path.join(" ")] ?? [])]
        const exit = yield* Effect.exit(run(args).pipe(Effect.provide(env)))
        assert.isTrue(Exit.isFailure(exit), args.join(" "))
        if (Exit.isFailure(exit)) {
          const error = Cause.squash(exit.cause)
          assert.isFalse(CliError.isCliError(error), `${args.join(" ")}: ${String(error)}`)
          assert.instanceOf(error, CliFailure, args.join(" "))
        }
      }
    }).pipe(Effect.provide(NodeServices.layer)))

  it("exit codes: a parse error is 2, help is 0, a failure 1", () => {
    assert.strictEqual(exitCodeOf(Cause.fail(new CliError.MissingOption({ option: "role" }))), 2)
    assert.strictEqual(exitCodeOf(Cause.fail(new CliError.ShowHelp({ commandPath: ["cpctl"], errors: [] }))), 0)
    assert.strictEqual(exitCodeOf(Cause.fail(new CliFailure({ code: "confirmation_required", message: "" }))), 2)
    assert.strictEqual(exitCodeOf(Cause.fail(new CliFailure({ code: "not_found", message: "" }))), 1)
  })

  it("the version is package.json's", () => {
    const pkg = JSON.parse(readFileSync(new URL("../packages/cli/package.json", import.meta.url), "utf8")) as {
      readonly version: string
    }
    assert.strictEqual(VERSION, pkg.version)
  })

  it("the installed bin runs from anywhere on the machine's own Node (/usr/bin/node when present)", () => {
    const shim = fileURLToPath(new URL("../packages/cli/bin/cpctl.js", import.meta.url))
    const elsewhere = mkdtempSync(join(tmpdir(), "cpctl-bin-"))
    symlinkSync(shim, join(elsewhere, "cpctl"))
    const systemNode = ["/usr/bin/node", "/usr/local/bin/node"].find((candidate) => {
      try {
        execFileSync(candidate, ["--version"])
        return true
      } catch {
        return false
      }
    }) ?? process.execPath
    const out = execFileSync(systemNode, [join(elsewhere, "cpctl"), "--version"], {
      cwd: elsewhere,
      env: { PATH: "/usr/bin:/bin", HOME: elsewhere },
      encoding: "utf8"
    })
    assert.include(out, VERSION)
  })
})

describe("cpctl on the wire", () => {
  it.effect("names itself in User-Agent, sends no traceparent, and a rejected token exits 4", () =>
    Effect.gen(function*() {
      const seen: Array<IncomingHttpHeaders> = []
      const server = createServer((request, response) => {
        seen.push(request.headers)
        response.writeHead(401, { "content-type": "application/json" })
        response.end(JSON.stringify({ error: { code: "unauthenticated", message: "Bad token", details: {} } }))
      })
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => {
          server.listen(0, "127.0.0.1", () => resume(Effect.void))
        }),
        () => Effect.sync(() => server.close())
      )
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const result = yield* cpctlRun({
        CP_BASE_URL: `http://127.0.0.1:${port}`,
        CP_TOKEN: "nope",
        CP_CONFIG_DIR: "/nonexistent/cpctl"
      }, ["whoami"])
      assert.strictEqual(result.exitCode, 4, result.stderr)
      assert.match(result.stderr, /^error unauthenticated: /)
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(seen[0]?.["user-agent"], `cpctl/${VERSION}`)
      assert.notProperty(seen[0], "traceparent")
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)))
})

layer(Layer.merge(testServer("memory"), NodeServices.layer), { excludeTestServices: true })(
  "cpctl conventions",
  (it) => {
    /** A signed-in user with a config directory of its own, and cpctl run with only them. */
    const user = Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { baseUrl } = yield* TestServer
      const dir = `${yield* fs.makeTempDirectoryScoped()}/cpctl`
      const { token } = yield* signIn(baseUrl, { email: freshEmail("conv") })
      const env = { CP_BASE_URL: baseUrl, CP_TOKEN: token, CP_CONFIG_DIR: dir }
      const run = (...args: ReadonlyArray<string>) => cpctlRun(env, args)
      const runWith = (extra: Record<string, string>, ...args: ReadonlyArray<string>) =>
        cpctlRun({ ...env, ...extra }, args)
      const ok = (...args: ReadonlyArray<string>) =>
        Effect.tap(run(...args), (result) => Effect.sync(() => assert.strictEqual(result.exitCode, 0, result.stderr)))
      return { fs, dir, run, runWith, ok }
    })

    it.effect("workspaces use stores the default beside the credentials; CP_WORKSPACE and -w win; none: usage", () =>
      Effect.gen(function*() {
        const { dir, fs, ok, run, runWith } = yield* user
        const none = yield* run("projects", "list")
        assert.strictEqual(none.exitCode, 2)
        assert.include(none.stderr, "No workspace")

        const first = parse(Organization, (yield* ok("workspaces", "create", "First", "--json")).stdout)
        const second = parse(Organization, (yield* ok("workspaces", "create", "Second", "--json")).stdout)
        yield* ok("workspaces", "use", first.slug)
        assert.strictEqual((yield* fs.stat(`${dir}/config.json`)).mode & 0o777, 0o600)
        yield* ok("projects", "create", "Web")
        const inFirst = parse(Schema.Array(Project), (yield* ok("projects", "list", "--json")).stdout)
        assert.deepStrictEqual(inFirst.map((project) => project.slug), ["web"])
        const got = parse(Organization, (yield* ok("workspaces", "get", "--json")).stdout)
        assert.strictEqual(got.id, first.id)
        const named = parse(Organization, (yield* ok("workspaces", "get", "-w", second.slug, "--json")).stdout)
        assert.strictEqual(named.id, second.id)

        const viaEnv = yield* runWith({ CP_WORKSPACE: second.slug }, "projects", "list", "--json")
        assert.deepStrictEqual(JSON.parse(viaEnv.stdout), [])
        const viaFlag = yield* runWith({ CP_WORKSPACE: first.slug }, "projects", "list", "-w", second.slug)
        assert.strictEqual(viaFlag.stdout, "")
        assert.strictEqual(viaFlag.stderr, "No projects: create one with `cpctl projects create <name>`.\n")

        // audit list takes -w like every workspace command (and the default).
        const audit = yield* ok("audit", "list", "-w", first.slug, "--json")
        assert.isArray(JSON.parse(audit.stdout))
      }))

    it.effect("slugs and keys for ids; a flag known by its id needs no --project; --json prints the resource", () =>
      Effect.gen(function*() {
        const { ok } = yield* user
        const workspace = parse(Organization, (yield* ok("workspaces", "create", "Names", "--json")).stdout).slug
        const w = ["-w", workspace]
        const project = parse(Project, (yield* ok("projects", "create", "Web App", ...w, "--json")).stdout)
        const environment = parse(
          Environment,
          (yield* ok("envs", "create", project.slug, "Staging", ...w, "--json")).stdout
        )
        assert.strictEqual(environment.projectId, project.id)
        const team = parse(Team, (yield* ok("teams", "create", "Ops", ...w, "--json")).stdout)
        assert.strictEqual(parse(Team, (yield* ok("teams", "get", team.slug, ...w, "--json")).stdout).id, team.id)
        yield* ok("teams", "grant", team.slug, "project_admin", "--project", project.slug, ...w)
        const grants = yield* ok("teams", "grants", ...w)
        assert.include(grants.stdout, team.slug)

        const flag = parse(
          FeatureFlag,
          (yield* ok(
            "flags",
            "create",
            "beta",
            "--project",
            project.slug,
            "--environment",
            environment.slug,
            ...w,
            "--json"
          ))
            .stdout
        )
        assert.isFalse(flag.enabled)
        const changed = parse(
          FeatureFlag,
          (yield* ok("flags", "set", flag.id, "--enabled", "true", ...w, "--json")).stdout
        )
        assert.deepStrictEqual([changed.id, changed.enabled, changed.environmentId], [flag.id, true, environment.id])
        const byKey = yield* ok(
          "flags",
          "set",
          "beta",
          "--project",
          project.slug,
          "--environment",
          environment.slug,
          "--enabled",
          "false",
          ...w,
          "--json"
        )
        assert.isFalse(parse(FeatureFlag, byKey.stdout).enabled)
      }))

    it.effect("--all follows cursors; one page prints More: on stderr; --json is the list", () =>
      Effect.gen(function*() {
        const { ok } = yield* user
        const workspace = parse(Organization, (yield* ok("workspaces", "create", "Pages", "--json")).stdout).slug
        for (const name of ["One", "Two", "Three"]) yield* ok("projects", "create", name, "-w", workspace)
        const page = yield* ok("projects", "list", "-w", workspace, "--limit", "2", "--json")
        assert.lengthOf(parse(Schema.Array(Project), page.stdout), 2)
        assert.match(page.stderr, new RegExp(`^More: cpctl projects list -w ${workspace} --limit 2 --cursor \\S+\\n$`))
        const all = yield* ok("projects", "list", "-w", workspace, "--limit", "2", "--all", "--json")
        assert.lengthOf(parse(Schema.Array(Project), all.stdout), 3)
        assert.strictEqual(all.stderr, "")
      }))

    it.effect("destructive commands ask: without a terminal they refuse (exit 2) unless --yes", () =>
      Effect.gen(function*() {
        const { ok, run } = yield* user
        const workspace = parse(Organization, (yield* ok("workspaces", "create", "Danger", "--json")).stdout).slug
        yield* ok("teams", "create", "Ops", "-w", workspace)
        const refused = yield* run("teams", "delete", "ops", "-w", workspace)
        assert.strictEqual(refused.exitCode, 2)
        assert.match(refused.stderr, /^error confirmation_required: .*--yes/)
        assert.lengthOf(JSON.parse((yield* ok("teams", "list", "-w", workspace, "--json")).stdout), 1)
        yield* ok("teams", "delete", "ops", "-w", workspace, "--yes")
        const after = yield* ok("teams", "list", "-w", workspace)
        assert.strictEqual(after.stderr, "No teams.\n")
      }))

    it.effect("usage mistakes exit 2; a server validation error names the flag or argument, not the API field", () =>
      Effect.gen(function*() {
        const { ok, run } = yield* user
        const workspace = parse(Organization, (yield* ok("workspaces", "create", "Usage", "--json")).stdout).slug
        const unknown = yield* run("projects", "list", "-w", workspace, "--bogus")
        assert.strictEqual(unknown.exitCode, 2)
        const lonely = yield* run("config", "get", "-w", workspace, "--environment", "staging")
        assert.strictEqual(lonely.exitCode, 2)
        assert.strictEqual(lonely.stderr, "error usage: --environment needs --project\n")
        const mistyped = yield* run("config", "set", "limit", "abc", "--type", "number", "-w", workspace)
        assert.strictEqual(mistyped.exitCode, 1)
        assert.match(mistyped.stderr, /^error validation_failed: /)
        assert.include(mistyped.stderr, "\"<value>\"")
      }))

    it.effect("a masked setting shows masked, in the table and in --json, unless --reveal", () =>
      Effect.gen(function*() {
        const { ok } = yield* user
        const workspace = parse(Organization, (yield* ok("workspaces", "create", "Masks", "--json")).stdout).slug
        const w = ["-w", workspace]
        yield* ok("config", "set", "db.password", "hunter2", "--visibility", "masked", ...w)
        const table = yield* ok("config", "get", ...w)
        assert.include(table.stdout, "(masked)")
        assert.notInclude(table.stdout, "hunter2")
        assert.include((yield* ok("config", "get", "--reveal", ...w)).stdout, "\"hunter2\"")
        const hidden = parse(Schema.Array(Setting), (yield* ok("config", "get", "db.password", ...w, "--json")).stdout)
        assert.deepInclude(hidden[0], { value: null, masked: true })
        const shown = parse(Schema.Array(Setting), (yield* ok("config", "get", ...w, "--json", "--reveal")).stdout)
        assert.deepInclude(shown[0], { value: "hunter2", masked: true })
        const resolved = yield* ok("config", "resolve", "db.password", ...w)
        assert.include(resolved.stdout, "(masked)")
        const revealed = yield* ok("config", "resolve", "db.password", ...w, "--reveal", "--json")
        assert.strictEqual(parse(ResolvedSetting, revealed.stdout).value, "hunter2")
      }))
  }
)
