import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { ServerSecretsRepo } from "../../src/platform/ServerSecretsRepo.ts"
import { describeContract, unique } from "../harness.ts"

describeContract("ServerSecretsRepo", ServerSecretsRepo, (it) => {
  it.effect("creates a secret once and returns it ever after", () =>
    Effect.gen(function*() {
      const repo = yield* ServerSecretsRepo
      const name = unique("SECRETS_KEK")
      let generated = 0
      const generate = () => `value-${++generated}`
      assert.strictEqual(yield* repo.getOrCreate(name, generate), "value-1")
      assert.strictEqual(yield* repo.getOrCreate(name, generate), "value-1")
      assert.strictEqual(generated, 1)
    }))

  it.effect("racing creators agree on one value", () =>
    Effect.gen(function*() {
      const repo = yield* ServerSecretsRepo
      const name = unique("TOKEN_SIGNING_KEY")
      const values = yield* Effect.all(
        ["a", "b", "c", "d"].map((value) => repo.getOrCreate(name, () => value)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(new Set(values).size, 1)
    }))
})
