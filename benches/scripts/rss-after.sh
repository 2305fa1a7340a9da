#!/bin/bash
# RSS of one server before and after a run of every workload against it (3 s each: heartbeat,
# QUERY_DATA_VERSION, route, steady and changed registrations, a 20k/s registration storm),
# read each second for 8 s after the load (the heap is handed back to the OS within about 2 s
# of a burst's end, so the last reading is the one to report).
#
# usage: rss-after.sh SERVER_NAME...   (builds in $RMQ_BENCH_BIN, as for ab.sh)
source "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || { sed -n 2,7p "$0"; exit 2; }
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
for name in "$@"; do
  read -r pid addr < <(start_server "$name") || exit 1
  before=$(rss "$pid")
  for w in "heartbeat" "heartbeat --op query" "route" "register" "register --churn" \
    "mixed --rate 20000"; do
    # shellcheck disable=SC2086 # $w is a workload and its options
    "$B/rmq-bench" $w -n "$addr" -d 3 --quiet --json --pid "$pid" > /dev/null 2>&1
  done
  after=()
  for _ in $(seq 8); do sleep 1; after+=("$(rss "$pid")"); done
  echo "$name: RSS before ${before} KiB; after, each second: ${after[*]} KiB"
  kill "$pid"; wait "$pid" 2>/dev/null
done
