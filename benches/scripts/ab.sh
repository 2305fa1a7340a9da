#!/bin/bash
# Interleaved A/B runs: each workload against each target (`canned` = the no-work ceiling,
# and server builds in $RMQ_BENCH_BIN), a fresh server per run, the target order rotated
# every repetition so that a slow spell of the host does not land on one target.
#
# usage: ab.sh OUTDIR REPS "canned ns-a ns-b" WORKLOAD...
#   a target NAME+prom runs build NAME with its Prometheus endpoint on, scraped every second
#   workloads: churn steady hb query query73 route route317 mixed mixed20k
#   D=SECONDS sets the run length (default 10). Summarise with summary.py OUTDIR.
source "$(dirname "$0")/lib.sh"
out=$1; reps=$2; targets=$3; shift 3
[ -n "$out" ] && [ -n "$reps" ] && [ $# -gt 0 ] || { sed -n 2,10p "$0"; exit 2; }
mkdir -p "$out"
D=${D:-10}
args_for() {
  case $1 in
    churn) echo "register --churn -d $D" ;;
    steady) echo "register -d $D" ;;
    hb) echo "heartbeat -d $D" ;;
    query | query73) echo "heartbeat --op query -d $D" ;;
    route) echo "route -d $D" ;;
    route317) echo "route --version 317 -d $D" ;;
    mixed) echo "mixed -d $D" ;;
    mixed20k) echo "mixed --rate 20000 -d $D" ;;
    *) echo "unknown workload $1" >&2; exit 2 ;;
  esac
}
for rep in $(seq "$reps"); do
  for wl in "$@"; do
    tl=($targets); n=${#tl[@]}
    for i in $(seq 0 $((n - 1))); do
      t=${tl[$(((i + rep) % n))]}
      case $wl in mixed*) [ "$t" = canned ] && continue ;; esac
      # canned answers with as many body bytes as the real reply carries.
      body=0; case $wl in route | route317) body=472 ;; query73) body=73 ;; esac
      read -r pid addr < <(start_server "$t" $body) || exit 1
      f=$out/$wl.$t.$rep
      "$B/rmq-bench" $(args_for "$wl") -n "$addr" --json --quiet --pid "$pid" > "$f.json" 2> "$f.err"
      rc=$?
      echo "$(date -u +%T) $wl $t rep$rep rc=$rc $(python3 -c "import json;d=json.load(open('$f.json'));print(d['ops_per_s'], 'other cores', d['machine']['other_cores'])" 2>/dev/null)"
      kill "$pid"; wait "$pid" 2>/dev/null
    done
  done
done
