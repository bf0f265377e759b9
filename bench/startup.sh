#!/usr/bin/env bash
# First start on a fresh DATA_DIR, then a restart: wall time until /health answers 200, the server's CPU time by
# then (user+sys, less sensitive to a loaded machine), and RSS after 5 s idle.
cd "$(dirname "$0")/.."
d=$(mktemp -d)
tck=$(getconf CLK_TCK)
for run in first restart; do
  t0=$(date +%s.%N)
  APP_ENV=development PORT=${BENCH_PORT:-18098} DATA_DIR=$d/data node_modules/.bin/node --max-semi-space-size=64 packages/server/src/main.ts > $d/$run.log 2>&1 &
  pid=$!
  until curl -sf -o /dev/null http://127.0.0.1:${BENCH_PORT:-18098}/health; do sleep 0.05; done
  t1=$(date +%s.%N)
  cpu=$(awk -v t=$tck '{print ($14+$15)/t}' /proc/$pid/stat)
  sleep 5
  rss=$(awk '/VmRSS/{print $2/1024}' /proc/$pid/status)
  echo "$run: ready in $(echo "$t1 - $t0" | bc) s (cpu ${cpu} s), idle RSS ${rss} MB"
  kill -TERM $pid; wait $pid
done
rm -rf $d
