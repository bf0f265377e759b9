/**
 * Audit commands: `audit list <workspace>` with every filter of the audit API as a flag, and `--limit` / `--cursor`
 * paging. Filters are checked here with the domain's own schemas, so a malformed one never leaves the machine.
 */
import { AuditActorType, AuditCategory, type AuditEntry, AuditInstant, AuditToken, PageQuery } from "@cp/domain"
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { ControlPlaneClient, withClient } from "../client.ts"
import { optionalKey } from "../options.ts"
import { type Columns, printResult, renderTable } from "../output.ts"

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

/** A value as a shell word: bare when safe, else single-quoted. */
const shellWord = (
  value: string
) => (/^[A-Za-z0-9_.:@/-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`)

const list = Command.make(
  "list",
  {
    workspace: Argument.String("workspace").pipe(
      Argument.withDescription("Workspace id (org_…), reference (ws_…) or slug")
    ),
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
    limit: Flag.String("limit").pipe(
      Flag.withSchema(PageQuery.limit.schema),
      Flag.withDescription("Page size, 1 to 100 (server default 50)"),
      Flag.optional
    ),
    cursor: Flag.String("cursor").pipe(
      Flag.withDescription("Continue after a previous page (same filters)"),
      Flag.optional
    )
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
    const page = yield* api.audit.list({
      params: { orgId: flags.workspace },
      query: { ...filters, ...optionalKey("limit", flags.limit), ...optionalKey("cursor", flags.cursor) }
    })
    // The next page needs the same filters: the cursor is bound to them.
    const nextPage = (cursor: string) =>
      [
        "More: cpctl audit list",
        shellWord(flags.workspace),
        ...Object.entries({ ...filters, ...optionalKey("limit", flags.limit) }).map(([key, value]) =>
          `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} ${
            shellWord(value instanceof Date ? value.toISOString() : String(value))
          }`
        ),
        `--cursor ${cursor}`
      ].join(" ")
    yield* printResult(
      page,
      ({ data, cursor }) =>
        [renderTable(entryColumns, data.auditEntries), ...(cursor === null ? [] : [nextPage(cursor)])].join("\n")
    )
  })
).pipe(Command.withDescription("List a workspace's audit entries, newest first"), withClient)

/** `cpctl audit`: read a workspace's audit log. */
export const audit = Command.make("audit").pipe(
  Command.withDescription("Read a workspace's audit log"),
  Command.withSubcommands([list])
)
