/**
 * The SQL text of the statements a sign-in start sends (user by email, the auth-limit charge, the challenge with its
 * security event, the outbox row), each built once as one line: constant text is compiled by nothing per call, and the
 * driver keys its prepared statements by the text. Import-free on purpose, like `workspaces/resolution.ts`:
 * `bench/baseline.ts` sends these exact statements, so the two cannot drift apart.
 */

/** `UsersRepo.findByEmail` ($1 the normalized email): every column, named in camelCase (no per-row name transform). */
export const userByEmailSql = "select id, email, display_name as \"displayName\", last_org_slug as \"lastOrgSlug\", " +
  "email_verified as \"emailVerified\", created_at as \"createdAt\", updated_at as \"updatedAt\" " +
  "from users where email = $1"

/**
 * `RateLimitRepo` charge of one bucket ($1 key, $2 now, $3 the instant at or before which a window has closed, $4
 * limit): opens a new window, or counts within the open one while below the limit; a full bucket is only read back
 * (`allowed` false). Columns in camelCase.
 */
export const chargeBucketSql = [
  "with charged as (",
  "insert into rate_limit_buckets as b (key, window_start, count) values ($1, $2, 1)",
  "on conflict (key) do update",
  "set window_start = case when b.window_start <= $3 then excluded.window_start else b.window_start end,",
  "count = case when b.window_start <= $3 then 1 else b.count + 1 end",
  "where b.window_start <= $3 or b.count < $4::int4",
  "returning b.window_start)",
  "select true as \"allowed\", window_start as \"windowStart\" from charged",
  "union all",
  "select false, b.window_start from rate_limit_buckets b where b.key = $1 and not exists (select 1 from charged)"
].join(" ")

/**
 * `ChallengesRepo.insertWithEvent`: the challenge ($1–$7) and its security event ($8–$17, metadata as JSON text) in
 * one statement. A data-modifying CTE always runs, and one statement is atomic: both rows or neither.
 */
export const challengeWithEventSql = "with challenge as (insert into login_challenges " +
  "(id, email, code_hash, expires_at, failed_attempts, consumed_at, created_at) values ($1, $2, $3, $4, $5, $6, $7)) " +
  "insert into security_events " +
  "(id, user_id, email, event_type, outcome, occurred_at, request_id, ip, user_agent, metadata) " +
  "values ($8, $9, $10, $11, $12, $13, $14, $15, $16, $17::jsonb)"

/** `OutboxRepo.insert`: $1 id, $2 to, $3 template, $4 subject, $5 text, $6 data as JSON text, $7 createdAt. */
export const insertMailSql = "insert into mail_outbox (id, to_address, template, subject, text, data, created_at) " +
  "values ($1, $2, $3, $4, $5, $6::jsonb, $7)"
