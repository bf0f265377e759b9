/**
 * The credentials file `login` writes: the server signed in to and the session token, readable by the
 * owner only (file 0600 in a 0700 directory).
 */
import { Config, Context, Effect, FileSystem, Layer, Option, Path, Schema } from "effect"
import { homedir } from "node:os"
import { CliFailure } from "./errors.ts"

/** What `login` stores. */
export const StoredCredentials = Schema.Struct({ baseUrl: Schema.String, token: Schema.String })
export type StoredCredentials = typeof StoredCredentials.Type

const CredentialsJson = Schema.fromJsonString(StoredCredentials)

const fileFailure = (action: string, file: string) => (error: { readonly message: string }) =>
  new CliFailure({
    code: "credentials_file",
    message: `cannot ${action} ${file}: ${error.message}`
  })

/** Reads, writes and removes `credentials.json` in `$CP_CONFIG_DIR`, else `~/.config/cpctl`. */
export class CredentialsStore extends Context.Service<CredentialsStore, {
  readonly file: string
  readonly load: Effect.Effect<Option.Option<StoredCredentials>, CliFailure>
  readonly save: (credentials: StoredCredentials) => Effect.Effect<void, CliFailure>
  readonly remove: Effect.Effect<void, CliFailure>
}>()("@cp/cli/CredentialsStore") {
  static readonly layer = Layer.effect(
    CredentialsStore,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const dir = Option.getOrElse(
        yield* Effect.orDie(Config.option(Config.String("CP_CONFIG_DIR"))),
        () => path.join(homedir(), ".config", "cpctl")
      )
      const file = path.join(dir, "credentials.json")

      const load = Effect.gen(function*() {
        if (!(yield* fs.exists(file))) return Option.none()
        return Option.some(yield* Schema.decodeEffect(CredentialsJson)(yield* fs.readFileString(file)))
      }).pipe(Effect.mapError(fileFailure("read", file)))

      // Written beside the file and renamed over it, so the token never sits in a file with wider permissions.
      const save = (credentials: StoredCredentials) =>
        Effect.gen(function*() {
          const staging = `${file}.${process.pid}.tmp`
          yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
          yield* fs.writeFileString(staging, yield* Schema.encodeEffect(CredentialsJson)(credentials), { mode: 0o600 })
          yield* fs.chmod(staging, 0o600)
          yield* fs.rename(staging, file)
        }).pipe(Effect.mapError(fileFailure("write", file)))

      const remove = fs.remove(file, { force: true }).pipe(Effect.mapError(fileFailure("remove", file)))

      return CredentialsStore.of({ file, load, save, remove })
    })
  )
}
