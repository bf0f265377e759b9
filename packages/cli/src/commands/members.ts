/**
 * Member commands: `members list --workspace <ref> [--limit] [--cursor]`, `members set-role <memberId> <role>
 * --workspace <ref>`, `members remove <memberId> --workspace <ref>`.
 */
import { type Member, MemberId, PageQuery, WorkspaceRole } from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

export const memberColumns: Columns<Member> = {
  id: (member) => member.id,
  subject: (member) => member.subjectId,
  type: (member) => member.subjectType,
  roles: (member) =>
    member.roles.map(({ role, scopeKind }) => scopeKind === "organization" ? role : `${role}@${scopeKind}`).join(",") ||
    null,
  status: (member) => member.status,
  joined: (member) => member.joinedAt
}

export const workspaceFlag = Flag.String("workspace").pipe(
  Flag.withAlias("w"),
  Flag.withDescription("Workspace id (org_…), reference (ws_…) or slug")
)

const memberId = Argument.String("member").pipe(
  Argument.withSchema(MemberId),
  Argument.withDescription("The member's id (mem_…)")
)

const list = Command.make(
  "list",
  {
    workspace: workspaceFlag,
    limit: Flag.String("limit").pipe(
      Flag.withSchema(PageQuery.limit.schema),
      Flag.withDescription("Page size, 1 to 100 (server default 50)"),
      Flag.optional
    ),
    cursor: Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional)
  },
  Effect.fn("cpctl.members.list")(function*({ workspace, limit, cursor }) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.members.list({
      params: { orgId: workspace },
      query: { ...optionalKey("limit", limit), ...optionalKey("cursor", cursor) }
    })
    const nextPage = (next: string) =>
      [
        `More: cpctl members list --workspace ${workspace}`,
        ...Option.match(limit, { onNone: () => [], onSome: (n) => [`--limit ${n}`] }),
        `--cursor ${next}`
      ].join(" ")
    yield* printResult(
      page,
      ({ data, cursor }) =>
        [renderTable(memberColumns, data.members), ...(cursor === null ? [] : [nextPage(cursor)])].join("\n")
    )
  })
).pipe(Command.withDescription("List a workspace's members and their roles"), withClient)

const setRole = Command.make(
  "set-role",
  {
    member: memberId,
    role: Argument.Literals("role", WorkspaceRole.literals).pipe(
      Argument.withDescription("The workspace role: owner, admin, builder, viewer or billing_admin")
    ),
    workspace: workspaceFlag
  },
  Effect.fn("cpctl.members.setRole")(function*({ member, role, workspace }) {
    const { api } = yield* ControlPlaneClient
    const updated = yield* api.members.updateRole({ params: { orgId: workspace, memberId: member }, payload: { role } })
    yield* printResult(updated, ({ member }) => renderTable(memberColumns, [member]))
  })
).pipe(Command.withDescription("Make a role the member's only workspace role"), withClient)

const remove = Command.make(
  "remove",
  {
    member: memberId,
    workspace: workspaceFlag
  },
  Effect.fn("cpctl.members.remove")(function*({ member, workspace }) {
    const { api } = yield* ControlPlaneClient
    const removed = yield* api.members.remove({ params: { orgId: workspace, memberId: member } })
    yield* printResult(removed, () => `Removed ${member} from ${workspace}.`)
  })
).pipe(Command.withDescription("Remove a member and every role it holds in the workspace"), withClient)

/** `cpctl members`: list members, change a member's role, remove a member. */
export const members = Command.make("members").pipe(
  Command.withDescription("List a workspace's members, change their roles, remove them"),
  Command.withSubcommands([list, setRole, remove])
)
