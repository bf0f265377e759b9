/** OAuth sign-in: the single-use state of a redirect in flight (with its PKCE verifier), and linked identities. */
import { UserId } from "@cp/domain/ids"
import { Context, Effect, flow, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { UniqueViolation } from "../errors.ts"
import { compositeKey, consumeUnexpired, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"
import { insertRow } from "../stored.ts"

/** The server side of one redirect flow in flight. */
export const OAuthStateRow = Schema.Struct({
  /** A random nonce; it travels signed in the provider round trip. */
  id: Schema.String,
  provider: Schema.String,
  /** The PKCE verifier whose S256 challenge went to the provider. */
  codeVerifier: Schema.String,
  redirectAfter: Schema.NullOr(Schema.String),
  expiresAt: Schema.Date,
  consumedAt: Schema.NullOr(Schema.Date),
  createdAt: Schema.Date
})
export type OAuthStateRow = typeof OAuthStateRow.Type

/** A provider account (`provider`, `subject`) linked to a user. */
export const OAuthIdentityRow = Schema.Struct({
  provider: Schema.String,
  subject: Schema.String,
  userId: UserId,
  email: Schema.String,
  createdAt: Schema.Date
})
export type OAuthIdentityRow = typeof OAuthIdentityRow.Type

/** The constraint behind the `UniqueViolation` of linking a provider account that is already linked. */
export const oauthIdentitiesConstraint = "oauth_identities_pkey"

const identityKey = (account: { readonly provider: string; readonly subject: string }) =>
  compositeKey(account.provider, account.subject)

const stateUniques: ReadonlyArray<UniqueKey<OAuthStateRow>> = [primaryKey("oauth_states_pkey")]
const identityUniques: ReadonlyArray<UniqueKey<OAuthIdentityRow>> = [
  { constraint: oauthIdentitiesConstraint, key: identityKey }
]

/** Consuming a state at `now`. */
export const StateConsumption = Schema.Struct({ id: Schema.String, now: Schema.Date })
export type StateConsumption = typeof StateConsumption.Type

/** A provider account: `subject` at `provider`. */
export const ProviderAccount = Schema.Struct({ provider: Schema.String, subject: Schema.String })
export type ProviderAccount = typeof ProviderAccount.Type

/** OAuth states and identities; consuming a state is one atomic statement, so a replayed callback finds nothing. */
export class OAuthRepo extends Context.Service<OAuthRepo, {
  readonly insertState: (state: OAuthStateRow) => Effect.Effect<void, UniqueViolation>
  /** Consumes the state if it exists, is unconsumed and unexpired at `now`; Some only for the one caller that did. */
  readonly consumeState: (consumption: StateConsumption) => Effect.Effect<Option.Option<OAuthStateRow>>
  readonly findIdentity: (account: ProviderAccount) => Effect.Effect<Option.Option<OAuthIdentityRow>>
  /** Links a provider account to a user; `UniqueViolation` when that account is linked already. */
  readonly linkIdentity: (identity: OAuthIdentityRow) => Effect.Effect<void, UniqueViolation>
}>()("@cp/persistence/identity/OAuthRepo") {
  /** States and identities in Maps, for fast deterministic tests. */
  static readonly memory = Layer.sync(OAuthRepo, () => {
    const states = new Map<string, OAuthStateRow>()
    const identities = new Map<string, OAuthIdentityRow>()
    return OAuthRepo.of({
      insertState: (state) => insertUnique(states, state.id, state, stateUniques),
      consumeState: ({ id, now }) => updateRow(states, id, consumeUnexpired(now)),
      findIdentity: (account) => Effect.sync(() => Option.fromUndefinedOr(identities.get(identityKey(account)))),
      linkIdentity: (identity) => insertUnique(identities, identityKey(identity), identity, identityUniques)
    })
  })

  /** States and identities in the `oauth_states` and `oauth_identities` tables. */
  static readonly sql = Layer.effect(
    OAuthRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return OAuthRepo.of({
        insertState: insertRow(sql, "oauth_states", OAuthStateRow),
        consumeState: flow(
          SqlSchema.findOneOption({
            Request: StateConsumption,
            Result: OAuthStateRow,
            execute: ({ id, now }) =>
              sql`
                update oauth_states set consumed_at = ${now}
                where id = ${id} and consumed_at is null and expires_at > ${now}
                returning *`
          }),
          Effect.orDie
        ),
        findIdentity: flow(
          SqlSchema.findOneOption({
            Request: ProviderAccount,
            Result: OAuthIdentityRow,
            execute: ({ provider, subject }) =>
              sql`select * from oauth_identities where provider = ${provider} and subject = ${subject}`
          }),
          Effect.orDie
        ),
        linkIdentity: insertRow(sql, "oauth_identities", OAuthIdentityRow)
      })
    })
  )
}
