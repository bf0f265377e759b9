/**
 * The object store and GC commands of `cpctl` end to end, as a real child process against a real server: `objects
 * put` streams a file and `objects get` writes it back (checked against its digest), `objects missing`, `gc report`,
 * and `gc collect` (a dry run unless `--execute`).
 */
import { GcCollection, GcReport, StoredObject } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs } from "./support/cli.ts"
import { TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const parse = <S extends Schema.Codec<unknown, unknown>>(schema: S, json: string): S["Type"] =>
  Schema.decodeUnknownSync(Schema.fromJsonString(schema))(json)

layer(
  Layer.merge(testServerOver(databaseLayer("pglite"), { GC_GRACE_SECONDS: "0" }), NodeServices.layer),
  { excludeTestServices: true }
)("cpctl objects and gc", (it) => {
  it.effect("objects put, get, missing; gc report and collect", () =>
    Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const user = yield* signInWithPersonal(baseUrl, "objcli")
      const orgId = user.personal.id
      const projectId = yield* createProject(baseUrl, user.token, orgId)
      const cli = (...args: ReadonlyArray<string>) => cpctlAs(baseUrl, user.token, ...args, "-w", orgId)
      const dir = mkdtempSync(join(tmpdir(), "cpctl-objects-"))
      const bytes = randomBytes(1024 * 1024 + 99)
      const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`
      writeFileSync(join(dir, "in.bin"), bytes)

      const put = yield* cli("objects", "put", projectId, join(dir, "in.bin"), "--json")
      assert.strictEqual(put.exitCode, 0, put.stderr)
      const object = parse(StoredObject, put.stdout)
      assert.deepStrictEqual([object.digest, object.size], [digest, bytes.length])

      const got = yield* cli("objects", "get", projectId, digest, "--output", join(dir, "out.bin"))
      assert.strictEqual(got.exitCode, 0, got.stderr)
      assert.isTrue(readFileSync(join(dir, "out.bin")).equals(bytes))

      const absent = `sha256:${"0".repeat(64)}` as const
      const missing = yield* cli("objects", "missing", projectId, digest, absent, "--json")
      assert.deepStrictEqual(parse(Schema.Array(Schema.String), missing.stdout), [absent])
      const unknown = yield* cli("objects", "get", projectId, absent)
      assert.strictEqual(unknown.exitCode, 1)
      assert.match(unknown.stderr, /object_missing/)

      const report = yield* cli("gc", "report", projectId, "--json")
      assert.strictEqual(parse(GcReport, report.stdout).collectable.count, 1)
      const dry = yield* cli("gc", "collect", projectId, "--json")
      assert.deepStrictEqual(parse(GcCollection, dry.stdout).dryRun, true)
      assert.match(dry.stderr, /Dry run/)
      const refused = yield* cli("gc", "collect", projectId, "--execute")
      assert.strictEqual(refused.exitCode, 2)
      const real = yield* cli("gc", "collect", projectId, "--execute", "--yes", "--json")
      assert.deepStrictEqual(parse(GcCollection, real.stdout).digests.map(String), [digest])
    }), 300_000)
})
