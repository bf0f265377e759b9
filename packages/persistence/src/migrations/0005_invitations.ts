/** Invitations to join a workspace (members and role bindings already live in 0003). */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // Ids, emails and hashes compare byte-wise (collation "C"), as the memory repositories compare strings. Expiry is
  // derived from `expires_at` when read, so `status` holds only the states a request moves an invitation into.
  yield* sql`
    create table invitations (
      id text collate "C" not null constraint invitations_pkey primary key,
      org_id text collate "C" not null references organizations (id),
      email text collate "C" not null,
      role text not null,
      status text not null check (status in ('pending', 'accepted', 'revoked')),
      token_hash text collate "C" not null constraint invitations_token_hash_key unique,
      invited_by text collate "C" not null references users (id),
      expires_at timestamptz not null,
      created_at timestamptz not null,
      accepted_at timestamptz,
      accepted_by text collate "C" references users (id),
      revoked_at timestamptz,
      constraint invitations_accepted_check
        check ((status = 'accepted') = (accepted_at is not null and accepted_by is not null)),
      constraint invitations_revoked_check check ((status = 'revoked') = (revoked_at is not null))
    )`
  // A workspace's invitations, newest first.
  yield* sql`create index invitations_org_idx on invitations (org_id, created_at desc, id desc)`
  // The pending invitations of one address: the recipient's own list, and the "already invited" check.
  yield* sql`
    create index invitations_pending_email_idx on invitations (email, created_at desc, id desc)
    where status = 'pending'`
})
