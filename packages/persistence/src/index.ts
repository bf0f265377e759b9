/** The persistence package: database layers, migrations, the transaction service and one repository per aggregate. */
export * as Database from "./Database.ts"
export { UniqueViolation, uniqueViolationOrDie } from "./errors.ts"
export { idPosition, type PagePosition, type PageWindow, windowOf } from "./keyset.ts"
export * as Memory from "./Memory.ts"
export * as Migrations from "./Migrations.ts"
export { Transactor } from "./Transactor.ts"

export * from "./platform/DatabaseHealth.ts"
export * from "./platform/EventLogRepo.ts"
export * from "./platform/IdempotencyRepo.ts"
export * from "./platform/JsonObject.ts"
export * from "./platform/OutboxRepo.ts"
export * from "./platform/RateLimitRepo.ts"
export * from "./platform/ServerSecretsRepo.ts"

export * from "./identity/ChallengesRepo.ts"
export * from "./identity/OAuthRepo.ts"
export * from "./identity/SecurityEventsRepo.ts"
export * from "./identity/SessionsRepo.ts"
export * from "./identity/UsersRepo.ts"

export * from "./workspaces/OrganizationsRepo.ts"
export * from "./workspaces/RoleBindingsRepo.ts"
export * from "./workspaces/rows.ts"

export * from "./apiKeys/ApiKeysRepo.ts"

export * from "./teams/rows.ts"
export * from "./teams/TeamsRepo.ts"

export * from "./projects/EnvironmentsRepo.ts"
export * from "./projects/ProjectsRepo.ts"
export * from "./projects/rows.ts"

export * from "./entitlements/EntitlementsRepo.ts"

export * from "./members/InvitationsRepo.ts"
export * from "./members/MembersRepo.ts"
export * from "./members/rows.ts"

export * from "./config/ConfigRepo.ts"
export * from "./config/rows.ts"

export * from "./secrets/rows.ts"
export * from "./secrets/SecretsRepo.ts"

export * from "./usage/rows.ts"
export * from "./usage/UsageRepo.ts"
export * from "./webhooks/DeliveriesRepo.ts"
export * from "./webhooks/EndpointsRepo.ts"
export * from "./webhooks/rows.ts"

export * from "./agents/AgentConnectionsRepo.ts"
export * from "./agents/rows.ts"
export * from "./objects/ObjectsRepo.ts"
export * from "./objects/rows.ts"
export * from "./quotas/QuotasRepo.ts"
export * from "./quotas/rows.ts"
export * from "./quotas/ViolationsRepo.ts"
export * from "./runs/CliLinksRepo.ts"
export * from "./runs/JobLogsRepo.ts"
export * from "./runs/rows.ts"
export * from "./runs/RunsRepo.ts"
export * from "./state/RefsRepo.ts"
export * from "./state/TfStateRepo.ts"
