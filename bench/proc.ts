/** A process's CPU time from /proc (Linux), for the benches' CPU time per request or per delivery. */
import { execFileSync } from "node:child_process"
import { readFile } from "node:fs/promises"

/** Clock ticks per second, the unit of `cpuTicks`. */
export const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** utime + stime of the whole process (every thread), in clock ticks. */
export const cpuTicks = async (pid: number): Promise<number> => {
  const text = await readFile(`/proc/${pid}/stat`, "utf8")
  // Fields after the parenthesised command name: state is field 3, utime field 14, stime field 15.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return Number(fields[11]) + Number(fields[12])
}
