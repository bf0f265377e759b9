/**
 * Audit commands: `audit list [-w <workspace>]` with every filter of the audit API as a flag, and `--limit` /
 * `--cursor` / `--all`
 * paging. Filters are checked here with the domain's own schemas, so a malformed one never leaves the machine.
 */
import { AuditActorType, AuditCategory, type AuditEntry, AuditInstant, AuditToken } from "@cp/domain"
import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { fetchRows, optionalKey, pageFlags, workspaceFlag } from "../options.ts"
import { type Columns, printList } from "../output.ts"

const entryColumns: Columns<AuditEntry> = {
  occurred: (entry) => entry.occurredAt,
  event: (entry) => entry.eventType,
  category: (entry) => entry.category,
  actor: (entry) => `${entry.actorType}:${entry.actorId}`,
  subject: (entry) => `${entry.subject.kind}:${entry.subject.id}`,
  description: (entry) => entry.description
}

const tokenFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withSchema(AuditToken), Flag.withDescription(description), Flag.optional)

const instantFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withSchema(AuditInstant), Flag.withDescription(description), Flag.optional)

const list = Command.make(
  "list",
  {
    workspace: workspaceFlag,
    category: Flag.String("category").pipe(
      Flag.withSchema(AuditCategory),
      Flag.withDescription("Only this category (api_keys, membership, billing, …)"),
      Flag.optional
    ),
    actorId: tokenFlag("actor-id", "Only entries caused by this actor (usr_…, sp_…, …)"),
    actorType: Flag.Literals("actor-type", AuditActorType.literals).pipe(
      Flag.withDescription("Only this kind of actor"),
      Flag.optional
    ),
    subjectKind: tokenFlag("subject-kind", "Only entries about this kind of subject (organization, member, …)"),
    subjectId: tokenFlag("subject-id", "Only entries about this subject"),
    eventType: tokenFlag("event-type", "Only this event type (e.g. member.role_changed)"),
    from: instantFlag("from", "Only entries at or after this instant (ISO 8601 with milliseconds)"),
    to: instantFlag("to", "Only entries at or before this instant (ISO 8601 with milliseconds)"),
    ...pageFlags
  },
  Effect.fn("cpctl.audit.list")(function*(flags) {
    const { api } = yield* ControlPlaneClient
    const filters = {
      ...optionalKey("category", flags.category),
      ...optionalKey("actorId", flags.actorId),
      ...optionalKey("actorType", flags.actorType),
      ...optionalKey("subjectKind", flags.subjectKind),
      ...optionalKey("subjectId", flags.subjectId),
      ...optionalKey("eventType", flags.eventType),
      ...optionalKey("from", flags.from),
      ...optionalKey("to", flags.to)
    }
    const { rows, next } = yield* fetchRows(flags, (query) =>
      Effect.map(
        api.audit.list({ params: { orgId: flags.workspace }, query: { ...filters, ...query } }),
        (page) => ({ rows: page.data.auditEntries, next: page.cursor })
      ))
    // The next page needs the same filters: the cursor is bound to them.
    yield* printList(rows, next, {
      columns: entryColumns,
      empty: "No audit entries.",
      command: [
        "cpctl",
        "audit",
        "list",
        "-w",
        flags.workspace,
        ...Object.entries({ ...filters, ...optionalKey("limit", flags.limit) }).flatMap(([key, value]) => [
          `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
          value instanceof Date ? value.toISOString() : String(value)
        ])
      ]
    })
  })
).pipe(Command.withDescription("List a workspace's audit entries, newest first"), withClient)

/** `cpctl audit`: read a workspace's audit log. */
export const audit = Command.make("audit").pipe(
  Command.withDescription("Read a workspace's audit log"),
  Command.withSubcommands([list])
)
