#!/usr/bin/env node
/** The `cpctl` executable: exits 1 after printing a failure, 130 when interrupted. */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { run } from "./main.ts"

run(process.argv.slice(2)).pipe(
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain({ disableErrorReporting: true })
)
