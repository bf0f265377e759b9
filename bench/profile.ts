/**
 * Reads a V8 `.cpuprofile` (`node --cpu-prof`) and names where the time went: the top frames by self time and the
 * self time per area (a package under node_modules, a workspace package, Node internals, GC). Optionally only the
 * samples inside a time window (V8 profile timestamps are CLOCK_MONOTONIC microseconds, the clock of
 * `process.hrtime`), so one measured run can be picked out of a whole server's profile.
 *
 * `node bench/profile.ts <file.cpuprofile> [top]` prints the summary of a whole profile.
 */
import { readFile } from "node:fs/promises"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

export interface CpuProfile {
  readonly nodes: ReadonlyArray<{ readonly id: number; readonly callFrame: CallFrame }>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** A span of the monotonic clock, in microseconds. */
export interface Window {
  readonly fromUs: number
  readonly toUs: number
}

export interface Share {
  readonly name: string
  readonly samples: number
  /** Of the samples in which the process was busy (not idle). */
  readonly percent: number
}

export interface ProfileSummary {
  readonly busySamples: number
  readonly idleSamples: number
  /** Busy samples inside a socket write: see `SOCKET_WRITES`. */
  readonly writeSamples: number
  /** Shares of the busy samples outside socket writes. */
  readonly frames: ReadonlyArray<Share>
  readonly areas: ReadonlyArray<Share>
}

const SPECIAL = new Set(["(garbage collector)", "(program)", "(root)"])

/**
 * Node's native socket writes. V8 samples on a wall-clock timer, so on a machine with more runnable processes than
 * cores a write that wakes its reader (the database, the load generator) and gets the writer preempted is sampled
 * for as long as the writer waits for a core: these samples are mostly waiting, not CPU, and are set apart.
 */
const SOCKET_WRITES = new Set([
  "writeBuffer",
  "writev",
  "writeUtf8String",
  "writeLatin1String",
  "writeAsciiString",
  "writeUcs2String"
])

const shortUrl = (url: string): string => {
  const modules = url.lastIndexOf("/node_modules/")
  if (modules !== -1) return url.slice(modules + "/node_modules/".length)
  const packages = url.indexOf("/packages/")
  if (packages !== -1) return url.slice(packages + 1)
  return url.replace(/^file:\/\//, "")
}

const areaOf = (frame: CallFrame): string => {
  if (SPECIAL.has(frame.functionName)) return frame.functionName
  const url = frame.url
  if (url === "") return "(native / V8 builtins)"
  if (url.startsWith("node:")) return "node internals"
  const modules = url.lastIndexOf("/node_modules/")
  if (modules !== -1) {
    const [scope, name] = url.slice(modules + "/node_modules/".length).split("/")
    return scope?.startsWith("@") === true ? `${scope}/${name ?? ""}` : scope ?? url
  }
  const packages = /\/packages\/([^/]+)\//.exec(url)
  if (packages !== null) return `@cp/${packages[1] ?? ""}`
  return shortUrl(url)
}

const frameName = (frame: CallFrame): string =>
  SPECIAL.has(frame.functionName) || frame.url === ""
    ? frame.functionName || "(anonymous)"
    : `${frame.functionName || "(anonymous)"} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`

const ranked = (counts: Map<string, number>, busy: number, top: number): ReadonlyArray<Share> =>
  [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, samples]) => ({ name, samples, percent: busy === 0 ? 0 : (100 * samples) / busy }))

/** Self time by frame and by area, over the whole profile or only the samples inside `window`. */
export const summarize = (profile: CpuProfile, window?: Window, top = 15): ProfileSummary => {
  const frames = new Map<number, CallFrame>(profile.nodes.map((node) => [node.id, node.callFrame]))
  const byFrame = new Map<string, number>()
  const byArea = new Map<string, number>()
  let busy = 0
  let idle = 0
  let writes = 0
  let at = profile.startTime
  profile.samples.forEach((nodeId, i) => {
    at += profile.timeDeltas[i] ?? 0
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) return
    const frame = frames.get(nodeId)
    if (frame === undefined) return
    if (frame.functionName === "(idle)") {
      idle++
      return
    }
    busy++
    if (frame.url === "" && SOCKET_WRITES.has(frame.functionName)) {
      writes++
      return
    }
    const name = frameName(frame)
    byFrame.set(name, (byFrame.get(name) ?? 0) + 1)
    const area = areaOf(frame)
    byArea.set(area, (byArea.get(area) ?? 0) + 1)
  })
  const counted = busy - writes
  return {
    busySamples: busy,
    idleSamples: idle,
    writeSamples: writes,
    frames: ranked(byFrame, counted, top),
    areas: ranked(byArea, counted, top)
  }
}

export const readProfile = async (file: string): Promise<CpuProfile> =>
  JSON.parse(await readFile(file, "utf8")) as CpuProfile

/** The summary as indented text lines. */
export const formatSummary = (summary: ProfileSummary): string => {
  const line = (share: Share) => `    ${share.percent.toFixed(1).padStart(5)}%  ${share.name}`
  return [
    `  ${summary.busySamples} busy samples (${summary.idleSamples} idle); ` +
    `${summary.busySamples === 0 ? 0 : ((100 * summary.writeSamples) / summary.busySamples).toFixed(1)}% of them in ` +
    "socket writes (wall-clock samples, mostly waiting for a core on a loaded machine), left out below",
    "  self time by area (share of the other busy samples):",
    ...summary.areas.map(line),
    "  top frames by self time:",
    ...summary.frames.map(line)
  ].join("\n")
}

if (import.meta.main) {
  const [file, top] = process.argv.slice(2)
  if (file === undefined) {
    console.error("usage: node bench/profile.ts <file.cpuprofile> [top]")
    process.exit(2)
  }
  console.log(formatSummary(summarize(await readProfile(file), undefined, Number(top ?? "25"))))
}
