import { assert } from "@effect/vitest"
import { Data, Deferred, Effect, Fiber, Layer } from "effect"
import { UniqueViolation } from "../../src/errors.ts"
import { type OutboxMessage, OutboxRepo } from "../../src/platform/OutboxRepo.ts"
import { ServerSecretsRepo } from "../../src/platform/ServerSecretsRepo.ts"
import { Transactor } from "../../src/Transactor.ts"
import { describeContract, unique } from "../harness.ts"

class Refused extends Data.TaggedError("Refused")<{}> {}

const message = (to: string): OutboxMessage => ({
  id: unique("msg"),
  to,
  template: "t",
  subject: "s",
  text: "x",
  data: {},
  createdAt: new Date("2030-01-01T00:00:00.000Z")
})

const repositories = {
  memory: Layer.mergeAll(OutboxRepo.memory, ServerSecretsRepo.memory),
  sql: Layer.mergeAll(OutboxRepo.sql, ServerSecretsRepo.sql)
}

describeContract("Transactor", repositories, (it) => {
  it.effect("commits every write of a successful transaction", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const outbox = yield* OutboxRepo
      const to = unique("to")
      const [a, b] = [message(to), message(to)]
      yield* withTransaction(Effect.all([outbox.insert(a), outbox.insert(b)]))
      assert.strictEqual((yield* outbox.list({ to })).length, 2)
    }))

  it.effect("rolls back every write when the transaction fails with a typed error", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const outbox = yield* OutboxRepo
      const secrets = yield* ServerSecretsRepo
      const to = unique("to")
      const name = unique("secret")
      const error = yield* Effect.flip(withTransaction(Effect.gen(function*() {
        yield* outbox.insert(message(to))
        yield* secrets.getOrCreate(name, () => "first")
        return yield* new Refused()
      })))
      assert.instanceOf(error, Refused)
      assert.deepStrictEqual(yield* outbox.list({ to }), [])
      assert.strictEqual(yield* secrets.getOrCreate(name, () => "second"), "second")
    }))

  it.effect("a unique violation fails the transaction and undoes its earlier writes", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const outbox = yield* OutboxRepo
      const taken = message(unique("to"))
      yield* outbox.insert(taken)
      const to = unique("to")
      const error = yield* Effect.flip(withTransaction(Effect.gen(function*() {
        yield* outbox.insert(message(to))
        yield* outbox.insert({ ...taken, to })
      })))
      assert.deepStrictEqual(error, new UniqueViolation({ constraint: "mail_outbox_pkey" }))
      assert.deepStrictEqual(yield* outbox.list({ to }), [])
    }))

  it.effect("a failed nested transaction undoes only its own writes", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const outbox = yield* OutboxRepo
      const to = unique("to")
      const [kept, undone, alsoKept] = [message(to), message(to), message(to)]
      yield* withTransaction(Effect.gen(function*() {
        yield* outbox.insert(kept)
        yield* withTransaction(Effect.andThen(outbox.insert(undone), new Refused())).pipe(Effect.ignore)
        yield* outbox.insert(alsoKept)
      }))
      const ids = (yield* outbox.list({ to })).map((m) => m.id).sort()
      assert.deepStrictEqual(ids, [kept.id, alsoKept.id].sort())
    }))

  it.effect("an interrupted transaction leaves nothing behind", () =>
    Effect.gen(function*() {
      const { withTransaction } = yield* Transactor
      const outbox = yield* OutboxRepo
      const to = unique("to")
      const written = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(withTransaction(Effect.gen(function*() {
        yield* outbox.insert(message(to))
        yield* Deferred.succeed(written, undefined)
        return yield* Effect.never
      })))
      yield* Deferred.await(written)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(yield* outbox.list({ to }), [])
    }))

  it.effect("lock: transactions taking one key run one after the other, until the first ends", () =>
    Effect.gen(function*() {
      const { withTransaction, lock } = yield* Transactor
      const key = unique("lock")
      const order: Array<string> = []
      const locked = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(withTransaction(Effect.gen(function*() {
        yield* lock(key)
        yield* Deferred.succeed(locked, undefined)
        yield* Effect.sleep("150 millis")
        order.push("first committed")
      })))
      yield* Deferred.await(locked)
      yield* withTransaction(Effect.gen(function*() {
        yield* lock(key)
        order.push("second locked")
      }))
      yield* Fiber.join(first)
      assert.deepStrictEqual(order, ["first committed", "second locked"])
    }))
})
