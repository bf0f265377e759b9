/** Slugs (contract §4): lowercase `a-z`, `0-9`, `-`, 1–63 characters, starting with a letter or digit. */

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
