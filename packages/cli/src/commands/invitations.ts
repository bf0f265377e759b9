/**
 * Invitation commands, in the workspace of `-w` (or the default): `invitations create <email> --role <role>`,
 * `invitations list [--status] [--limit] [--cursor] [--all]`, `invitations revoke <invitationId> [--yes]`,
 * `invitations mine`, and `invitations accept <invitationId>` or
 * `invitations accept --workspace <ref> --token <token>`.
 */
import {
  type AcceptedInvitation,
  type Invitation,
  InvitationId,
  InvitationStatus,
  InvitationToken,
  type MyInvitation,
  WorkspaceRole
} from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { usageError } from "../errors.ts"
import { confirm, fetchRows, flagWords, optionalKey, pageFlags, workspaceFlag, yesFlag } from "../options.ts"
import { type Columns, printList, printResult, renderTable } from "../output.ts"

const invitationColumns: Columns<Invitation> = {
  id: (invitation) => invitation.id,
  email: (invitation) => invitation.email,
  role: (invitation) => invitation.role,
  status: (invitation) => invitation.status,
  expires: (invitation) => invitation.expiresAt,
  created: (invitation) => invitation.createdAt
}

const myInvitationColumns: Columns<MyInvitation> = {
  id: (invitation) => invitation.id,
  workspace: (invitation) => invitation.org.slug,
  name: (invitation) => invitation.org.name,
  role: (invitation) => invitation.role,
  expires: (invitation) => invitation.expiresAt
}

const invitationId = Argument.String("invitation").pipe(
  Argument.withSchema(InvitationId),
  Argument.withDescription("The invitation's id (inv_…)")
)

const create = Command.make(
  "create",
  {
    email: Argument.String("email").pipe(Argument.withDescription("Who to invite")),
    role: Flag.Literals("role", WorkspaceRole.literals).pipe(
      Flag.withDescription("The workspace role it gets: owner, admin, builder, viewer or billing_admin")
    ),
    workspace: workspaceFlag
  },
  Effect.fn("cpctl.invitations.create")(function*({ email, role, workspace }) {
    const { api } = yield* ControlPlaneClient
    const { invitation, delivery } = yield* api.invitations.create({
      params: { orgId: workspace },
      payload: { email, role }
    })
    yield* printResult({ ...invitation, ...optionalKey("delivery", Option.fromNullishOr(delivery)) }, () =>
      [
        renderTable(invitationColumns, [invitation]),
        "",
        `The token was mailed to ${invitation.email}.`,
        ...(delivery === undefined ? [] : [`Token (development mode): ${delivery.token}`])
      ].join("\n"))
  })
).pipe(Command.withDescription("Invite an email address to the workspace; the token is mailed"), withClient)

const list = Command.make(
  "list",
  {
    workspace: workspaceFlag,
    status: Flag.Literals("status", InvitationStatus.literals).pipe(
      Flag.withDescription("Only invitations in this state (pending, accepted, revoked, expired)"),
      Flag.optional
    ),
    ...pageFlags
  },
  Effect.fn("cpctl.invitations.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.invitations.list({
          params: { orgId: flags.workspace },
          query: { ...optionalKey("status", flags.status), ...query }
        }),
        (page) => ({ rows: page.data.invitations, next: page.cursor })
      ))
    yield* printList(rows, next, {
      columns: invitationColumns,
      empty: "No invitations.",
      command: [
        "cpctl",
        "invitations",
        "list",
        "-w",
        flags.workspace,
        ...flagWords("--status", flags.status),
        ...flagWords("--limit", flags.limit)
      ]
    })
  })
).pipe(Command.withDescription("List a workspace's invitations, newest first"), withClient)

const revoke = Command.make(
  "revoke",
  {
    invitation: invitationId,
    workspace: workspaceFlag,
    yes: yesFlag
  },
  Effect.fn("cpctl.invitations.revoke")(function*({ invitation, workspace, yes }) {
    const { api } = yield* ControlPlaneClient
    yield* confirm(yes, `Revoke invitation ${invitation}? Its token stops working.`)
    const revoked = yield* api.invitations.revoke({ params: { orgId: workspace, invitationId: invitation } })
    yield* printResult(revoked.invitation, (invitation) => renderTable(invitationColumns, [invitation]))
  })
).pipe(Command.withDescription("Revoke a pending invitation"), withClient)

const mine = Command.make(
  "mine",
  {
    ...pageFlags
  },
  Effect.fn("cpctl.invitations.mine")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const { rows, next } = yield* fetchRows(
      flags,
      (query) =>
        Effect.map(api.invitations.mine({ query }), (page) => ({ rows: page.data.invitations, next: page.cursor }))
    )
    yield* printList(rows, next, {
      columns: myInvitationColumns,
      empty: "No pending invitations.",
      command: ["cpctl", "invitations", "mine", ...flagWords("--limit", flags.limit)]
    })
  })
).pipe(Command.withDescription("List the pending invitations addressed to you"), withClient)

const accept = Command.make(
  "accept",
  {
    invitation: invitationId.pipe(Argument.optional),
    workspace: Flag.String("workspace").pipe(
      Flag.withAlias("w"),
      Flag.withDescription("The workspace the --token is for (id, ws_… reference or slug)"),
      Flag.optional
    ),
    token: Flag.String("token").pipe(
      Flag.withSchema(InvitationToken),
      Flag.withDescription("The token from the invitation email (with --workspace)"),
      Flag.optional
    )
  },
  Effect.fn("cpctl.invitations.accept")(function*({ invitation, workspace, token }) {
    const { api } = yield* ControlPlaneClient
    const report = (accepted: AcceptedInvitation) =>
      printResult(
        accepted,
        ({ invitation, membership }) =>
          `Joined as ${membership.role} (member ${membership.id}) by invitation ${invitation.id}.`
      )
    if (Option.isSome(invitation) && Option.isNone(workspace) && Option.isNone(token)) {
      return yield* report(yield* api.invitations.acceptMine({ params: { invitationId: invitation.value } }))
    }
    if (Option.isNone(invitation) && Option.isSome(workspace) && Option.isSome(token)) {
      return yield* report(
        yield* api.invitations.accept({ params: { orgId: workspace.value }, payload: { token: token.value } })
      )
    }
    return yield* usageError(
      "give either an invitation id (see `cpctl invitations mine`) or --workspace with --token",
      "invalid_flags"
    )
  })
).pipe(Command.withDescription("Accept an invitation addressed to you"), withClient)

/** `cpctl invitations`: invite, list, revoke, and accept invitations. */
export const invitations = Command.make("invitations").pipe(
  Command.withDescription("Invite people to a workspace, list and revoke invitations, accept your own"),
  Command.withSubcommands([create, list, revoke, mine, accept])
)
