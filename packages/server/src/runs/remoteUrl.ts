/**
 * Remote URL canonicalisation (run-state.md §1): `https://host/owner/repo(.git)`, `ssh://git@host/owner/repo.git` and
 * `git@host:owner/repo.git` all become `https://host/owner/repo`: lower-case host, no `.git`, no trailing slash, no
 * credentials. A URL carrying a password is refused, as is anything that is not one of these forms.
 */

export interface CanonicalRemote {
  /** `https://host/owner/repo`. */
  readonly url: string
  /** The lower-case host (with a non-default port of an https URL). */
  readonly host: string
  /** `owner/repo` (more segments for nested groups), as written. */
  readonly path: string
  /** The last path segment: the repository's name. */
  readonly name: string
}

export type RemoteProblem = "password" | "form"

const SCP_LIKE = /^(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!\/\/)(.+)$/

const cleanPath = (raw: string): string | undefined => {
  const path = raw.replace(/^\/+/, "").replace(/\/+$/, "").replace(/\.git$/i, "").replace(/\/+$/, "")
  const segments = path.split("/")
  if (segments.length < 2 || segments.some((segment) => !/^[A-Za-z0-9._~-]+$/.test(segment) || /^\.+$/.test(segment))) {
    return undefined
  }
  return segments.join("/")
}

const canonical = (host: string, rawPath: string): CanonicalRemote | RemoteProblem => {
  const path = cleanPath(rawPath)
  if (path === undefined || !/^[a-z0-9.-]+(:[0-9]+)?$/.test(host) || host.startsWith(".")) return "form"
  return { url: `https://${host}/${path}`, host, path, name: path.split("/").at(-1) ?? path }
}

/** The canonical form of a remote URL, or why it has none. */
export const canonicalRemote = (input: string): CanonicalRemote | RemoteProblem => {
  const trimmed = input.trim()
  if (/^(https?|ssh|git\+ssh):\/\//i.test(trimmed)) {
    let url: URL
    try {
      url = new URL(trimmed)
    } catch {
      return "form"
    }
    if (url.password !== "") return "password"
    if (url.search !== "" || url.hash !== "") return "form"
    const https = /^https?:$/i.test(url.protocol)
    const host = (https && url.port !== "" ? `${url.hostname}:${url.port}` : url.hostname).toLowerCase()
    return canonical(host, decodeURIComponent(url.pathname))
  }
  const scp = SCP_LIKE.exec(trimmed)
  if (scp !== null && scp[1] !== undefined && scp[2] !== undefined) return canonical(scp[1].toLowerCase(), scp[2])
  return "form"
}
