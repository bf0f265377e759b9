/** One persistence flavour for the whole server: every repository plus the transaction service. */
import {
  ApiKeysRepo,
  ChallengesRepo,
  DatabaseHealth,
  EventLogRepo,
  IdempotencyRepo,
  InvitationsRepo,
  MembersRepo,
  OAuthRepo,
  OrganizationsRepo,
  OutboxRepo,
  RateLimitRepo,
  RoleBindingsRepo,
  SecurityEventsRepo,
  ServerSecretsRepo,
  SessionsRepo,
  TeamsRepo,
  Transactor,
  UsersRepo
} from "@cp/persistence"
import { Layer } from "effect"

export const RepositoriesSql = Layer.mergeAll(
  Transactor.sql,
  DatabaseHealth.sql,
  IdempotencyRepo.sql,
  RateLimitRepo.sql,
  ServerSecretsRepo.sql,
  OutboxRepo.sql,
  EventLogRepo.sql,
  UsersRepo.sql,
  ChallengesRepo.sql,
  SessionsRepo.sql,
  SecurityEventsRepo.sql,
  OAuthRepo.sql,
  OrganizationsRepo.sql,
  MembersRepo.sql,
  RoleBindingsRepo.sql,
  TeamsRepo.sql,
  InvitationsRepo.sql,
  ApiKeysRepo.sql
)

export const RepositoriesMemory = Layer.mergeAll(
  Transactor.memory,
  DatabaseHealth.memory,
  IdempotencyRepo.memory,
  RateLimitRepo.memory,
  ServerSecretsRepo.memory,
  OutboxRepo.memory,
  EventLogRepo.memory,
  UsersRepo.memory,
  ChallengesRepo.memory,
  SessionsRepo.memory,
  SecurityEventsRepo.memory,
  OAuthRepo.memory,
  OrganizationsRepo.memory,
  MembersRepo.memory,
  RoleBindingsRepo.memory,
  TeamsRepo.memory,
  InvitationsRepo.memory,
  ApiKeysRepo.memory
)
