#!/bin/bash
# Instructions per request of a server build under callgrind: two fresh servers run the same
# workload for D1 and D2 seconds; (instructions2 - instructions1) / (requests2 - requests1),
# so start-up and the workload's setup cancel out. Deterministic enough (about ±1 %) to
# compare builds on a shared machine, where throughput is not.
#
# usage: cgdelta.sh SERVER-BUILD "WORKLOAD ARGS" [D1 D2]   e.g. cgdelta.sh ns-main "register --churn" 3 9
# Needs valgrind. Prints the two profile directories (for callgrind_annotate) on stderr.
source "$(dirname "$0")/lib.sh"
bin=$1; wl=$2; d1=${3:-3}; d2=${4:-9}
[ -n "$bin" ] && [ -n "$wl" ] || { sed -n 2,8p "$0"; exit 2; }
run() {
  local d=$1 dir addr
  dir=$(mktemp -d "$WORK/cg.XXXX")
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$B/$bin" --listenPort=0 \
    --logPath="$dir/ns.log" --kvConfigPath="$dir/kv.json" > "$dir/out.txt" 2>&1 &
  local pid=$!
  addr=$(listen_addr "$dir/out.txt") || { echo "cgdelta: $bin did not start" >&2; exit 1; }
  "$B/rmq-bench" $wl -n "$addr" -d "$d" --json --quiet > "$dir/r.json" 2>/dev/null
  kill -TERM $pid; wait $pid
  local ir ops
  ir=$(grep -E '^(summary|totals):' "$dir/cg.out" | head -1 | awk '{print $2}')
  ops=$(python3 -c "import json;d=json.load(open('$dir/r.json'));print(sum(c['ops'] for p in d['phases'] for c in p['classes']))")
  echo "$ir $ops $dir"
}
read -r ir1 ops1 dir1 < <(run "$d1")
read -r ir2 ops2 dir2 < <(run "$d2")
python3 -c "print('$bin', '$wl', 'requests', $ops1, $ops2, 'instructions per request %.0f' % (($ir2-$ir1)/($ops2-$ops1)))"
echo "profiles: $dir1 $dir2" >&2
