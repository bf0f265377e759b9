import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { UniqueViolation } from "../../src/errors.ts"
import { type OutboxMessage, OutboxRepo } from "../../src/platform/OutboxRepo.ts"
import { describeContract, unique } from "../harness.ts"

const t0 = new Date("2030-01-01T00:00:00.000Z")

const message = (to: string, minutes: number, overrides: Partial<OutboxMessage> = {}): OutboxMessage => ({
  id: unique("msg"),
  to,
  template: "verify_email",
  subject: "Verify your email",
  text: "Click the link",
  data: { verify_url: "https://example.test/v?t=1", nested: { someKey: [1, null, true] } },
  createdAt: new Date(t0.getTime() + minutes * 60_000),
  ...overrides
})

describeContract("OutboxRepo", OutboxRepo, (it) => {
  it.effect("lists one recipient's messages newest first, matching the address in any case", () =>
    Effect.gen(function*() {
      const repo = yield* OutboxRepo
      const address = `${unique("ada")}@example.test`
      const older = message(address, 1)
      const newer = message(address.toUpperCase(), 2)
      yield* repo.insert(older)
      yield* repo.insert(newer)
      yield* repo.insert(message(`${unique("bob")}@example.test`, 3))
      assert.deepStrictEqual(yield* repo.list({ to: address.toUpperCase() }), [newer, older])
      assert.deepStrictEqual(yield* repo.list({ to: address }), [newer, older])
    }))

  it.effect("lists everyone's messages newest first without a recipient", () =>
    Effect.gen(function*() {
      const repo = yield* OutboxRepo
      const first = message(`${unique("a")}@example.test`, 10_000)
      const second = message(`${unique("b")}@example.test`, 10_001)
      yield* repo.insert(first)
      yield* repo.insert(second)
      const ids = (yield* repo.list({})).map((m) => m.id)
      assert.deepStrictEqual(ids.slice(0, 2), [second.id, first.id])
    }))

  it.effect("a taken id is a UniqueViolation on mail_outbox_pkey", () =>
    Effect.gen(function*() {
      const repo = yield* OutboxRepo
      const original = message(`${unique("c")}@example.test`, 1)
      yield* repo.insert(original)
      const error = yield* Effect.flip(repo.insert({ ...original, subject: "again" }))
      assert.instanceOf(error, UniqueViolation)
      assert.strictEqual(error.constraint, "mail_outbox_pkey")
      assert.deepStrictEqual(yield* repo.list({ to: original.to }), [original])
    }))
})
