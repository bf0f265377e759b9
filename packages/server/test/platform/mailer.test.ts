import { OutboxRepo } from "@cp/persistence"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Logger, type LogLevel } from "effect"
import { TestClock } from "effect/testing"
import { createServer } from "node:net"
import { AppConfig } from "../../src/platform/config.ts"
import { Mailer, type MailMessage } from "../../src/platform/mailer.ts"
import { body, header, startSmtpSink } from "../support/smtpSink.ts"

const keys = { SECRETS_KEK: "a2V5", TOKEN_SIGNING_KEY: "c2lnbg==" }
const from = "Control Plane <no-reply@cp.test>"

/** The mailer on a memory outbox, configured as `APP_ENV=<env>` with `SMTP_URL` when given. */
const mailerLayer = (env: "development" | "test" | "production", smtpUrl?: string) =>
  Mailer.layer.pipe(
    Layer.provideMerge(OutboxRepo.memory),
    Layer.provide(AppConfig.layerFromEnv({ ...keys, APP_ENV: env, MAIL_FROM: from, SMTP_URL: smtpUrl }))
  )

const message: MailMessage = {
  to: "ada@example.test",
  template: "login_code",
  subject: "Your sign-in code is 123456",
  text: "Your sign-in code is 123456.",
  data: { code: "123456", challengeId: "chl_1" }
}

interface Logged {
  readonly level: LogLevel.LogLevel
  readonly text: string
}

/** Every log line, with its message and failure cause flattened to text. */
const captureLogs = () => {
  const lines: Array<Logged> = []
  const layer = Logger.layer([
    Logger.make(({ cause, logLevel, message }) => {
      const parts = Array.isArray(message) ? message : [message]
      lines.push({ level: logLevel, text: [...parts.map(String), Cause.pretty(cause)].join(" ") })
    })
  ])
  return { lines, layer }
}

/** An SMTP URL nothing listens on: a port the OS handed out and took back. */
const deadSmtpUrl = Effect.callback<string>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const bound = server.address()
    const port = bound !== null && typeof bound === "object" ? bound.port : 0
    server.close(() => resume(Effect.succeed(`smtp://127.0.0.1:${port}`)))
  })
})

describe("Mailer", () => {
  it.effect("test mode keeps every message in the outbox with a msg_ id and the Clock's time", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2030-05-06T07:08:09.010Z"))
      yield* (yield* Mailer).send(message)
      const kept = yield* (yield* OutboxRepo).list({ to: "ada@example.test" })
      assert.strictEqual(kept.length, 1)
      const [first] = kept
      assert.isTrue(first?.id.startsWith("msg_"))
      assert.deepStrictEqual(first, {
        id: first?.id ?? "",
        ...message,
        createdAt: new Date("2030-05-06T07:08:09.010Z")
      })
    }).pipe(Effect.provide(mailerLayer("test"))))

  it.effect("with SMTP_URL a message arrives over SMTP with its recipient, sender, subject and text", () =>
    Effect.gen(function*() {
      const sink = yield* startSmtpSink()
      yield* Effect.gen(function*() {
        yield* (yield* Mailer).send(message)
        assert.strictEqual(sink.received.length, 1)
        const [mail] = sink.received
        if (mail === undefined) return assert.fail("no mail arrived")
        assert.deepStrictEqual(mail.recipients, ["ada@example.test"])
        assert.strictEqual(mail.from, "no-reply@cp.test")
        assert.strictEqual(header(mail, "To"), "ada@example.test")
        assert.strictEqual(header(mail, "From"), from)
        assert.strictEqual(header(mail, "Subject"), message.subject)
        assert.strictEqual(body(mail).trim(), message.text)
        // Production keeps no outbox: SMTP is the only copy.
        assert.deepStrictEqual(yield* (yield* OutboxRepo).list({}), [])
      }).pipe(Effect.provide(mailerLayer("production", sink.url)))
    }))

  it.effect("development with SMTP_URL both keeps and sends", () =>
    Effect.gen(function*() {
      const sink = yield* startSmtpSink()
      yield* Effect.gen(function*() {
        yield* (yield* Mailer).send(message)
        assert.strictEqual(sink.received.length, 1)
        assert.strictEqual((yield* (yield* OutboxRepo).list({})).length, 1)
      }).pipe(Effect.provide(mailerLayer("development", sink.url)))
    }))

  it.live("a refused SMTP send is tried three times, logged with its error, and still kept in development", () =>
    Effect.gen(function*() {
      const logs = captureLogs()
      const sink = yield* startSmtpSink({ rejectMail: true })
      yield* Effect.gen(function*() {
        yield* (yield* Mailer).send(message)
        assert.strictEqual((yield* (yield* OutboxRepo).list({})).length, 1)
      }).pipe(Effect.provide(mailerLayer("development", sink.url)), Effect.provide(logs.layer))
      assert.strictEqual(sink.connections(), 3)
      assert.deepStrictEqual(sink.received, [])
      const errors = logs.lines.filter((line) => line.level === "Error")
      assert.strictEqual(errors.length, 1)
      assert.include(errors[0]?.text, "Mail could not be sent over SMTP")
      assert.include(errors[0]?.text, "451 Try again later")
    }))

  it.live("a failed SMTP send in production, with no outbox copy, is logged and dies", () =>
    Effect.gen(function*() {
      const logs = captureLogs()
      const url = yield* deadSmtpUrl
      const exit = yield* Effect.exit(
        Effect.gen(function*() {
          yield* (yield* Mailer).send(message)
        }).pipe(
          Effect.provide(mailerLayer("production", url)),
          Effect.provide(logs.layer)
        )
      )
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause))
      const errors = logs.lines.filter((line) => line.level === "Error")
      assert.strictEqual(errors.length, 1)
      assert.include(errors[0]?.text, "Mail could not be sent over SMTP")
      assert.include(errors[0]?.text, "ECONNREFUSED")
    }))

  it.effect("production without SMTP_URL warns at start-up that mail cannot be delivered", () =>
    Effect.gen(function*() {
      const logs = captureLogs()
      yield* Effect.gen(function*() {
        yield* (yield* Mailer).send(message)
      }).pipe(Effect.provide(mailerLayer("production")), Effect.provide(logs.layer))
      const warnings = logs.lines.filter((line) => line.level === "Warn").map((line) => line.text)
      assert.isTrue(warnings.some((text) => text.includes("SMTP_URL is not set: outgoing mail cannot be delivered")))
      assert.isTrue(warnings.some((text) => text.includes("Mail not delivered")))
    }))
})
