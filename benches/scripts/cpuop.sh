#!/bin/bash
# Server CPU time (user + system) per request at a fixed request rate, so that builds are
# compared on equal work rather than on what a noisy host lets them reach.
#
# usage: cpuop.sh SERVER-BUILD "WORKLOAD ARGS" RATE [SECONDS]   e.g. cpuop.sh ns-main "register --churn" 15000 8
source "$(dirname "$0")/lib.sh"
bin=$1; wl=$2; rate=$3; d=${4:-8}
[ -n "$rate" ] || { sed -n 2,6p "$0"; exit 2; }
read -r pid addr < <(start_server "$bin") || exit 1
f=$(mktemp "$WORK/cpu.XXXX")
"$B/rmq-bench" $wl --rate "$rate" -n "$addr" -d "$d" --json --quiet --pid "$pid" > "$f.json" 2>/dev/null
kill "$pid"; wait "$pid" 2>/dev/null
python3 -c "
import json; d = json.load(open('$f.json')); s = d['server']; m = d['machine']
print('$bin', 'requests/s %.0f' % d['ops_per_s'], 'server CPU per request %.1f us' % (s['cpu_s'] * 1e6 / (d['ops_per_s'] * $d)),
      'RSS peak %.2f MiB' % (s['rss_peak_kib'] / 1024), 'other cores %.2f' % m.get('other_cores', 0))"
