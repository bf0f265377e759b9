/**
 * Invitation commands: `invitations create <email> --role <role> --workspace <ref>`, `invitations list --workspace
 * <ref> [--status] [--limit] [--cursor]`, `invitations revoke <invitationId> --workspace <ref>`, `invitations mine`,
 * and `invitations accept <invitationId>` or `invitations accept --workspace <ref> --token <token>`.
 */
import {
  type AcceptedInvitation,
  type Invitation,
  InvitationId,
  InvitationStatus,
  InvitationToken,
  type MyInvitation,
  PageQuery,
  WorkspaceRole
} from "@cp/domain"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { CliFailure } from "../errors.ts"
import { optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"
import { workspaceFlag } from "./members.ts"

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

const limitFlag = Flag.String("limit").pipe(
  Flag.withSchema(PageQuery.limit.schema),
  Flag.withDescription("Page size, 1 to 100 (server default 50)"),
  Flag.optional
)
const cursorFlag = Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional)

const invitationId = Argument.String("invitation").pipe(
  Argument.withSchema(InvitationId),
  Argument.withDescription("The invitation's id (inv_…)")
)

/** The command that prints the next page. */
const more = (command: string, limit: Option.Option<number>, cursor: string) =>
  [
    `More: cpctl ${command}`,
    ...Option.match(limit, { onNone: () => [], onSome: (n) => [`--limit ${n}`] }),
    `--cursor ${cursor}`
  ].join(" ")

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
    const created = yield* api.invitations.create({ params: { orgId: workspace }, payload: { email, role } })
    yield* printResult(created, ({ invitation, delivery }) =>
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
    limit: limitFlag,
    cursor: cursorFlag
  },
  Effect.fn("cpctl.invitations.list")(function*({ workspace, status, limit, cursor }) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.invitations.list({
      params: { orgId: workspace },
      query: { ...optionalKey("status", status), ...optionalKey("limit", limit), ...optionalKey("cursor", cursor) }
    })
    const command = [
      `invitations list --workspace ${workspace}`,
      ...Option.match(status, { onNone: () => [], onSome: (s) => [`--status ${s}`] })
    ].join(" ")
    yield* printResult(
      page,
      ({ data, cursor }) =>
        [renderTable(invitationColumns, data.invitations), ...(cursor === null ? [] : [more(command, limit, cursor)])]
          .join("\n")
    )
  })
).pipe(Command.withDescription("List a workspace's invitations, newest first"), withClient)

const revoke = Command.make(
  "revoke",
  {
    invitation: invitationId,
    workspace: workspaceFlag
  },
  Effect.fn("cpctl.invitations.revoke")(function*({ invitation, workspace }) {
    const { api } = yield* ControlPlaneClient
    const revoked = yield* api.invitations.revoke({ params: { orgId: workspace, invitationId: invitation } })
    yield* printResult(revoked, ({ invitation }) => renderTable(invitationColumns, [invitation]))
  })
).pipe(Command.withDescription("Revoke a pending invitation"), withClient)

const mine = Command.make(
  "mine",
  {
    limit: limitFlag,
    cursor: cursorFlag
  },
  Effect.fn("cpctl.invitations.mine")(function*({ limit, cursor }) {
    const { api } = yield* ControlPlaneClient
    const page = yield* api.invitations.mine({
      query: { ...optionalKey("limit", limit), ...optionalKey("cursor", cursor) }
    })
    yield* printResult(page, ({ data, cursor }) =>
      [
        renderTable(myInvitationColumns, data.invitations),
        ...(cursor === null ? [] : [more("invitations mine", limit, cursor)])
      ].join("\n"))
  })
).pipe(Command.withDescription("List the pending invitations addressed to you"), withClient)

const accept = Command.make(
  "accept",
  {
    invitation: invitationId.pipe(Argument.optional),
    workspace: workspaceFlag.pipe(Flag.optional),
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
    return yield* new CliFailure({
      code: "invalid_flags",
      message: "give either an invitation id (see `cpctl invitations mine`) or --workspace with --token"
    })
  })
).pipe(Command.withDescription("Accept an invitation addressed to you"), withClient)

/** `cpctl invitations`: invite, list, revoke, and accept invitations. */
export const invitations = Command.make("invitations").pipe(
  Command.withDescription("Invite people to a workspace, list and revoke invitations, accept your own"),
  Command.withSubcommands([create, list, revoke, mine, accept])
)
