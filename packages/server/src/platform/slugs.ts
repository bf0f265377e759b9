/** Slugs (contract §4): lowercase `a-z`, `0-9`, `-`, 1–63 characters, starting with a letter or digit. */
import type { Transactor, UniqueViolation } from "@cp/persistence"
import { Effect } from "effect"

/** Derived slugs stop here, so a `-N` suffix always fits within 63 characters without cutting the base. */
const MAX_DERIVED_SLUG = 56

/** The slug a name suggests: `"Acme, Inc."` → `acme-inc`; never empty. */
export const slugify = (name: string, fallback = "workspace"): string => {
  const slug = name.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(
    /^-+|-+$/g,
    ""
  )
    .slice(0, MAX_DERIVED_SLUG).replace(/-+$/, "")
  return slug === "" ? fallback : slug
}

/** The first free slug among `base`, `base-2`, `base-3`, … given the taken ones. */
export const nextFreeSlug = (base: string, taken: ReadonlySet<string>): string => {
  if (!taken.has(base)) return base
  for (let n = 2;; n++) {
    if (!taken.has(`${base}-${n}`)) return `${base}-${n}`
  }
}

/** How a new row gets its slug: the caller's, or one derived from `base` (already a slug) when it gave none. */
export interface SlugChoice {
  readonly requested: string | undefined
  readonly base: string
}

/**
 * What inserting a row under a slug takes: the namespace its slugs are unique in (`teams:<orgId>`), the taken slugs of
 * a family there, the row for a slug, and its insert.
 */
export interface SlugSteps<Row> {
  readonly namespace: string
  readonly taken: (base: string) => Effect.Effect<ReadonlyArray<string>>
  readonly withSlug: (slug: string) => Row
  readonly insert: (row: Row) => Effect.Effect<void, UniqueViolation>
}

/**
 * Inserts the row under the first free `-N` suffix of `base`. Derived creates of one family take a lock on it
 * (namespace and base) for the rest of their transaction, so they pick their suffixes one after the other. A slug can
 * still be taken between the read and the insert by a create that named it, or by a rename: the insert runs in a
 * savepoint, and after its unique violation (raised once the other transaction committed) the family is read again
 * and the next free suffix is tried. Each retry follows a slug newly taken, so it ends; a violation on a slug the
 * family does not show is not a slug conflict, and a defect.
 */
export const insertWithDerivedSlug = <Row>(
  tx: Transactor["Service"],
  base: string,
  steps: SlugSteps<Row>
): Effect.Effect<Row> =>
  tx.withTransaction(Effect.gen(function*() {
    yield* tx.lock(`slug:${steps.namespace}:${base}`)
    let refused: string | undefined
    for (;;) {
      const taken = new Set(yield* steps.taken(base))
      if (refused !== undefined && !taken.has(refused)) {
        return yield* Effect.die(new Error(`insert under the free slug '${refused}' violated another unique rule`))
      }
      const slug = nextFreeSlug(base, taken)
      const row = steps.withSlug(slug)
      const inserted = yield* tx.withTransaction(steps.insert(row)).pipe(
        Effect.as(true),
        Effect.catchTag("UniqueViolation", () => Effect.succeed(false))
      )
      if (inserted) return row
      refused = slug
    }
  }))

/**
 * Inserts the row under the requested slug, whose being taken is the caller's conflict (`slugTaken`, contract §4),
 * or under a derived one when none was requested.
 */
export const insertWithSlug = <Row, E>(
  tx: Transactor["Service"],
  choice: SlugChoice,
  steps: SlugSteps<Row> & { readonly slugTaken: (slug: string) => E }
): Effect.Effect<Row, E> => {
  const { requested } = choice
  if (requested === undefined) return insertWithDerivedSlug(tx, choice.base, steps)
  const row = steps.withSlug(requested)
  return steps.insert(row).pipe(
    Effect.as(row),
    Effect.catchTag("UniqueViolation", () => Effect.fail(steps.slugTaken(requested)))
  )
}
