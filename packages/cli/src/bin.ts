#!/usr/bin/env node
/** The `cpctl` executable: exits 0, 1 after a failure, 2 after a usage mistake, 4 unauthenticated, 130 interrupted. */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { exitCodeOfExit } from "./errors.ts"
import { run } from "./main.ts"

run(process.argv.slice(2)).pipe(
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain({
    disableErrorReporting: true,
    teardown: (exit, onExit) => onExit(exitCodeOfExit(exit))
  })
)
