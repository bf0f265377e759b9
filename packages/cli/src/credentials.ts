/**
 * The files cpctl keeps in its config directory (`$CP_CONFIG_DIR`, else `~/.config/cpctl`, mode 0700):
 * `credentials.json`, the server signed in to and the session token (0600), and `config.json`, the default
 * workspace `cpctl workspaces use` sets (0600 too: it says which workspaces a user works in).
 */
import { Config, Context, Effect, FileSystem, Layer, Option, Path, Schema } from "effect"
import { homedir } from "node:os"
import { CliFailure } from "./errors.ts"

/** What `login` stores. */
export const StoredCredentials = Schema.Struct({ baseUrl: Schema.String, token: Schema.String })
export type StoredCredentials = typeof StoredCredentials.Type

/** What `workspaces use` stores. */
export const StoredDefaults = Schema.Struct({ workspace: Schema.String })
export type StoredDefaults = typeof StoredDefaults.Type

const fileFailure = (action: string, file: string) => (error: { readonly message: string }) =>
  new CliFailure({
    code: "credentials_file",
    message: `cannot ${action} ${file}: ${error.message}`
  })

/** The config directory: `$CP_CONFIG_DIR`, else `~/.config/cpctl`. */
export const configDirectory = Effect.gen(function*() {
  const path = yield* Path.Path
  return Option.getOrElse(
    yield* Effect.orDie(Config.option(Config.String("CP_CONFIG_DIR"))),
    () => path.join(homedir(), ".config", "cpctl")
  )
})

/** One JSON file of the config directory, read and written through its schema. */
export interface JsonFile<A> {
  readonly file: string
  readonly load: Effect.Effect<Option.Option<A>, CliFailure>
  readonly save: (value: A) => Effect.Effect<void, CliFailure>
  readonly remove: Effect.Effect<void, CliFailure>
}

const jsonFile = <A>(name: string, schema: Schema.Codec<A, unknown>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = yield* configDirectory
    const file = path.join(dir, name)
    const codec = Schema.fromJsonString(schema)

    const load = Effect.gen(function*() {
      if (!(yield* fs.exists(file))) return Option.none()
      return Option.some(yield* Schema.decodeEffect(codec)(yield* fs.readFileString(file)))
    }).pipe(Effect.mapError(fileFailure("read", file)))

    // Written beside the file and renamed over it, so the content never sits in a file with wider permissions.
    const save = (value: A) =>
      Effect.gen(function*() {
        const staging = `${file}.${process.pid}.tmp`
        yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
        yield* fs.writeFileString(staging, yield* Schema.encodeEffect(codec)(value), { mode: 0o600 })
        yield* fs.chmod(staging, 0o600)
        yield* fs.rename(staging, file)
      }).pipe(Effect.mapError(fileFailure("write", file)))

    const remove = fs.remove(file, { force: true }).pipe(Effect.mapError(fileFailure("remove", file)))

    return { file, load, save, remove } satisfies JsonFile<A>
  })

/** Reads, writes and removes `credentials.json`. */
export class CredentialsStore extends Context.Service<CredentialsStore, JsonFile<StoredCredentials>>()(
  "@cp/cli/CredentialsStore"
) {
  static readonly layer = Layer.effect(CredentialsStore, jsonFile("credentials.json", StoredCredentials))
}

/** Reads and writes `config.json`, the default workspace, beside the credentials. */
export class DefaultsStore extends Context.Service<DefaultsStore, JsonFile<StoredDefaults>>()(
  "@cp/cli/DefaultsStore"
) {
  static readonly layer = Layer.effect(DefaultsStore, jsonFile("config.json", StoredDefaults))
}
