/** Identity tables: users, login challenges, sessions, the security-event log and OAuth sign-in state. */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // Ids and emails are compared byte-wise (collation "C"), as the memory repositories compare strings.
  yield* sql`
    create table users (
      id text collate "C" not null constraint users_pkey primary key,
      email text collate "C" not null constraint users_email_key unique,
      display_name text,
      last_org_slug text,
      email_verified boolean not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`

  yield* sql`
    create table login_challenges (
      id text collate "C" not null constraint login_challenges_pkey primary key,
      email text collate "C" not null,
      code_hash text not null,
      expires_at timestamptz not null,
      failed_attempts int4 not null check (failed_attempts >= 0),
      consumed_at timestamptz,
      created_at timestamptz not null
    )`

  yield* sql`
    create table sessions (
      id text collate "C" not null constraint sessions_pkey primary key,
      user_id text collate "C" not null references users (id),
      secret_hash text not null,
      expires_at timestamptz not null,
      revoked_at timestamptz,
      created_at timestamptz not null
    )`

  yield* sql`
    create table security_events (
      id text collate "C" not null constraint security_events_pkey primary key,
      user_id text collate "C" references users (id),
      email text collate "C" not null,
      event_type text not null,
      outcome text not null,
      occurred_at timestamptz not null,
      request_id text,
      ip text,
      user_agent text,
      metadata jsonb not null
    )`
  // The keyset order of a user's log, so each page is one index range scan.
  yield* sql`create index security_events_user_idx on security_events (user_id, occurred_at desc, id desc)`
  // Events recorded before their user existed, claimed by email at the first successful sign-in.
  yield* sql`create index security_events_unclaimed_email_idx on security_events (email) where user_id is null`

  yield* sql`
    create table oauth_states (
      id text collate "C" not null constraint oauth_states_pkey primary key,
      provider text not null,
      code_verifier text not null,
      redirect_after text,
      expires_at timestamptz not null,
      consumed_at timestamptz,
      created_at timestamptz not null
    )`

  yield* sql`
    create table oauth_identities (
      provider text collate "C" not null,
      subject text collate "C" not null,
      user_id text collate "C" not null references users (id),
      email text collate "C" not null,
      created_at timestamptz not null,
      constraint oauth_identities_pkey primary key (provider, subject)
    )`
})
