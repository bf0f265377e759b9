/** Identity commands: `login` (email code), `logout` and `whoami`. */
import { ChallengeId, Email, type LoginChallenge, type Session, Unauthenticated, type User } from "@cp/domain"
import { Console, Effect, Option, Schema } from "effect"
import { Command, Flag, Prompt, TerminalCapabilities } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CredentialsStore } from "../credentials.ts"
import { CliFailure } from "../errors.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

/** The code in the sign-in email, as `loginComplete` accepts it. */
const LoginCode = Schema.String.check(
  Schema.isPattern(/^\d{6}$/, { message: "must be the 6-digit code from the email" })
)

const validateWith = (schema: Schema.Codec<string, string>) => (value: string) =>
  Effect.mapError(Schema.decodeEffect(schema)(value), (error) => error.message)

/** The flag's value, else the answer to a prompt; without a terminal to ask on, the flag is required. */
const flagOrPrompt = Effect.fnUntraced(
  function*(flag: string, given: Option.Option<string>, prompt: Prompt.Prompt<string>) {
    if (Option.isSome(given)) return given.value
    const { canPrompt } = yield* TerminalCapabilities.TerminalCapabilities
    if (!canPrompt) {
      return yield* new CliFailure({ code: "input_required", message: `--${flag} is required without a terminal` })
    }
    return yield* prompt
  }
)

const emailPrompt = Prompt.String({ message: "Email", validate: validateWith(Email) })
const codePrompt = Prompt.String({ message: "Code from the email", validate: validateWith(LoginCode) })

const codeSent = (challenge: LoginChallenge) =>
  `A sign-in code was sent to ${challenge.delivery.emailHint}; it expires at ${challenge.expiresAt.toISOString()}.`

/**
 * `cpctl login`: email code sign-in; stores the session token and the server for later commands. Without a
 * terminal it stops once the code is sent, and `--challenge` with `--code` finishes the sign-in.
 */
export const login = Command.make(
  "login",
  {
    email: Flag.String("email").pipe(
      Flag.withSchema(Email),
      Flag.withDescription("Email address to sign in with (prompted for when absent)"),
      Flag.optional
    ),
    challenge: Flag.String("challenge").pipe(
      Flag.withSchema(ChallengeId),
      Flag.withDescription("Finish the sign-in an earlier `cpctl login` started (its chl_… id)"),
      Flag.optional
    ),
    code: Flag.String("code").pipe(
      Flag.withSchema(LoginCode),
      Flag.withDescription("The 6-digit code from the email (prompted for when absent)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.login")(function*({ email, challenge, code }) {
    const { api, connection } = yield* ControlPlaneClient

    const finish = Effect.fnUntraced(function*(challengeId: ChallengeId) {
      const session = yield* api.identity.loginComplete({
        payload: { challengeId, code: yield* flagOrPrompt("code", code, codePrompt) }
      })
      yield* (yield* CredentialsStore).save({ baseUrl: connection.baseUrl, token: session.token })
      yield* printResult(
        { baseUrl: connection.baseUrl, user: session.user, expiresAt: session.expiresAt },
        ({ baseUrl, user, expiresAt }) =>
          `Signed in to ${baseUrl} as ${user.email} (${user.id}); the session expires at ${expiresAt.toISOString()}.`
      )
    })

    if (Option.isSome(challenge)) return yield* finish(challenge.value)
    if (Option.isSome(code)) {
      return yield* new CliFailure({
        code: "invalid_flags",
        message: "--code goes with the --challenge that `cpctl login --email …` printed"
      })
    }
    const sent = yield* api.identity.loginStart({
      payload: { email: yield* flagOrPrompt("email", email, emailPrompt) }
    })
    const { canPrompt } = yield* TerminalCapabilities.TerminalCapabilities
    if (!canPrompt) {
      return yield* printResult(
        sent,
        (sent) => `${codeSent(sent)}\nFinish with: cpctl login --challenge ${sent.challengeId} --code <code>`
      )
    }
    yield* Console.error(codeSent(sent))
    return yield* finish(sent.challengeId)
  })
).pipe(
  Command.withDescription("Sign in with a code sent by email and remember the session"),
  Command.withExamples([
    { command: "cpctl login", description: "Sign in interactively" },
    {
      command: "cpctl login --email me@example.com --json",
      description: "From a script: send the code, print the challenge"
    },
    { command: "cpctl login --challenge chl_… --code 123456", description: "From a script: finish that sign-in" }
  ]),
  withClient
)

/** `cpctl logout`: ends the session on the server and forgets the stored token. */
export const logout = Command.make(
  "logout",
  {},
  Effect.fn("cpctl.logout")(function*() {
    const { api, connection } = yield* ControlPlaneClient
    const store = yield* CredentialsStore
    // A token the server no longer accepts is as good as logged out.
    const result = yield* api.session.logout({}).pipe(
      Effect.catchIf((error) => error instanceof Unauthenticated, () => Effect.succeed({ success: true as const }))
    )
    const stored = yield* store.load
    if (Option.exists(stored, (credentials) => Option.contains(connection.token, credentials.token))) {
      yield* store.remove
    }
    yield* printResult(result, () => `Signed out of ${connection.baseUrl}.`)
  })
).pipe(Command.withDescription("End the session and forget the stored token"), withClient)

const sessionColumns: Columns<{ readonly session: Session; readonly user: User }> = {
  user: (view) => view.user.id,
  email: (view) => view.user.email,
  name: (view) => view.user.displayName,
  session: (view) => view.session.id,
  expires: (view) => view.session.expiresAt
}

/** `cpctl whoami`: the signed-in user and session. */
export const whoami = Command.make(
  "whoami",
  {},
  Effect.fn("cpctl.whoami")(function*() {
    const { api } = yield* ControlPlaneClient
    const view = yield* api.session.session({})
    yield* printResult(view, (view) => renderTable(sessionColumns, [view]))
  })
).pipe(Command.withDescription("Show the signed-in user and session"), withClient)
