/**
 * Outgoing mail (contract §2): kept in the outbox in development and test so people and tests can read it
 * without a mail server, and sent over SMTP in any mode when `SMTP_URL` is set.
 */
import { type JsonObject, OutboxRepo } from "@cp/persistence"
import { Cause, Clock, Context, Effect, Layer, Option, Redacted, Schedule } from "effect"
import { createTransport } from "nodemailer"
import { AppConfig } from "./config.ts"
import { mint } from "./ids.ts"

/** One rendered message; `template` and `data` let the dev outbox and tests read it without parsing `text`. */
export interface MailMessage {
  readonly to: string
  readonly template: string
  readonly subject: string
  readonly text: string
  readonly data: JsonObject
}

/** A slow or dead SMTP server must not hold a request for nodemailer's default minutes. */
const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000 } as const

/** Two more attempts, 200 ms and 400 ms later, ride out a mail server's brief hiccup. */
const SMTP_RETRY = { times: 2, schedule: Schedule.exponential("200 millis") } as const

/** An SMTP transport for the layer's lifetime; options in the URL's query (e.g. `?pool=true`) apply too. */
const smtpTransport = (url: Redacted.Redacted, from: string) =>
  Effect.acquireRelease(
    Effect.sync(() => createTransport({ url: Redacted.value(url), ...SMTP_TIMEOUTS }, { from })),
    (transport) => Effect.sync(() => transport.close())
  )

/** The one way services send mail, so where it goes (outbox, SMTP, both) is decided here from configuration alone. */
export class Mailer extends Context.Service<Mailer, {
  /**
   * A failed SMTP send is retried twice, then logged with its error; it then dies (the caller answers 500 and can
   * retry) unless the message is already kept in the outbox, so no message is dropped silently.
   */
  readonly send: (message: MailMessage) => Effect.Effect<void>
}>()("@cp/server/Mailer") {
  /** Outbox in development and test, SMTP whenever `SMTP_URL` is set; production without SMTP warns at start-up. */
  static readonly layer = Layer.effect(
    Mailer,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const outbox = yield* OutboxRepo
      const keep = AppConfig.isLocal(config)
      const smtp = yield* Effect.transposeOption(
        Option.map(config.smtpUrl, (url) => smtpTransport(url, config.mailFrom))
      )
      if (!keep && Option.isNone(smtp)) {
        yield* Effect.logWarning("SMTP_URL is not set: outgoing mail cannot be delivered in production mode")
      }

      return Mailer.of({
        // Untraced: every sign-in start sends one; the outbox insert and the SMTP send each have their own span.
        send: Effect.fnUntraced(function*(message: MailMessage) {
          const now = yield* Clock.currentTimeMillis
          const id = mint.mailMessage(now)
          const about = { "mail.id": id, "mail.to": message.to, "mail.template": message.template }
          if (keep) {
            yield* outbox.insert({ id, ...message, createdAt: new Date(now) }).pipe(Effect.orDie)
          }
          if (Option.isNone(smtp)) {
            if (keep) return
            return yield* Effect.logWarning("Mail not delivered: SMTP_URL is not set").pipe(Effect.annotateLogs(about))
          }
          const transport = smtp.value
          yield* Effect.tryPromise(() =>
            transport.sendMail({ to: message.to, subject: message.subject, text: message.text })
          ).pipe(
            Effect.retry(SMTP_RETRY),
            Effect.withSpan("Mailer.smtp", { attributes: about }),
            Effect.catch((error) =>
              Effect.logError("Mail could not be sent over SMTP", Cause.fail(error)).pipe(
                Effect.annotateLogs(about),
                Effect.andThen(keep ? Effect.void : Effect.die(error))
              )
            )
          )
        })
      })
    })
  )
}
