/** OAuth sign-in: the single-use state of a redirect in flight (with its PKCE verifier) and linked provider identities. */
import { UserId } from "@cp/domain/ids"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { type UniqueViolation, uniqueViolationOrDie } from "../errors.ts"
import { compositeKey, consumeUnexpired, insertUnique, primaryKey, type UniqueKey, updateRow } from "../memoryTable.ts"

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

const identityKey = (provider: string, subject: string) => compositeKey(provider, subject)

const stateUniques: ReadonlyArray<UniqueKey<OAuthStateRow>> = [primaryKey("oauth_states_pkey")]
const identityUniques: ReadonlyArray<UniqueKey<OAuthIdentityRow>> = [
  { constraint: oauthIdentitiesConstraint, key: (identity) => identityKey(identity.provider, identity.subject) }
]

const ConsumeState = Schema.Struct({ id: Schema.String, now: Schema.Date })
const IdentityKey = Schema.Struct({ provider: Schema.String, subject: Schema.String })

/** OAuth states and identities; consuming a state is one atomic statement, so a replayed callback finds nothing. */
export class OAuthRepo extends Context.Service<OAuthRepo, {
  readonly insertState: (state: OAuthStateRow) => Effect.Effect<void, UniqueViolation>
  /** Consumes the state if it exists, is unconsumed and unexpired at `now`; Some only for the one caller that did. */
  readonly consumeState: (id: string, now: Date) => Effect.Effect<Option.Option<OAuthStateRow>>
  readonly findIdentity: (provider: string, subject: string) => Effect.Effect<Option.Option<OAuthIdentityRow>>
  /** Links a provider account to a user; `UniqueViolation` when that account is linked already. */
  readonly linkIdentity: (identity: OAuthIdentityRow) => Effect.Effect<void, UniqueViolation>
}>()("@cp/persistence/identity/OAuthRepo") {
  /** States and identities in Maps, for fast deterministic tests. */
  static readonly memory = Layer.sync(OAuthRepo, () => {
    const states = new Map<string, OAuthStateRow>()
    const identities = new Map<string, OAuthIdentityRow>()
    return OAuthRepo.of({
      insertState: Effect.fn("OAuthRepo.insertState")((state: OAuthStateRow) =>
        insertUnique(states, state.id, state, stateUniques)
      ),
      consumeState: Effect.fn("OAuthRepo.consumeState")((id: string, now: Date) =>
        updateRow(states, id, consumeUnexpired(now))
      ),
      findIdentity: Effect.fn("OAuthRepo.findIdentity")(function*(provider: string, subject: string) {
        return Option.fromUndefinedOr(identities.get(identityKey(provider, subject)))
      }),
      linkIdentity: Effect.fn("OAuthRepo.linkIdentity")((identity: OAuthIdentityRow) =>
        insertUnique(identities, identityKey(identity.provider, identity.subject), identity, identityUniques)
      )
    })
  })

  /** States and identities in the `oauth_states` and `oauth_identities` tables. */
  static readonly sql = Layer.effect(
    OAuthRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insertState = SqlSchema.void({
        Request: OAuthStateRow,
        execute: (state) => sql`insert into oauth_states ${sql.insert(state)}`
      })
      const consumeState = SqlSchema.findOneOption({
        Request: ConsumeState,
        Result: OAuthStateRow,
        execute: ({ id, now }) =>
          sql`
            update oauth_states set consumed_at = ${now}
            where id = ${id} and consumed_at is null and expires_at > ${now}
            returning *`
      })
      const findIdentity = SqlSchema.findOneOption({
        Request: IdentityKey,
        Result: OAuthIdentityRow,
        execute: ({ provider, subject }) =>
          sql`select * from oauth_identities where provider = ${provider} and subject = ${subject}`
      })
      const linkIdentity = SqlSchema.void({
        Request: OAuthIdentityRow,
        execute: (identity) => sql`insert into oauth_identities ${sql.insert(identity)}`
      })
      return OAuthRepo.of({
        insertState: Effect.fn("OAuthRepo.insertState")((state: OAuthStateRow) =>
          uniqueViolationOrDie(insertState(state))
        ),
        consumeState: Effect.fn("OAuthRepo.consumeState")((id: string, now: Date) =>
          Effect.orDie(consumeState({ id, now }))
        ),
        findIdentity: Effect.fn("OAuthRepo.findIdentity")((provider: string, subject: string) =>
          Effect.orDie(findIdentity({ provider, subject }))
        ),
        linkIdentity: Effect.fn("OAuthRepo.linkIdentity")((identity: OAuthIdentityRow) =>
          uniqueViolationOrDie(linkIdentity(identity))
        )
      })
    })
  )
}
