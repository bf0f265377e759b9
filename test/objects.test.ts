/**
 * The object store end to end over real HTTP (run-state.md §4, §7): digest-verified PUT (a mismatch stores nothing),
 * GET with ETag, HEAD and single ranges across chunk rows, `missing` with the empty blob, the list by prefix, uploads
 * with parts sent out of order, replaced, completed and completed again, a truncated body that leaves no chunk behind,
 * GC report and collect (dry run by default; refs, the catalog head, job outputs and `references` as roots), the
 * workspace usage and run feed. On PGlite, and PostgreSQL when `DATABASE_URL` is set.
 */
import { GcCollection, GcReport, StateUsage, StoredObject, Upload } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomBytes } from "node:crypto"
import { connect } from "node:net"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { failed, ok, pageOf } from "./support/envelope.ts"
import { call, sqlBackends, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const digestOf = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`
const EMPTY = digestOf(new Uint8Array(0))

for (const backend of sqlBackends) {
  layer(
    Layer.merge(testServerOver(databaseLayer(backend), { GC_GRACE_SECONDS: "0" }), NodeServices.layer),
    { excludeTestServices: true }
  )(
    `objects [${backend}]`,
    (it) => {
      const owner = Effect.gen(function*() {
        const { baseUrl } = yield* TestServer
        const user = yield* signInWithPersonal(baseUrl, "obj")
        const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
        const base = `${baseUrl}/v1/organizations/${user.personal.id}/projects/${projectId}/state`
        const as = (method: string, path: string, body?: unknown) =>
          call(baseUrl, method, `/v1/organizations/${user.personal.id}/projects/${projectId}/state${path}`, {
            token: user.token,
            ...(body === undefined ? {} : { body })
          })
        /** Raw bytes in or out: the exact wire. */
        const raw = (method: string, path: string, body?: Uint8Array, headers: Record<string, string> = {}) =>
          Effect.promise(async () => {
            const response = await fetch(`${base}${path}`, {
              method,
              headers: {
                authorization: `Bearer ${user.token}`,
                ...(body === undefined ? {} : { "content-type": "application/octet-stream" }),
                ...headers
              },
              ...(body === undefined ? {} : { body })
            })
            return {
              status: response.status,
              headers: response.headers,
              bytes: new Uint8Array(await response.arrayBuffer())
            }
          })
        const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
        return { ...user, baseUrl, projectId, base, as, raw, text }
      })

      const objectOf = (res: { readonly status: number; readonly bytes: Uint8Array }) => {
        assert.strictEqual(res.status, 200, new TextDecoder().decode(res.bytes))
        const parsed: unknown = JSON.parse(new TextDecoder().decode(res.bytes))
        return Schema.decodeUnknownSync(
          Schema.Struct({ data: Schema.Struct({ object: Schema.toEncoded(StoredObject) }) })
        )(
          parsed
        ).data.object
      }

      it.effect("PUT stores verified bytes; GET, HEAD and ranges read them back across chunk rows", () =>
        Effect.gen(function*() {
          const { raw } = yield* owner
          const bytes = new Uint8Array(randomBytes(2 * 1024 * 1024 + 12345))
          const digest = digestOf(bytes)
          const stored = objectOf(yield* raw("PUT", `/objects/${digest}`, bytes))
          assert.deepStrictEqual([stored.digest, stored.size], [digest, bytes.length])
          // Already present: answered at once, the same object.
          assert.strictEqual(objectOf(yield* raw("PUT", `/objects/${digest}`, bytes)).createdAt, stored.createdAt)

          const whole = yield* raw("GET", `/objects/${digest}`)
          assert.strictEqual(whole.status, 200)
          assert.strictEqual(whole.headers.get("content-type"), "application/octet-stream")
          assert.strictEqual(whole.headers.get("content-length"), String(bytes.length))
          assert.strictEqual(whole.headers.get("etag"), `"${digest}"`)
          assert.strictEqual(digestOf(whole.bytes), digest)

          const head = yield* raw("HEAD", `/objects/${digest}`)
          assert.deepStrictEqual([head.status, head.bytes.length], [200, 0])
          assert.strictEqual(head.headers.get("content-length"), String(bytes.length))

          // A range straddling the first chunk boundary (1 MiB), a suffix, an open end.
          const mib = 1024 * 1024
          const ranged = yield* raw("GET", `/objects/${digest}`, undefined, { range: `bytes=${mib - 10}-${mib + 9}` })
          assert.strictEqual(ranged.status, 206)
          assert.strictEqual(ranged.headers.get("content-range"), `bytes ${mib - 10}-${mib + 9}/${bytes.length}`)
          assert.deepStrictEqual(Array.from(ranged.bytes), Array.from(bytes.subarray(mib - 10, mib + 10)))
          const suffix = yield* raw("GET", `/objects/${digest}`, undefined, { range: "bytes=-5" })
          assert.deepStrictEqual(Array.from(suffix.bytes), Array.from(bytes.subarray(bytes.length - 5)))
          const open = yield* raw("GET", `/objects/${digest}`, undefined, { range: `bytes=${2 * mib}-` })
          assert.deepStrictEqual(Array.from(open.bytes), Array.from(bytes.subarray(2 * mib)))
          const past = yield* raw("GET", `/objects/${digest}`, undefined, { range: `bytes=${bytes.length}-` })
          assert.strictEqual(past.status, 416)
          assert.strictEqual(past.headers.get("content-range"), `bytes */${bytes.length}`)
        }))

      it.effect("a digest mismatch is 422 with expected and actual, and nothing is stored", () =>
        Effect.gen(function*() {
          const { as, raw } = yield* owner
          const bytes = new TextEncoder().encode("the real bytes")
          const claimed = digestOf(new TextEncoder().encode("other bytes"))
          const res = yield* raw("PUT", `/objects/${claimed}`, bytes)
          assert.strictEqual(res.status, 422)
          const error = JSON.parse(new TextDecoder().decode(res.bytes)).error
          assert.strictEqual(error.code, "validation_failed")
          assert.deepStrictEqual(error.details, { expected: claimed, actual: digestOf(bytes) })
          failed(yield* as("GET", `/objects/${claimed}`), 404, "object_missing")
          assert.deepStrictEqual(
            pageOf(yield* as("GET", "/objects"), { objects: Schema.Array(Schema.Unknown) }).data.objects,
            []
          )
          const sql = yield* SqlClient.SqlClient
          const chunks = yield* sql`select count(*)::int as n from object_chunks c where not exists (
            select 1 from objects o where o.blobs @> jsonb_build_array(jsonb_build_object('id', c.blob_id)))`
          assert.strictEqual(chunks[0]?.["n"], 0)
          // A malformed digest in the path is the route's 404.
          assert.strictEqual((yield* raw("GET", "/objects/sha256:XYZ")).status, 404)
        }))

      it.effect("missing answers absent digests, never the empty blob; the empty blob reads as zero bytes", () =>
        Effect.gen(function*() {
          const { as, raw } = yield* owner
          const bytes = new TextEncoder().encode("present")
          yield* raw("PUT", `/objects/${digestOf(bytes)}`, bytes)
          const absent = digestOf(new TextEncoder().encode("absent"))
          const res = ok(yield* as("POST", "/objects/missing", { digests: [digestOf(bytes), absent, EMPTY] }), {
            missing: Schema.Array(Schema.String)
          })
          assert.deepStrictEqual(res.missing, [absent])
          const empty = yield* raw("GET", `/objects/${EMPTY}`)
          assert.deepStrictEqual([empty.status, empty.bytes.length], [200, 0])
          failed(yield* as("POST", "/objects/missing", { digests: [] }), 422, "validation_failed")
          failed(yield* as("POST", "/objects/missing", { digests: ["sha256:nope"] }), 422, "validation_failed")
        }))

      it.effect("uploads: parts out of order, a replaced part, complete, complete again; a bad size stays", () =>
        Effect.gen(function*() {
          const { as, raw } = yield* owner
          const one = new Uint8Array(randomBytes(1024 * 1024 + 7))
          const two = new Uint8Array(randomBytes(1000))
          const whole = Buffer.concat([one, two])
          const digest = digestOf(whole)
          const started = ok(yield* as("POST", `/objects/${digest}/uploads`, { size: whole.length }), {
            upload: Upload
          }).upload
          assert.match(started.id, /^upl_/)
          const part = (n: number, bytes: Uint8Array) =>
            raw("PUT", `/objects/${digest}/uploads/${started.id}/parts/${n}`, bytes)
          // Part 2 first, then a wrong part 1, replaced by the right one.
          assert.strictEqual((yield* part(2, two)).status, 200)
          assert.strictEqual((yield* part(1, two)).status, 200)
          const wrong = yield* as("POST", `/objects/${digest}/uploads/${started.id}/complete`)
          failed(wrong, 422, "validation_failed")
          const replaced = yield* part(1, one)
          assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(replaced.bytes)).data.part, {
            partNumber: 1,
            size: one.length
          })
          const done = ok(yield* as("POST", `/objects/${digest}/uploads/${started.id}/complete`), {
            object: StoredObject
          }).object
          assert.strictEqual(done.size, whole.length)
          const again = ok(yield* as("POST", `/objects/${digest}/uploads/${started.id}/complete`), {
            object: StoredObject
          }).object
          assert.strictEqual(again.digest, digest)
          assert.strictEqual(digestOf((yield* raw("GET", `/objects/${digest}`)).bytes), digest)
          // Starting an upload of a stored object answers the object.
          const present = ok(yield* as("POST", `/objects/${digest}/uploads`, { size: whole.length }))
          assert.deepStrictEqual(Object.keys(present as object), ["object"])
          // A part of an unknown upload is 404; a part number out of range is the route's 404.
          const other = digestOf(new TextEncoder().encode("x"))
          assert.strictEqual((yield* raw("PUT", `/objects/${other}/uploads/${started.id}/parts/1`, two)).status, 404)
          assert.strictEqual((yield* part(10001, two)).status, 404)
        }))

      it.effect("a body cut short leaves no object and no chunk behind", () =>
        Effect.gen(function*() {
          const { base, token, as } = yield* owner
          const bytes = new Uint8Array(randomBytes(3 * 1024 * 1024))
          const digest = digestOf(bytes)
          const url = new URL(`${base}/objects/${digest}`)
          yield* Effect.promise(() =>
            new Promise<void>((resolve) => {
              const socket = connect(Number(url.port), url.hostname, () => {
                socket.write(
                  `PUT ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${token}\r\n` +
                    `content-type: application/octet-stream\r\ncontent-length: ${bytes.length}\r\n\r\n`
                )
                socket.write(bytes.subarray(0, 2 * 1024 * 1024 + 100), () => setTimeout(() => socket.destroy(), 300))
              })
              socket.on("close", () => resolve())
              socket.on("error", () => resolve())
            })
          )
          // The server notices the cut and deletes what it wrote.
          const sql = yield* SqlClient.SqlClient
          let left = -1
          for (let attempt = 0; attempt < 50 && left !== 0; attempt++) {
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
            const rows = yield* sql`select count(*)::int as n from object_chunks c where not exists (
              select 1 from objects o where o.blobs @> jsonb_build_array(jsonb_build_object('id', c.blob_id)))
              and not exists (select 1 from object_upload_parts p where p.blob_id = c.blob_id)`
            left = Number(rows[0]?.["n"])
          }
          assert.strictEqual(left, 0)
          failed(yield* as("GET", `/objects/${digest}`), 404, "object_missing")
        }))

      it.effect("GC: references keep what they name; collect is a dry run unless asked; usage counts objects", () =>
        Effect.gen(function*() {
          const { as, personal, raw, baseUrl, token } = yield* owner
          const leaf = new TextEncoder().encode("leaf")
          const lone = new TextEncoder().encode("lone")
          const manifest = new TextEncoder().encode(JSON.stringify({ references: [digestOf(leaf)] }))
          for (const bytes of [leaf, lone, manifest]) yield* raw("PUT", `/objects/${digestOf(bytes)}`, bytes)
          // With a grace of 0 nothing is recent: only job outputs of recent runs are roots. The manifest is named by
          // one, and it names the leaf.
          const runId = "01JD0000000000000000000000"
          yield* as("POST", "/runs", { runId, jobs: [{ jobId: "build" }] })
          yield* as("POST", `/runs/${runId}/jobs/build:claim`, { runnerId: "r" })
          yield* as("POST", `/runs/${runId}/jobs/build:complete`, {
            runnerId: "r",
            leaseEpoch: 1,
            outcome: "succeeded",
            outputs: { manifest: digestOf(manifest) }
          })
          // A ref and a published catalog head are roots too.
          const byRef = new TextEncoder().encode("named by a ref")
          const byHead = new TextEncoder().encode(JSON.stringify({ entities: [] }))
          for (const bytes of [byRef, byHead]) yield* raw("PUT", `/objects/${digestOf(bytes)}`, bytes)
          ok(yield* as("PUT", `/refs/${encodeURIComponent("refs/heads/main")}`, { digest: digestOf(byRef) }))
          ok(yield* as("PUT", "/catalog/head", { digest: digestOf(byHead) }))
          const report = ok(yield* as("GET", "/gc/report"), { report: GcReport }).report
          assert.deepStrictEqual(report.objects.count, 5)
          assert.deepStrictEqual(report.reachable.count, 4)
          assert.deepStrictEqual(report.sample, [digestOf(lone)])
          assert.strictEqual(report.graceSeconds, 0)
          const dry = ok(yield* as("POST", "/gc/collect", {}), GcCollection.fields)
          assert.deepStrictEqual([dry.dryRun, dry.digests], [true, [digestOf(lone)]])
          assert.strictEqual((yield* raw("GET", `/objects/${digestOf(lone)}`)).status, 200)
          const real = ok(yield* as("POST", "/gc/collect", { dryRun: false }), GcCollection.fields)
          assert.deepStrictEqual([real.dryRun, real.digests, real.collected], [false, [digestOf(lone)], {
            count: 1,
            bytes: lone.length
          }])
          assert.strictEqual((yield* raw("GET", `/objects/${digestOf(lone)}`)).status, 404)
          assert.strictEqual((yield* raw("GET", `/objects/${digestOf(leaf)}`)).status, 200)
          const usage = ok(
            yield* call(baseUrl, "GET", `/v1/organizations/${personal.id}/state/usage`, { token }),
            { usage: StateUsage }
          ).usage
          assert.deepStrictEqual(usage.objects, {
            count: 4,
            bytes: leaf.length + manifest.length + byRef.length + byHead.length
          })
          const feed = pageOf(
            yield* call(baseUrl, "GET", `/v1/organizations/${personal.id}/state/runs?status=succeeded`, { token }),
            { runs: Schema.Array(Schema.Struct({ id: Schema.String })) }
          )
          assert.deepStrictEqual(feed.data.runs.map((run) => run.id), [runId])
        }))
    }
  )
}
