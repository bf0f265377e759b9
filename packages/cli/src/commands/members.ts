/**
 * Member commands, in the workspace of `-w` (or the default): `members list [--limit] [--cursor] [--all]`,
 * `members set-role <memberId> <role>`, `members remove <memberId> [--yes]`.
 */
import { type Member, MemberId, WorkspaceRole } from "@cp/domain"
import { Effect } from "effect"
import { Argument, Command } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { confirm, fetchRows, flagWords, pageFlags, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

export { workspaceFlag }

/** Who each member is (email and name, `-` where there is none) beside the ids a command takes. */
export const memberColumns: Columns<Member> = {
  id: (member) => member.id,
  subject: (member) => member.subjectId,
  email: (member) => member.email,
  name: (member) => member.displayName,
  type: (member) => member.subjectType,
  roles: (member) =>
    member.roles.map(({ role, scopeKind }) => scopeKind === "organization" ? role : `${role}@${scopeKind}`).join(",") ||
    null,
  status: (member) => member.status,
  joined: (member) => member.joinedAt
}

const memberId = Argument.String("member").pipe(
  Argument.withSchema(MemberId),
  Argument.withDescription("The member's id (mem_…)")
)

const list = Command.make(
  "list",
  { workspace: workspaceFlag, ...pageFlags },
  Effect.fn("cpctl.members.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.members.list({ params: { orgId: flags.workspace }, query }),
        (page) => ({ rows: page.data.members, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: memberColumns,
      empty: "No members.",
      command: [
        "cpctl",
        "members",
        "list",
        "-w",
        flags.workspace,
        ...flagWords("--limit", flags.limit)
      ]
    })
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
    yield* printResult(updated.member, (member) => renderTable(memberColumns, [member]))
  })
).pipe(Command.withDescription("Make a role the member's only workspace role"), withClient)

const remove = Command.make(
  "remove",
  {
    member: memberId,
    workspace: workspaceFlag,
    yes: yesFlag
  },
  Effect.fn("cpctl.members.remove")(function*({ member, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(yes, `Remove member ${member} and every role it holds in ${workspace}?`)
    const removed = yield* api.members.remove({ params: { orgId: workspace, memberId: member } })
    yield* printResult(removed, () => `Removed ${member} from ${workspace}.`)
  })
).pipe(
  Command.withDescription("Remove a member and every role it holds in the workspace (asks unless --yes)"),
  withClient
)

/** `cpctl members`: list members, change a member's role, remove a member. */
export const members = Command.make("members").pipe(
  Command.withDescription("List a workspace's members, change their roles, remove them"),
  Command.withSubcommands([list, setRole, remove])
)
