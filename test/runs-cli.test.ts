/**
 * The run-state commands of `cpctl` end to end, as a real child process against a real server: `cpctl runner` runs a
 * three-job graph (claim, heartbeat, a shell command per job, its output in the job's log, complete) to success, and
 * reports a failing job with exit 1; `runs list|get|cancel|log`, `jobs list`, `logs tail`, and `link` from the git
 * remote of the working directory.
 */
import { CliLink, Job, Run, RunEvent } from "@cp/domain"
import { NodeServices } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { monotonicFactory } from "ulid"
import { databaseLayer } from "../packages/persistence/test/harness.ts"
import { cpctlAs, cpctlRun, printedAs, tokenEnv } from "./support/cli.ts"
import { ok } from "./support/envelope.ts"
import { call, TestServer, testServerOver } from "./support/server.ts"
import { createProject, signInWithPersonal } from "./support/session.ts"

const ulid = monotonicFactory()

layer(Layer.merge(testServerOver(databaseLayer("pglite")), NodeServices.layer), { excludeTestServices: true })(
  "cpctl run-state commands",
  (it) => {
    const setup = Effect.gen(function*() {
      const { baseUrl } = yield* TestServer
      const user = yield* signInWithPersonal(baseUrl, "cli")
      const orgId = user.personal.id
      const projectId = yield* createProject(baseUrl, user.token, orgId)
      const newRun = (jobs: ReadonlyArray<{ readonly jobId: string; readonly dependsOn?: ReadonlyArray<string> }>) =>
        Effect.gen(function*() {
          const runId = ulid()
          ok(
            yield* call(baseUrl, "POST", `/v1/organizations/${orgId}/projects/${projectId}/state/runs`, {
              token: user.token,
              body: { runId, jobs }
            }),
            { run: Run }
          )
          return runId
        })
      const cli = (...args: ReadonlyArray<string>) => cpctlAs(baseUrl, user.token, ...args, "-w", orgId)
      return { ...user, baseUrl, orgId, projectId, newRun, cli }
    })

    it.effect("cpctl runner runs a three-job graph end to end; the other commands read what it did", () =>
      Effect.gen(function*() {
        const { cli, newRun, projectId } = yield* setup
        const runId = yield* newRun([
          { jobId: "build" },
          { jobId: "test", dependsOn: ["build"] },
          { jobId: "deploy", dependsOn: ["test"] }
        ])
        const ran = yield* cli(
          "runner",
          projectId,
          runId,
          "--command",
          "echo \"job $CP_JOB_ID run $CP_RUN_ID attempt $CP_ATTEMPT\"",
          "--runner-id",
          "cli-runner",
          "--lease-seconds",
          "30",
          "--json"
        )
        assert.strictEqual(ran.exitCode, 0, ran.stderr)
        const run = printedAs(ran, Run)
        assert.strictEqual(run.status, "succeeded")
        assert.strictEqual(run.jobCounts.succeeded, 3)
        assert.match(ran.stderr, /build: succeeded \(exit 0\)/)

        const jobs = printedAs(yield* cli("jobs", "list", projectId, runId, "--json"), Schema.Array(Job))
        assert.deepStrictEqual(jobs.map((job) => [job.jobId, job.status, job.runnerId, job.exitCode]), [
          ["build", "succeeded", "cli-runner", 0],
          ["test", "succeeded", "cli-runner", 0],
          ["deploy", "succeeded", "cli-runner", 0]
        ])
        const tail = yield* cli("logs", "tail", projectId, runId, "test")
        assert.strictEqual(tail.exitCode, 0, tail.stderr)
        assert.strictEqual(tail.stdout, `job test run ${runId} attempt 1\n`)
        const followed = yield* cli("logs", "tail", projectId, runId, "deploy", "--follow")
        assert.strictEqual(followed.stdout, `job deploy run ${runId} attempt 1\n`)
        const events = printedAs(yield* cli("runs", "log", projectId, runId, "--json", "--all"), Schema.Array(RunEvent))
        assert.deepStrictEqual(events.map((event) => event.type), [
          "state.run.created",
          "state.job.claimed",
          "state.job.succeeded",
          "state.job.claimed",
          "state.job.succeeded",
          "state.job.claimed",
          "state.job.succeeded",
          "state.run.finished"
        ])
        const got = printedAs(yield* cli("runs", "get", projectId, runId, "--json"), Run)
        assert.strictEqual(got.id, runId)
        const listed = printedAs(
          yield* cli("runs", "list", projectId, "--status", "succeeded", "--json"),
          Schema.Array(Run)
        )
        assert.include(listed.map((r) => r.id), runId)
      }))

    it.effect("a failing job ends the runner with exit 1; runs cancel asks for --yes and cancels", () =>
      Effect.gen(function*() {
        const { cli, newRun, projectId } = yield* setup
        const runId = yield* newRun([{ jobId: "a" }, { jobId: "b", dependsOn: ["a"] }])
        const ran = yield* cli("runner", projectId, runId, "--command", "echo boom; exit 3")
        assert.strictEqual(ran.exitCode, 1, ran.stderr)
        assert.match(ran.stderr, /error run_failed: Run .* ended failed/)
        const jobs = printedAs(yield* cli("jobs", "list", projectId, runId, "--json"), Schema.Array(Job))
        assert.deepStrictEqual(jobs.map((job) => [job.status, job.exitCode]), [["failed", 3], ["pending", null]])

        const other = yield* newRun([{ jobId: "a" }])
        const unconfirmed = yield* cli("runs", "cancel", projectId, other)
        assert.strictEqual(unconfirmed.exitCode, 2, unconfirmed.stderr)
        const canceled = printedAs(yield* cli("runs", "cancel", projectId, other, "--yes", "--json"), Run)
        assert.strictEqual(canceled.status, "canceled")
        const again = yield* cli("runs", "cancel", projectId, other, "--yes")
        assert.strictEqual(again.exitCode, 1)
        assert.match(again.stderr, /error run_terminal/)
      }))

    it.effect("cpctl link links the working directory's git remote (or --remote)", () =>
      Effect.gen(function*() {
        const { baseUrl, orgId, token } = yield* setup
        const dir = mkdtempSync(join(tmpdir(), "cpctl-link-"))
        execFileSync("git", ["init", "-q", dir])
        execFileSync("git", ["-C", dir, "remote", "add", "origin", "git@github.com:Acme/Linked-Repo.git"])
        const env = { ...tokenEnv(baseUrl, token), PATH: process.env["PATH"] ?? "/usr/bin:/bin" }
        const linked = yield* cpctlRun(env, ["link", "-w", orgId, "--json"], undefined, dir)
        assert.strictEqual(linked.exitCode, 0, linked.stderr)
        const link = printedAs(linked, CliLink)
        assert.strictEqual(link.remoteUrl, "https://github.com/Acme/Linked-Repo")
        assert.strictEqual(link.projectSlug, "linked-repo")
        const explicit = yield* cpctlRun(env, [
          "link",
          "-w",
          orgId,
          "--remote",
          "https://git.example/team/other.git",
          "--project",
          "linked-repo",
          "--json"
        ])
        assert.strictEqual(printedAs(explicit, CliLink).projectId, link.projectId)
        const empty = mkdtempSync(join(tmpdir(), "cpctl-nolink-"))
        const none = yield* cpctlRun(env, ["link", "-w", orgId], undefined, empty)
        assert.strictEqual(none.exitCode, 2, none.stderr)
      }))
  }
)
