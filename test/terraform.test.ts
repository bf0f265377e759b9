/**
 * The real `terraform` binary against the server's `http` backend (run-state.md §6): `init`, an `apply` of a
 * `terraform_data` resource (built into Terraform, so nothing is downloaded), a second concurrent `apply` that meets
 * the first one's lock, `force-unlock` of the lock the killed first apply left behind, another `apply`, and `state
 * pull` reading back what the server stores. Credentials go as Basic with the token as password (contract §4).
 * Skipped, with the reason printed, when `terraform` is not on PATH.
 */
import { Environment, TfStateSummary } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { ok } from "./support/envelope.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const terraformVersion = spawnSync("terraform", ["version"], { encoding: "utf8" })
const hasTerraform = terraformVersion.status === 0
if (!hasTerraform) {
  console.warn("terraform.test.ts skipped: no `terraform` on PATH (.ci/run installs it when a registry offers it)")
}

/** One resource; with `hold`, its provisioner waits until the file `release` exists (an apply that takes a while). */
const MAIN_TF = `
terraform {
  backend "http" {}
}

variable "hold" {
  type    = bool
  default = false
}

variable "value" {
  type    = string
  default = "first"
}

resource "terraform_data" "example" {
  input = var.value

  provisioner "local-exec" {
    command = var.hold ? "while [ ! -f release ]; do sleep 0.1; done" : "true"
  }
}
`

interface Finished {
  readonly code: number | null
  readonly output: string
}

const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/** Starts `terraform args` in `dir` with `env`; `done` resolves with its exit code and everything it printed. */
const start = (dir: string, env: Record<string, string>, args: ReadonlyArray<string>) => {
  const child = spawn("terraform", args, {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  running.add(child)
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => void (output += chunk.toString("utf8")))
  child.stderr.on("data", (chunk: Buffer) => void (output += chunk.toString("utf8")))
  const done = new Promise<Finished>((resolve) =>
    child.once("exit", (code) => {
      running.delete(child)
      resolve({ code, output })
    })
  )
  return { child, done }
}

const terraform = (dir: string, env: Record<string, string>, ...args: ReadonlyArray<string>) =>
  Effect.promise(() => start(dir, env, args).done)

const succeeded = (result: Finished, what: string) => assert.strictEqual(result.code, 0, `${what}:\n${result.output}`)

layer(Layer.merge(testServerOver(databaseLayer("pglite")), NodeServices.layer), { excludeTestServices: true })(
  "terraform http backend",
  (it) => {
    it.effect.skipIf(!hasTerraform)(
      "init, apply, a concurrent apply meets the lock, force-unlock, apply, state pull",
      () =>
        Effect.gen(function*() {
          const { baseUrl } = yield* TestServer
          const user = yield* signInWithPersonal(baseUrl, "terraform")
          const projectId = yield* createProject(baseUrl, user.token, user.personal.id)
          const project = `/v1/organizations/${user.personal.id}/projects/${projectId}`
          const environment = ok(
            yield* call(baseUrl, "POST", `${project}/environments`, { token: user.token, body: { name: "Prod" } }),
            { environment: Environment }
          ).environment
          const address = `${baseUrl}${project}/state/tfstate/app/${environment.slug}`
          const dir = mkdtempSync(join(tmpdir(), "cp-terraform-"))
          yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
          writeFileSync(join(dir, "main.tf"), MAIN_TF)
          writeFileSync(join(dir, "terraformrc"), "")
          const env = {
            TF_CLI_CONFIG_FILE: join(dir, "terraformrc"),
            TF_IN_AUTOMATION: "1",
            CHECKPOINT_DISABLE: "1",
            TF_HTTP_ADDRESS: address,
            TF_HTTP_LOCK_ADDRESS: address,
            TF_HTTP_UNLOCK_ADDRESS: address,
            TF_HTTP_LOCK_METHOD: "LOCK",
            TF_HTTP_UNLOCK_METHOD: "UNLOCK",
            TF_HTTP_USERNAME: "terraform",
            TF_HTTP_PASSWORD: user.token,
            TF_HTTP_RETRY_MAX: "0"
          }
          const states = Effect.map(
            call(baseUrl, "GET", `${project}/state/tfstate`, { token: user.token }),
            (res) => ok(res, { states: Schema.Array(TfStateSummary) }).states
          )

          succeeded(yield* terraform(dir, env, "init", "-input=false", "-no-color"), "init")

          // The first apply holds the lock while its provisioner waits; the second meets it.
          const first = start(dir, env, ["apply", "-auto-approve", "-input=false", "-no-color", "-var", "hold=true"])
          let held: typeof TfStateSummary.Encoded | undefined
          for (let i = 0; i < 600 && held === undefined; i++) {
            held = (yield* states).find((state) => state.locked)
            if (held === undefined) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
          }
          assert.isDefined(held, "the first apply never took the lock")
          const lockId = held?.lock?.ID ?? ""
          const second = yield* terraform(
            dir,
            env,
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-lock-timeout=0s"
          )
          assert.notStrictEqual(second.code, 0, second.output)
          assert.include(second.output, "Error acquiring the state lock")
          assert.include(second.output, lockId)

          // The first apply dies holding the lock; force-unlock (an UNLOCK with an empty body) releases it.
          first.child.kill("SIGKILL")
          yield* Effect.promise(() => first.done)
          writeFileSync(join(dir, "release"), "") // ends the provisioner's loop the killed apply left running
          assert.isTrue((yield* states).some((state) => state.locked && state.lock?.ID === lockId))
          succeeded(yield* terraform(dir, env, "force-unlock", "-force", "-no-color", lockId), "force-unlock")
          assert.isFalse((yield* states).some((state) => state.locked))

          succeeded(
            yield* terraform(dir, env, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "value=second"),
            "apply"
          )
          const pulled = yield* terraform(dir, env, "state", "pull")
          succeeded(pulled, "state pull")
          const stored = yield* call(baseUrl, "GET", `${project}/state/tfstate/app/${environment.slug}`, {
            token: user.token
          })
          assert.strictEqual(stored.status, 200)
          const state = Schema.decodeUnknownSync(
            Schema.fromJsonString(Schema.Struct({
              serial: Schema.Number,
              lineage: Schema.String,
              resources: Schema.Array(Schema.Struct({ type: Schema.String, name: Schema.String }))
            }))
          )(pulled.output)
          assert.deepStrictEqual(state.resources.map((r) => `${r.type}.${r.name}`), ["terraform_data.example"])
          assert.deepStrictEqual(JSON.parse(stored.text), JSON.parse(pulled.output))
          assert.isFalse((yield* states).some((s) => s.locked), "the last apply released its lock")
        }),
      240_000
    )
  }
)
