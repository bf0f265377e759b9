/** The signed-in user behind an actor: it exists as long as its session does, so its absence is a defect. */
import type { UserId } from "@cp/domain"
import type { UsersRepo } from "@cp/persistence"
import { Effect } from "effect"
import { orFail } from "../platform/serviceKit.ts"

/** The user's row; dies when it is missing (an authenticated request names a user that must exist). */
export const authenticatedUser = (users: UsersRepo["Service"], userId: UserId) =>
  users.findById(userId).pipe(orFail(() => new Error(`authenticated user ${userId} is missing`)), Effect.orDie)
