#!/bin/bash
# Route lookups during a mass expiry: `rmq-bench expire` registers 10,000 brokers x 10 topics,
# each on its own connection, lets them go silent (3 s timeout) and looks routes up at
# 10,000/s from its own clients until every route is gone. REPS interleaved runs of each
# server build; per run: the lookups' p99, p99.9 and max during the expiry, and the server's
# longest loop turn over the whole run (`maxTurnMicros`, the setup's registrations included).
#
# BATCH=1 runs the generator as SCHED_BATCH (`chrt -b 0`): when the server closes the expired
# connections, the generator's wakeups then do not preempt the server's loop on a small host
# that runs both (a real cluster's brokers run elsewhere). Report both ways.
#
# usage: expire.sh REPS NAME...    e.g. expire.sh 5 ns-main ns-branch
source "$(dirname "$0")/lib.sh"
reps=$1; shift 2>/dev/null
[ -n "$1" ] || { sed -n 2,12p "$0"; exit 2; }
gen=("$B/rmq-bench")
[ "${BATCH:-0}" = 1 ] && gen=(chrt -b 0 "$B/rmq-bench")
for rep in $(seq "$reps"); do
  for name in "$@"; do
    read -r pid addr < <(start_server "$name") || exit 1
    out=$(mktemp "$WORK/expire.XXXX")
    "${gen[@]}" expire -n "$addr" --pid "$pid" --json --quiet > "$out" ||
      { echo "$name: rmq-bench expire failed" >&2; kill "$pid"; exit 1; }
    turn=$("$B/rmq-admin" -n "$addr" stats | awk '$1 == "maxTurnMicros" {print $2}')
    kill "$pid"; wait "$pid" 2>/dev/null
    python3 - "$name" "$rep" "$out" "$turn" <<'PY'
import json, sys
name, rep, out, turn = sys.argv[1:5]
r = json.load(open(out))
expire = [p for p in r['phases'] if p['name'] == 'expire'][0]
lat = [c['latency_us'] for c in expire['classes'] if c['name'] == 'route'][0]
print('%s run %s: route p99 %.0f us, p99.9 %.0f us, max %.0f us; longest turn %s us; errors %d' % (
    name, rep, lat['p99'], lat['p999'], lat['max'], turn, r['errors']))
PY
  done
done
