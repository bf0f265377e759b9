/** Helpers for turning parsed flags into request fields. */
import { EnvironmentId, PageQuery, ProjectId } from "@cp/domain"
import { Option, Record } from "effect"
import { Flag } from "effect/cli"

/** `{ key: value }` when the option holds one, else `{}`: how an absent flag becomes an absent optional key. */
export const optionalKey = <const K extends string, A>(key: K, value: Option.Option<A>): { readonly [P in K]?: A } =>
  Option.match(value, { onNone: () => ({}), onSome: (present) => Record.singleton(key, present) })

/** `--limit` and `--cursor`: the paging flags of a list command. */
export const pageFlags = {
  limit: Flag.String("limit").pipe(
    Flag.withSchema(PageQuery.limit.schema),
    Flag.withDescription("Page size, 1 to 100 (server default 50)"),
    Flag.optional
  ),
  cursor: Flag.String("cursor").pipe(Flag.withDescription("Continue after a previous page"), Flag.optional)
}

/** The list query from the paging flags: only the keys whose flags were given. */
export const pageQuery = (
  flags: { readonly limit: Option.Option<number>; readonly cursor: Option.Option<string> }
) => ({
  ...optionalKey("limit", flags.limit),
  ...optionalKey("cursor", flags.cursor)
})

/** `--project` and `--environment` (optional ids of the scope below the workspace), with their help texts. */
export const belowWorkspaceFlags = (projectDescription: string, environmentDescription: string) => ({
  project: Flag.String("project").pipe(
    Flag.withSchema(ProjectId),
    Flag.withDescription(projectDescription),
    Flag.optional
  ),
  environment: Flag.String("environment").pipe(
    Flag.withSchema(EnvironmentId),
    Flag.withDescription(environmentDescription),
    Flag.optional
  )
})
